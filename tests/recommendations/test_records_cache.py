"""The recommender's per-process calibration records (``services.acceptance_records``): reused while the
measurements a caller may see and the configuration views stay the same, rebuilt when either changes,
kept per caller's scope, never kept from inside a transaction.

Transactional tests: records are only kept outside a transaction, as in a request served by gunicorn.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.cache import cache
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from budgets.services import workload_create
from catalog.models import Configuration
from measurements import services as measurement_services
from measurements.models import Measurement
from recommendations import services
from tests.measurements.helpers import TINY_CPU_WORKLOAD, cpu_configuration, measurement_document

pytestmark = pytest.mark.django_db(transaction=True)

CPU_PEAKS = {"framework_allocated_bytes": 3 * 2**20, "host_rss_bytes": 200 * 2**20, "reasons": {}}


@pytest.fixture(autouse=True)
def empty_caches():
    services._views_cache.clear()
    services._records_cache.clear()
    cache.clear()
    yield
    services._views_cache.clear()
    services._records_cache.clear()


@pytest.fixture
def configuration() -> Configuration:
    return cpu_configuration()


def measured(owner, configuration: Configuration) -> Measurement:
    """A new order of ``owner`` with one uploaded measurement."""
    workload = workload_create(owner=owner, data=TINY_CPU_WORKLOAD)
    order = measurement_services.order_create(owner=owner, workload=workload, configuration=configuration)
    document = measurement_document(peaks=CPU_PEAKS, devices=[])
    measurement, created = measurement_services.measurement_record(order, document, source="upload")
    assert created
    return measurement


def measurement_ids(user) -> set[int]:
    return {r.measurement_id for r in services.acceptance_records(services.catalog_views(), user)}


def test_unchanged_records_are_reused_with_one_query(user, configuration) -> None:
    first_measurement = measured(user, configuration)
    views = services.catalog_views()
    first = services.acceptance_records(views, user)
    assert {r.measurement_id for r in first} == {first_measurement.pk}
    with CaptureQueriesContext(connection) as captured:
        again = services.acceptance_records(views, user)
    assert again is first
    assert len(captured.captured_queries) == 1, [q["sql"] for q in captured.captured_queries]  # the fingerprint


def test_a_new_or_deleted_measurement_is_seen_by_the_next_call(user, configuration) -> None:
    one = measured(user, configuration)
    assert measurement_ids(user) == {one.pk}
    two = measured(user, configuration)
    assert measurement_ids(user) == {one.pk, two.pk}
    one.order.delete()  # the order and its measurement go
    assert measurement_ids(user) == {two.pk}
    two.delete()
    three = measured(user, configuration)  # as many as before, but another one
    assert measurement_ids(user) == {three.pk}


def test_each_caller_keeps_its_own_records_and_staff_see_everyones_reviewed_ones(
    user, other_user, staff_user, configuration
):
    mine, theirs = measured(user, configuration), measured(other_user, configuration)
    assert measurement_ids(user) == {mine.pk}
    assert measurement_ids(other_user) == {theirs.pk}
    assert measurement_ids(staff_user) == measurement_ids(None) == set()  # uploads nobody reviewed: their owners' only
    measurement_services.review_uploads(Measurement.objects.filter(pk__in=[mine.pk, theirs.pk]), staff_user)
    assert measurement_ids(staff_user) == measurement_ids(None) == {mine.pk, theirs.pk}
    newer = measured(other_user, configuration)
    assert measurement_ids(user) == {mine.pk}
    assert measurement_ids(other_user) == {theirs.pk, newer.pk}
    assert measurement_ids(staff_user) == {mine.pk, theirs.pk}
    measurement_services.review_uploads(Measurement.objects.filter(pk=newer.pk), staff_user)
    assert measurement_ids(staff_user) == {mine.pk, theirs.pk, newer.pk}


def test_a_catalog_change_rebuilds_them_and_an_unchanged_rebuild_of_the_views_does_not(
    user, configuration, monkeypatch
) -> None:
    measured(user, configuration)
    first = services.acceptance_records(services.catalog_views(), user)
    # the views are rebuilt after their maximum age; the same catalog gives the same views, and the records stay
    now = services._clock()
    monkeypatch.setattr(services, "_clock", lambda: now + services.VIEWS_MAX_AGE_S + 1)
    assert services.acceptance_records(services.catalog_views(), user) is first
    configuration.hourly_price_usd = Decimal("3.00")
    configuration.save()
    rebuilt = services.acceptance_records(services.catalog_views(), user)
    assert rebuilt is not first and rebuilt == first  # built again from the new views (same figures here)


def test_records_read_inside_a_transaction_are_not_kept(user, configuration) -> None:
    kept = measured(user, configuration)
    with transaction.atomic():
        uncommitted = measured(user, configuration)
        assert measurement_ids(user) == {kept.pk, uncommitted.pk}
        transaction.set_rollback(True)
    assert measurement_ids(user) == {kept.pk}


def test_the_least_recently_used_scopes_go_when_the_records_exceed_the_bound(user, other_user, configuration,
                                                                              monkeypatch) -> None:  # fmt: skip
    measured(user, configuration)
    measured(other_user, configuration)
    mine = services.acceptance_records(services.catalog_views(), user)
    monkeypatch.setattr(services, "RECORDS_CACHE_MAX_RECORDS", len(mine))  # room for one scope's records
    theirs = services.acceptance_records(services.catalog_views(), other_user)
    assert services._records_cache.size == len(theirs)
    assert services.acceptance_records(services.catalog_views(), other_user) is theirs  # kept
    again = services.acceptance_records(services.catalog_views(), user)  # dropped: built again
    assert again is not mine and again == mine


def test_a_calibration_is_kept_beside_its_records_per_workload(user, configuration) -> None:
    from budgets.services import workload_validate

    measured(user, configuration)
    views = services.catalog_views()
    tiny = workload_validate(TINY_CPU_WORKLOAD)
    larger = workload_validate({**TINY_CPU_WORKLOAD, "inference": {**TINY_CPU_WORKLOAD["inference"],
                                                                   "concurrent_sessions": 64}})  # fmt: skip
    first = services.calibration_for(tiny, views, user)
    assert services.calibration_for(tiny, views, user) is first
    other = services.calibration_for(larger, views, user)
    assert other is not first and other.workload != first.workload
    assert first.evidence.by_configuration and not other.evidence.by_configuration  # 2 vs 64 sessions: unlike
    measured(user, configuration)
    rebuilt = services.calibration_for(tiny, views, user)
    assert rebuilt is not first and len(rebuilt.records) == 2 * len(first.records)
    with transaction.atomic():
        assert services.calibration_for(tiny, views, user) is not services.calibration_for(tiny, views, user)


def test_a_late_commit_of_an_earlier_id_after_a_delete_is_seen(user, configuration) -> None:
    """Same count and same highest id, another set of measurements: a row with an id below the highest (a
    transaction that began earlier and committed late) arrives while another measurement is deleted."""
    first, second, third = (measured(user, configuration) for _ in range(3))
    free_id = second.pk
    second.delete()
    assert measurement_ids(user) == {first.pk, third.pk}
    first.delete()
    late = Measurement.objects.get(pk=third.pk)
    late.pk, late.upload_key = free_id, "committed-late"  # an id below the highest, free
    late.save(force_insert=True)
    assert measurement_ids(user) == {free_id, third.pk}  # two rows, highest id the same as before


def test_a_deleted_job_is_no_longer_named_by_the_records(user, configuration) -> None:
    from measurements.models import AcceptanceJob

    measurement = measured(user, configuration)
    job = AcceptanceJob.objects.create(order=measurement.order, status="succeeded")
    Measurement.objects.filter(pk=measurement.pk).update(job=job)
    services._records_cache.clear()
    assert {r.job_id for r in services.acceptance_records(services.catalog_views(), user)} == {job.pk}
    job.delete()  # the measurement stays, with no job (on_delete=SET_NULL)
    assert {r.job_id for r in services.acceptance_records(services.catalog_views(), user)} == {None}
