"""A limit on failed sign-ins (the admin's and the browsable API's password forms), counted in the shared cache.

``LOGIN_FAILURES_PER_USERNAME`` failed sign-ins for one username, or ``LOGIN_FAILURES_PER_ADDRESS`` from one
client address (``vramplan.throttling.client_address``), within ``LOGIN_FAILURE_WINDOW_SECONDS`` of the
first: every further sign-in for that username or from that address is refused until the window closes,
the right password included, without checking it. The form says so and the answer is a 429 with
``Retry-After``. A successful sign-in clears its username's count (not its address's: one address can hold
many accounts). Failures are counted with the rate limits' atomic counter (``throttling.count_in_window``),
so every web process sees one count. The username is counted whether or not such a user exists, so a
refusal says nothing about which usernames exist.
"""

from __future__ import annotations

import hashlib
import math
import time
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse

from .throttling import client_address, count_in_window, forget_window, peek_in_window

REFUSED = "too_many_failed_sign_ins"


def _keys(request: HttpRequest | None, username: str) -> list[tuple[str, int, str]]:
    """(cache key, limit, what is limited) for the username and the client address."""
    digest = hashlib.sha256(username.casefold().encode()).hexdigest()[:32]  # any text, a bounded key
    keys = [(f"login-failures:user:{digest}", settings.LOGIN_FAILURES_PER_USERNAME, "this username")]
    if request is not None:
        keys.append((f"login-failures:addr:{client_address(request)}", settings.LOGIN_FAILURES_PER_ADDRESS,
                     "this address"))  # fmt: skip
    return keys


def login_refusal(request: HttpRequest | None, username: str) -> tuple[str, int] | None:
    """(the message, seconds until it lifts) when sign-ins for ``username`` or from the request's address are
    refused now; None when they are not."""
    window = settings.LOGIN_FAILURE_WINDOW_SECONDS
    for key, limit, what in _keys(request, username):
        count, left_s = peek_in_window(cache, key, window, time.time())
        if count >= limit:
            seconds = max(1, math.ceil(left_s))
            return (
                f"Too many failed sign-ins for {what} ({limit} within {window} seconds): "
                f"sign-in is refused for {seconds} more seconds.",
                seconds,
            )
    return None


def login_failed(request: HttpRequest | None, username: str) -> None:
    for key, _, _ in _keys(request, username):
        count_in_window(cache, key, settings.LOGIN_FAILURE_WINDOW_SECONDS, time.time())


def login_succeeded(username: str) -> None:
    forget_window(cache, _keys(None, username)[0][0])


class LoginLimitMixin:
    """For an ``AuthenticationForm``: refuse before checking the password while the limit holds; count a
    failed check. ``retry_after_s`` is set on a refusal (``with_refusal_status`` answers it as a 429)."""

    retry_after_s: int | None = None

    def clean(self) -> dict[str, Any]:
        form: Any = self
        username = str(form.cleaned_data.get("username") or "")
        refusal = login_refusal(form.request, username) if username else None
        if refusal is not None:
            message, self.retry_after_s = refusal
            raise ValidationError(message, code=REFUSED)
        try:
            cleaned: dict[str, Any] = super().clean()  # type: ignore[misc]
        except ValidationError:
            if username and form.cleaned_data.get("password") and form.user_cache is None:
                login_failed(form.request, username)
            raise
        login_succeeded(username)
        return cleaned


class LoginLimitedAuthenticationForm(LoginLimitMixin, AuthenticationForm):
    pass


class LoginLimitedAdminAuthenticationForm(LoginLimitMixin, AdminAuthenticationForm):
    pass


def with_refusal_status(response: HttpResponse) -> HttpResponse:
    """A login page whose form was refused by the limit: 429 with ``Retry-After`` (the page says why)."""
    form = (getattr(response, "context_data", None) or {}).get("form")
    seconds = getattr(form, "retry_after_s", None)
    if seconds:
        response.status_code = 429
        response["Retry-After"] = str(seconds)
    return response


def refusal_status(view: Any) -> Any:
    """``with_refusal_status`` around a login view (``functools.wraps`` keeps its ``view_class``)."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return with_refusal_status(view(request, *args, **kwargs))

    return wrapped
