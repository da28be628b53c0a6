"""Middleware: a NUL in the path or the query string is a 400 before any view or query sees it; a body sent
without a Content-Length (``Transfer-Encoding: chunked``) is a 411, not an empty body."""

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


class RequireContentLengthMiddleware:
    """Refuse a request whose body comes with ``Transfer-Encoding`` with a JSON 411. Django under WSGI reads a
    body by its Content-Length only, so a chunked body would reach the view as an empty one: an upload
    refused as missing every field, or a write that looks like an empty form. (nginx, as the README runs it,
    buffers a chunked body and sends its Content-Length: only clients that reach gunicorn directly see this.)"""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        encoding = request.META.get("HTTP_TRANSFER_ENCODING", "")
        if encoding:
            return JsonResponse(
                {"detail": f"A request body sent with Transfer-Encoding ({encoding[:40]}) is not accepted; "
                 "send it with a Content-Length header."},
                status=411,
            )  # fmt: skip
        return self.get_response(request)
