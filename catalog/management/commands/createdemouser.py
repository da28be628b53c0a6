"""Create the demo staff user that `make run` prints, with an API token. Development only."""

from __future__ import annotations

import os
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from rest_framework.authtoken.models import Token


class Command(BaseCommand):
    help = "Create the demo admin user (DJANGO_DEBUG only) and print its password and API token."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default=os.environ.get("DEMO_USERNAME", "demo"))
        parser.add_argument("--reset", action="store_true", help="set a new password if the user exists")
        parser.add_argument("--base-url", default=f"http://127.0.0.1:{os.environ.get('PORT', '8000')}")

    def handle(self, *args, username: str, reset: bool, base_url: str, **options) -> None:
        if not settings.DEBUG:
            raise CommandError(
                "createdemouser only runs with DJANGO_DEBUG on: it makes a superuser with a known password."
            )
        users = get_user_model().objects
        user = users.filter(username=username).first()
        password = os.environ.get("DEMO_PASSWORD") or secrets.token_urlsafe(12)
        if user is not None and not user.is_superuser:
            raise CommandError(f"{username!r} exists and is not a superuser; choose another --username.")
        if user is None:
            user = users.create_superuser(username=username, email="", password=password)
            state = f"created:  user {username}  password {password}"
        elif reset:
            user.set_password(password)
            user.save(update_fields=["password"])
            state = f"reset:  user {username}  password {password}"
        else:
            state = f"exists:  user {username}  (password unchanged; `manage.py createdemouser --reset` sets a new one)"
        token, _ = Token.objects.get_or_create(user=user)
        self.stdout.write(
            f"\n  Demo admin {state}\n"
            f"  API token:  {token.key}\n"
            f"  Try:  curl -H 'Authorization: Token {token.key}' "
            f"'{base_url}/api/v1/configurations/?min_memory=80GB&precision=fp8'\n"
        )
