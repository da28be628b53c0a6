"""The recommender's per-process configuration views (``services.catalog_views``): reused while the catalog
stays the same, rebuilt when it changes, never kept from inside a transaction.

Transactional tests: the views are only kept outside a transaction, as in a request served by gunicorn.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.cache import cache
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from catalog.models import Configuration, Node
from recommendations import services
from recommendations.plans import ConfigurationView
from tests.factories import ConfigurationFactory, NodeFactory

pytestmark = pytest.mark.django_db(transaction=True)

WORKLOAD = {
    "name": "llama-8b-chat",
    "model": {"preset": "llama-3.1-8b"},
    "precision": {"weights": "bf16"},
    "inference": {"engine": "vllm", "max_input_tokens": 4096, "max_output_tokens": 512, "concurrent_sessions": 4},
}


@pytest.fixture(autouse=True)
def empty_views_cache():
    services._views_cache.clear()
    cache.clear()
    yield
    services._views_cache.clear()


def view(slug: str) -> ConfigurationView:
    return next(v for v in services.catalog_views() if v.slug == slug)


def test_unchanged_catalog_views_are_reused_with_one_query() -> None:
    ConfigurationFactory.create_batch(3)
    first = services.catalog_views()
    with CaptureQueriesContext(connection) as captured:
        second = services.catalog_views()
    assert second is first
    assert len(captured.captured_queries) == 1, [q["sql"] for q in captured.captured_queries]  # the fingerprint


def test_a_saved_change_is_seen_by_the_next_call() -> None:
    configuration = ConfigurationFactory(hourly_price_usd=Decimal("10.00"))
    assert view(configuration.slug).hourly_price_usd == 10.0
    configuration.hourly_price_usd = Decimal("12.50")
    configuration.save()
    assert view(configuration.slug).hourly_price_usd == 12.5
    accelerator = configuration.accelerator
    accelerator.memory_bandwidth_gbps = 4321
    accelerator.save()
    assert view(configuration.slug).memory_bandwidth_gbps == 4321
    configuration.accelerator.architecture.precisions.clear()  # many-to-many: m2m_changed
    assert "bf16" not in view(configuration.slug).facts.native_precisions


def test_rows_added_or_removed_without_a_signal_are_seen() -> None:
    kept = ConfigurationFactory()
    assert {v.slug for v in services.catalog_views()} == {kept.slug}
    template = ConfigurationFactory.build(accelerator=kept.accelerator, slug="bulk", name="Bulk")
    Configuration.objects.bulk_create([template])  # no post_save: the fingerprint's row count sees it
    assert {v.slug for v in services.catalog_views()} == {kept.slug, "bulk"}
    with connection.cursor() as cursor:  # plain SQL, no signal at all
        cursor.execute(f"DELETE FROM {Configuration._meta.db_table} WHERE slug = %s", ["bulk"])
    assert {v.slug for v in services.catalog_views()} == {kept.slug}


def test_memory_a_node_verifies_is_seen_at_once() -> None:
    node = NodeFactory()
    configuration = node.configuration
    assert view(configuration.slug).usable_basis != "verified"
    Node.objects.filter(pk=node.pk).update(verified_usable_memory_bytes=79 * 10**9)  # as a heartbeat elsewhere
    assert view(configuration.slug).usable_bytes == 79 * 10**9
    assert view(configuration.slug).usable_basis == "verified"


def test_an_in_place_update_no_signal_sees_is_seen_after_the_maximum_age(monkeypatch) -> None:
    """A value changed by ``update()`` in another process, whose cache this one does not share."""
    configuration = ConfigurationFactory(hourly_price_usd=Decimal("10.00"))
    now = [1000.0]
    monkeypatch.setattr(services, "_clock", lambda: now[0])
    assert view(configuration.slug).hourly_price_usd == 10.0
    Configuration.objects.filter(pk=configuration.pk).update(hourly_price_usd=Decimal("11.00"))
    assert view(configuration.slug).hourly_price_usd == 10.0  # the documented limit: not seen yet
    now[0] += services.VIEWS_MAX_AGE_S
    assert view(configuration.slug).hourly_price_usd == 11.0


def test_nothing_is_kept_from_inside_a_transaction() -> None:
    configuration = ConfigurationFactory()
    with transaction.atomic():
        assert view(configuration.slug)
        assert services._views_cache.entry is None
        rolled_back = ConfigurationFactory()
        assert view(rolled_back.slug)
        transaction.set_rollback(True)
    assert {v.slug for v in services.catalog_views()} == {configuration.slug}


def test_a_price_changed_through_the_api_is_in_the_next_recommendation(api, admin_user) -> None:
    staff_api = APIClient()
    staff_api.force_authenticate(admin_user)
    configuration = ConfigurationFactory(hourly_price_usd=Decimal("10.00"))

    def price() -> float:
        response = api.post("/api/v1/recommend", WORKLOAD, format="json")
        assert response.status_code == 200, response.json()
        entry = next(e for e in response.json()["recommendations"] if e["configuration"]["slug"] == configuration.slug)
        return entry["cost"]["usd_per_hour"]

    assert float(price()) == 10.0
    patched = staff_api.patch(f"/api/v1/configurations/{configuration.slug}/", {"hourly_price_usd": "20.00"},
                              format="json")  # fmt: skip
    assert patched.status_code == 200, patched.json()
    assert float(price()) == 20.0
