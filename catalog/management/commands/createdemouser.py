"""Create (or reset) the demo staff user that `make run` prints, with an API token."""

from __future__ import annotations

import os
import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from rest_framework.authtoken.models import Token


class Command(BaseCommand):
    help = "Create or reset the demo admin user and print its password and API token."

    def add_arguments(self, parser) -> None:  # type: ignore[no-untyped-def]
        parser.add_argument("--username", default=os.environ.get("DEMO_USERNAME", "demo"))

    def handle(self, *args, username: str, **options) -> None:  # type: ignore[no-untyped-def]
        password = os.environ.get("DEMO_PASSWORD") or secrets.token_urlsafe(12)
        user, created = get_user_model().objects.get_or_create(
            username=username, defaults={"is_staff": True, "is_superuser": True, "email": ""}
        )
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        token, _ = Token.objects.get_or_create(user=user)
        self.stdout.write(
            f"\n  Demo admin {'created' if created else 'reset'}:  user {username}  password {password}\n"
            f"  API token:  {token.key}\n"
            f"  Try:  curl -H 'Authorization: Token {token.key}' "
            "'http://127.0.0.1:8000/api/v1/configurations/?min_memory=80GB&precision=fp8'\n"
        )
