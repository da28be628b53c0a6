"""Catalog editors; the real catalog is tests/conftest.py's ``catalog`` fixture (loaded once per session)."""

import pytest
from django.contrib.auth.models import Permission
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient


@pytest.fixture
def editor(django_user_model):
    """A staff user holding every catalog model permission: what a catalog write needs, in the API as in the admin."""
    user = django_user_model.objects.create_user(username="editor", password="editor-password-123", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="catalog"))
    return user


@pytest.fixture
def editor_api(editor) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=editor)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client
