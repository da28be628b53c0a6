"""Measurement rows → calibration records, on the real database."""

from __future__ import annotations

import pytest

from budgets.services import workload_create
from measurements import services
from measurements.calibration import CORRECTION_BAND, LATENCY_VIEW, OWN_UPLOAD, build_calibration
from measurements.models import Measurement

from .helpers import TINY_CPU_WORKLOAD, cpu_configuration, measurement_document

pytestmark = pytest.mark.django_db

CPU_PEAKS = {"framework_allocated_bytes": 3 * 2**20, "host_rss_bytes": 200 * 2**20, "reasons": {}}


@pytest.fixture
def order(user):
    workload = workload_create(owner=user, data=TINY_CPU_WORKLOAD)
    return services.order_create(owner=user, workload=workload, configuration=cpu_configuration())


def upload(order, **overrides) -> Measurement:
    document = measurement_document(peaks=CPU_PEAKS, devices=[], **overrides)
    measurement, created = services.measurement_record(order, document, source="upload")
    assert created
    return measurement


def test_each_compared_view_becomes_a_record_linked_to_its_measurement_and_order(order) -> None:
    measurement = upload(order)
    (record,) = services.calibration_records(Measurement.objects.all())
    ratio = measurement.ratios["framework_allocated"]
    assert (record.view, record.measured, record.estimated) == (
        "framework_allocated",
        ratio["measured_bytes"],
        ratio["estimated_bytes"],
    )
    assert (record.measurement_id, record.order_id, record.job_id) == (measurement.pk, order.pk, None)
    assert (record.configuration, record.architecture) == (
        "cpu-test",
        f"cpu:{order.configuration.host_cpu_architecture}",
    )
    views = order.budget["per_device"]["views"]["framework_allocated"]
    assert (record.estimated_low, record.estimated_high) == (views["low"], views["high"])
    summary = record.workload
    assert (summary.task, summary.engine, summary.precision) == ("inference", "transformers", "fp32")
    assert (summary.concurrent_sessions, summary.request_tokens) == (2, 40)
    assert summary.model.startswith("sha256:")  # a given architecture is named by its digest


def test_failed_runs_are_left_out_and_latency_joins_only_with_an_estimate(order) -> None:
    upload(order, outcome="oom", exit_code=None)
    timed = upload(order, timing={"ms_per_output_token": 30.0})
    assert [r.view for r in services.calibration_records(Measurement.objects.all())] == ["framework_allocated"]

    records = services.calibration_records(
        Measurement.objects.all(), estimate_ms_per_output_token=lambda m: 20.0 if m.pk == timed.pk else None
    )
    latency = [r for r in records if r.view == LATENCY_VIEW]
    assert [(r.measurement_id, r.ratio) for r in latency] == [(timed.pk, 1.5)]


def test_uploads_on_three_orders_make_a_group_of_three_orders_in_one_query(
    user, order, django_assert_num_queries
) -> None:
    orders = [order, *(services.order_create(owner=user, workload=order.workload, configuration=order.configuration)
                       for _ in range(2))]  # fmt: skip
    ids = [upload(o).pk for o in orders]
    with django_assert_num_queries(1):  # measurements joined with order, workload, configuration, architecture, review
        records = services.calibration_records(Measurement.objects.all())
    (correction,) = build_calibration(records).values()
    assert (correction.n, correction.orders, correction.own_uploads) == (3, 3, 3)
    assert {r.provenance for r in records} == {OWN_UPLOAD}
    assert correction.measurement_ids == tuple(sorted(ids))
    # this tiny CPU workload measures ~5 × its tensor estimate (the run's own overhead): flagged, not applied
    ratios = sorted(r.ratio for r in records)
    if CORRECTION_BAND[0] <= ratios[1] <= CORRECTION_BAND[1]:
        assert correction.factor == ratios[1]
    else:
        assert (correction.factor, correction.flagged) == (None, ratios[1])
