"""Shared fixtures: users, API clients, and the rule that required services fail instead of skip."""

from __future__ import annotations

import os

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

REQUIRE_SERVICES = os.environ.get("REQUIRE_SERVICES") == "1"


def skip_or_fail(reason: str) -> None:
    """Skip a test whose service is missing, or fail it when CI said the services must be there."""
    if REQUIRE_SERVICES:
        pytest.fail(f"REQUIRE_SERVICES=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(autouse=True)
def _fresh_rate_limits(request) -> None:
    """Tests that use the database start with no request counted against any rate limit: the counts live
    in the cache (vramplan.throttling), which outlives a test, and in Redis the test run; user ids repeat."""
    if request.node.get_closest_marker("django_db") or {"db", "transactional_db"} & set(request.fixturenames):
        from django.core.cache import cache

        cache.clear()  # this cache's keys only, never the broker's (vramplan.cache)


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="alice", password="alice-password-123")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user(username="bob", password="bob-password-123")


@pytest.fixture
def staff_user(django_user_model):
    return django_user_model.objects.create_user(username="staff", password="staff-password-123", is_staff=True)


def _token_client(user) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def api(user) -> APIClient:
    """An API client signed in with alice's token."""
    return _token_client(user)


@pytest.fixture
def other_api(other_user) -> APIClient:
    return _token_client(other_user)


@pytest.fixture
def staff_api(staff_user) -> APIClient:
    return _token_client(staff_user)


@pytest.fixture
def anon_api() -> APIClient:
    return APIClient()
