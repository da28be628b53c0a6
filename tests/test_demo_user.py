"""`manage.py createdemouser`: development only, never takes over an account, prints a working token."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.authtoken.models import Token

pytestmark = pytest.mark.django_db


def _run(*args: str) -> str:
    out = StringIO()
    call_command("createdemouser", *args, stdout=out)
    return out.getvalue()


def test_refuses_without_debug(settings) -> None:
    settings.DEBUG = False
    with pytest.raises(CommandError, match="DJANGO_DEBUG"):
        _run()


def test_creates_once_then_keeps_the_password(settings, django_user_model) -> None:
    settings.DEBUG = True
    first = _run("--username", "demo")
    user = django_user_model.objects.get(username="demo")
    assert user.is_superuser and "created" in first
    assert Token.objects.get(user=user).key in first
    hashed = user.password
    again = _run("--username", "demo")
    assert "password unchanged" in again
    user.refresh_from_db()
    assert user.password == hashed
    assert "reset" in _run("--username", "demo", "--reset")
    user.refresh_from_db()
    assert user.password != hashed


def test_never_promotes_an_existing_ordinary_user(settings, user) -> None:
    settings.DEBUG = True
    for extra in ((), ("--reset",)):
        with pytest.raises(CommandError, match="not a superuser"):
            _run("--username", user.username, *extra)
    user.refresh_from_db()
    assert not user.is_staff and user.check_password("alice-password-123")
