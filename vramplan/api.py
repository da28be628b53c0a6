"""API-wide pieces: the exception handler that keeps every error a clear 4xx with field names."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError as PydanticValidationError
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


def pydantic_errors(exc: PydanticValidationError) -> dict[str, list[str]]:
    """Map pydantic errors to ``{"inference.concurrent_sessions": ["..."]}`` like DRF's field errors."""
    errors: dict[str, list[str]] = {}
    for error in exc.errors(include_url=False):
        path = ".".join(str(part) for part in error["loc"]) or "non_field_errors"
        errors.setdefault(path, []).append(error["msg"])
    return errors


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, PydanticValidationError):
        return Response(pydantic_errors(exc), status=status.HTTP_400_BAD_REQUEST)
    return drf_exception_handler(exc, context)
