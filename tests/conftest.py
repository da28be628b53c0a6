"""Shared fixtures: users, API clients, the catalog loaded once per session, the ``slow`` marker's rule,
and the rule that required services fail instead of skip."""

from __future__ import annotations

import os
import sys
from typing import Any

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


@pytest.fixture(autouse=True, scope="session")
def _fast_password_hasher():
    """MD5 instead of PBKDF2 for the users tests create: 0.45 s per password here, a few ms with MD5.

    Only in this test process; a test about hashing itself would override it again. Set in place, not
    with override_settings, which would also hide ``settings.SETTINGS_MODULE`` (the real-worker tests
    hand it to their workers).
    """
    from django.conf import settings
    from django.test.signals import setting_changed

    fast, saved = ["django.contrib.auth.hashers.MD5PasswordHasher"], settings.PASSWORD_HASHERS
    settings.PASSWORD_HASHERS = fast
    setting_changed.send(sender=None, setting="PASSWORD_HASHERS", value=fast, enter=True)
    yield
    settings.PASSWORD_HASHERS = saved
    setting_changed.send(sender=None, setting="PASSWORD_HASHERS", value=saved, enter=False)


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


# --- The catalog, loaded once per session -------------------------------------------------------------
#
# ``loadcatalog`` takes about two seconds; a few hundred tests read the real catalog. They ask for
# ``catalog`` (or a fixture built on ``catalog_layer``) and then run first, one after another
# (pytest_collection_modifyitems), inside one transaction that holds the loaded catalog: each test's
# own writes are rolled back at its end by pytest-django's per-test savepoint, as always, and the
# catalog is rolled back before the first test that did not ask for it, so that one sees an empty
# database. A transactional test (transactional_db, live_server) never runs inside it: its data must
# be committed for other processes, so ``catalog`` loads the catalog the old way there.


class CatalogLayer:
    """The real catalog (fixtures/catalog through ``loadcatalog``) in a transaction left open across tests."""

    def __init__(self, blocker: Any) -> None:
        self.blocker = blocker
        self.atomic: Any = None
        self.loads = 0  # how often the catalog was loaded this session (1 when the ordering works)

    @property
    def is_open(self) -> bool:
        return self.atomic is not None

    def open(self) -> None:
        from django.core.management import call_command
        from django.db import transaction

        with self.blocker.unblock():
            atomic = transaction.atomic()
            atomic._from_testcase = True  # a durable atomic block in a test stays allowed, as under TestCase
            atomic.__enter__()
            try:
                call_command("loadcatalog", verbosity=0)
            except BaseException:
                atomic.__exit__(*sys.exc_info())
                raise
        self.atomic = atomic
        self.loads += 1

    def close(self) -> None:
        from django.db import connection, transaction

        if self.atomic is None:
            return
        with self.blocker.unblock():
            if connection.atomic_blocks and connection.atomic_blocks[-1] is not self.atomic:
                raise RuntimeError("the catalog layer must be the innermost open transaction when it closes")
            transaction.set_rollback(True)
            self.atomic.__exit__(None, None, None)
        self.atomic = None

    def sync(self, wanted: bool) -> None:
        if wanted and not self.is_open:
            self.open()
        elif not wanted and self.is_open:
            self.close()


class _CatalogState:
    layer: CatalogLayer | None = None
    wanted = False  # whether the test being set up runs inside the layer


def _transactional(item: pytest.Item) -> bool:
    names = getattr(item, "fixturenames", ())
    marker = item.get_closest_marker("django_db")
    flagged = bool(marker and (marker.kwargs.get("transaction") or marker.kwargs.get("reset_sequences")))
    return flagged or "transactional_db" in names or "live_server" in names


def _wants_catalog_layer(item: pytest.Item) -> bool:
    return "catalog_layer" in getattr(item, "fixturenames", ()) and not _transactional(item)


@pytest.fixture(scope="session")
def catalog_layer(django_db_setup, django_db_blocker):
    """The session's catalog transaction; opened and closed around the tests by pytest_runtest_setup."""
    layer = CatalogLayer(django_db_blocker)
    _CatalogState.layer = layer
    layer.sync(_CatalogState.wanted)
    yield layer
    layer.close()
    _CatalogState.layer = None


@pytest.fixture
def catalog(catalog_layer, db) -> None:
    """The real catalog from fixtures/ (``loadcatalog``, i.e. catalog.services.catalog_load)."""
    if not catalog_layer.is_open:  # a transactional test: committed here, flushed after it
        from django.core.management import call_command

        call_command("loadcatalog", verbosity=0)


# --- Test order and the slow marker ---------------------------------------------------------------------

#: Tests that use these are slow whatever their module says: they start processes (a Celery worker,
#: a live server, the fake NVML's consumers in a child interpreter).
SLOW_FIXTURES = {"start_worker", "live_server", "fake_nvml_dir"}


def pytest_itemcollected(item: pytest.Item) -> None:
    """Mark ``slow`` the tests that use SLOW_FIXTURES (before ``-m`` selects)."""
    if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())) and item.get_closest_marker("slow") is None:
        item.add_marker(pytest.mark.slow)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the catalog-layer tests first, in one block.

    trylast: after pytest-django's own order (database tests, then transactional ones, then the rest),
    which this stable sort keeps, since every catalog-layer test is a (non-transactional) database test.
    """
    items.sort(key=lambda item: not _wants_catalog_layer(item))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before the test's fixtures (so before its own transaction): open or close the catalog layer."""
    _CatalogState.wanted = _wants_catalog_layer(item)
    if _CatalogState.layer is not None:
        _CatalogState.layer.sync(_CatalogState.wanted)
