"""Middleware: a NUL in the path or the query string is a 400 before any view or query sees it."""

from __future__ import annotations

from urllib.parse import unquote

from django.http import HttpRequest, HttpResponse, JsonResponse

from .parsers import NUL


class RejectNulMiddleware:
    """Refuse NUL in the URL with a JSON 400."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if NUL in request.path or NUL in unquote(request.META.get("QUERY_STRING", "")):
            return JsonResponse({"detail": "NUL characters are not allowed in URLs."}, status=400)
        return self.get_response(request)
