"""API-wide error handling that keeps every failure a clear 4xx.

- pydantic validation errors become 400s keyed by dotted field path (``inference.concurrent_sessions``),
  each message naming the allowed values or range (``budgets.engine.validation_errors``);
- deleting a catalog row that others still reference is a 409 naming them (``on_delete=PROTECT``);
- an unknown ``/api/`` URL is a JSON 404, like every other API answer;
- a body larger than ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is a 413 naming the limit (Django refuses it from
  its Content-Length before reading it); too many form fields or files a 400;
- a throttled request (429) carries ``Retry-After`` and says the same seconds in its detail (DRF).

NUL characters are refused before they reach a view: ``vramplan.parsers`` (bodies) and
``vramplan.middleware`` (URLs).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.db.models import ProtectedError, RestrictedError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import page_not_found
from pydantic import ValidationError as PydanticValidationError
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from budgets.engine import validation_errors
from budgets.services import BudgetOutOfRange
from measurements.services import ServiceError


def _protected_detail(exc: ProtectedError | RestrictedError) -> dict[str, Any]:
    blockers = list(exc.protected_objects if isinstance(exc, ProtectedError) else exc.restricted_objects)
    shown = ", ".join(f"{type(obj)._meta.verbose_name} {obj}" for obj in blockers[:10])
    more = f" and {len(blockers) - 10} more" if len(blockers) > 10 else ""
    return {"detail": f"Still referenced by {len(blockers)} object(s): {shown}{more}. Remove or reassign those first."}


def _too_big(context: dict[str, Any]) -> str:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    request = context.get("request")
    sent = request.META.get("CONTENT_LENGTH", "") if request is not None else ""
    size = f" ({int(sent):,} bytes)" if str(sent).isascii() and str(sent).isdigit() else ""  # not "¹"
    return (
        f"The request body{size} is larger than the limit of {limit:,} bytes "
        f"({limit / 2**20:g} MiB, DATA_UPLOAD_MAX_MEMORY_SIZE)."
    )


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, PydanticValidationError):
        return Response(validation_errors(exc), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, BudgetOutOfRange):
        return Response({"workload": [str(exc)]}, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, ServiceError):
        if exc.conflict:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response({exc.field: [str(exc)]}, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, ProtectedError | RestrictedError):
        return Response(_protected_detail(exc), status=status.HTTP_409_CONFLICT)
    if isinstance(exc, RequestDataTooBig):
        return Response({"detail": _too_big(context)}, status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    if isinstance(exc, TooManyFieldsSent | TooManyFilesSent):
        return Response({"detail": f"{exc} Send the data as one JSON body."}, status=status.HTTP_400_BAD_REQUEST)
    return drf_exception_handler(exc, context)


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """JSON 404s under /api/, Django's page elsewhere (the admin)."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    return page_not_found(request, exception)
