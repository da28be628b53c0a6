"""Failed sign-ins are limited per username and per client address (issue 16, finding 4: 40 wrong passwords,
then the right one worked), on both password forms: the admin's and the browsable API's."""

from __future__ import annotations

import time

import pytest
from django.conf import settings
from django.test import Client, override_settings

pytestmark = pytest.mark.django_db

FORMS = ["/api-auth/login/", "/admin/login/"]


def _sign_in(client: Client, url: str, username: str, password: str, address: str = "192.0.2.10"):
    return client.post(url, {"username": username, "password": password}, REMOTE_ADDR=address)


def _signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_the_defaults_are_five_per_username_and_twenty_per_address_in_fifteen_minutes() -> None:
    assert settings.LOGIN_FAILURES_PER_USERNAME == 5
    assert settings.LOGIN_FAILURES_PER_ADDRESS == 20
    assert settings.LOGIN_FAILURE_WINDOW_SECONDS == 900


@pytest.mark.parametrize("url", FORMS)
def test_after_the_limit_even_the_right_password_is_refused_with_a_429_that_says_why(url, staff_user) -> None:
    client = Client()
    for _ in range(settings.LOGIN_FAILURES_PER_USERNAME):
        response = _sign_in(client, url, "staff", "wrong-password")
        assert response.status_code == 200 and not _signed_in(client)
    refused = _sign_in(client, url, "staff", "staff-password-123")
    assert refused.status_code == 429 and not _signed_in(client)
    assert 1 <= int(refused["Retry-After"]) <= settings.LOGIN_FAILURE_WINDOW_SECONDS
    assert "Too many failed sign-ins for this username (5 within 900 seconds)" in refused.content.decode()
    other = Client()  # another address is refused too: the limit is the username's
    assert _sign_in(other, url, "staff", "staff-password-123", address="198.51.100.9").status_code == 429


@pytest.mark.parametrize("url", FORMS)
def test_one_address_trying_many_usernames_is_refused_after_its_own_limit(url, staff_user) -> None:
    client = Client()
    with override_settings(LOGIN_FAILURES_PER_ADDRESS=3):
        for name in ("a", "b", "c"):
            assert _sign_in(client, url, name, "wrong").status_code == 200
        refused = _sign_in(client, url, "staff", "staff-password-123")
        assert refused.status_code == 429 and "for this address (3 within 900 seconds)" in refused.content.decode()
        # ... and the client writing its own X-Forwarded-For is still the same address (no trusted proxy)
        forged = client.post(url, {"username": "staff", "password": "staff-password-123"}, REMOTE_ADDR="192.0.2.10",
                             HTTP_X_FORWARDED_FOR="203.0.113.5")  # fmt: skip
        assert forged.status_code == 429
        assert _sign_in(Client(), url, "staff", "staff-password-123", address="198.51.100.9").status_code == 302


def test_a_successful_sign_in_clears_its_usernames_count(staff_user) -> None:
    client = Client()
    for _ in range(2):
        for _ in range(settings.LOGIN_FAILURES_PER_USERNAME - 1):
            assert _sign_in(client, "/api-auth/login/", "staff", "wrong").status_code == 200
        assert _sign_in(client, "/api-auth/login/", "staff", "staff-password-123").status_code == 302
        client.logout()


def test_a_refused_sign_in_does_not_extend_the_window(staff_user) -> None:
    client = Client()
    with override_settings(LOGIN_FAILURES_PER_USERNAME=1, LOGIN_FAILURE_WINDOW_SECONDS=1):
        assert _sign_in(client, "/api-auth/login/", "staff", "wrong").status_code == 200
        assert _sign_in(client, "/api-auth/login/", "staff", "staff-password-123").status_code == 429
        time.sleep(1.2)
        assert _sign_in(client, "/api-auth/login/", "staff", "staff-password-123").status_code == 302
