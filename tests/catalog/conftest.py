import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from catalog.models import Configuration


@pytest.fixture
def catalog(db) -> None:
    """The real catalog from fixtures/, loaded by ``loadcatalog`` (catalog.services.catalog_load)."""
    if not Configuration.objects.exists():
        call_command("loadcatalog", verbosity=0)


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
