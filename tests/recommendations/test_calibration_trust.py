"""Evidence a buyer can trust (issue 16, finding 1): what calibrates whose recommendations, on the real database.

The report: three uploads of ``"peaks": {"device_used_bytes": 1}`` on one's own order turned Llama-3.1-405B on one
H100 from ``does_not_fit`` into ``fits`` ("Corrected × 0.000") for staff. Now another user's unreviewed uploads never
reach staff's calibration, the owner's own are labelled and counted per order, and a correction outside the band is
flagged instead of applied.
"""

from __future__ import annotations

import pytest

from budgets.engine.budget import read_budget
from budgets.services import workload_create, workload_validate
from catalog.models import Configuration
from measurements import acceptance
from measurements import services as measurement_services
from measurements.choices import MeasurementSource
from measurements.models import AcceptanceJob, Measurement
from recommendations import services
from tests.measurements.helpers import measurement_document
from tests.recommendations.measured import H100_X1, QWEN_7B

pytestmark = pytest.mark.django_db

LLAMA_405B = {
    "name": "llama-3.1-405b-chat",
    "model": {"preset": "llama-3.1-405b"},
    "precision": {"weights": "bf16"},
    # transformers: its need is corrected by the device_used view, the one the forged peaks claim
    "inference": {
        "engine": "transformers",
        "max_input_tokens": 4096,
        "max_output_tokens": 512,
        "concurrent_sessions": 4,
    },
}


def _entries(data: dict, viewer) -> dict:
    entries = services.recommend_for(workload_validate(data), top=None, user=viewer)
    return {entry.configuration["slug"]: entry for entry in entries}


def _verdicts(data: dict, viewer) -> dict[str, str]:
    return {slug: entry.verdict.value for slug, entry in _entries(data, viewer).items()}


def _order(owner, data: dict):
    workload = workload_create(owner=owner, data=data)
    configuration = Configuration.objects.get(slug=H100_X1)
    return measurement_services.order_create(owner=owner, workload=workload, configuration=configuration)


def _upload(order, device_used: int) -> Measurement:
    peaks = {"device_used_bytes": device_used, "host_rss_bytes": 3 * 2**30, "reasons": {}}
    measurement, _ = measurement_services.measurement_record(
        order, measurement_document(peaks=peaks), source=MeasurementSource.UPLOAD
    )
    return measurement


def test_another_users_forged_uploads_never_change_staffs_verdicts(user, staff_user, catalog) -> None:
    before = _verdicts(LLAMA_405B, staff_user)
    assert before[H100_X1] == "does_not_fit"
    forged = [_upload(_order(user, LLAMA_405B), device_used=1) for _ in range(3)]  # three orders, 1 byte each

    assert _verdicts(LLAMA_405B, staff_user) == before
    assert _verdicts(LLAMA_405B, None) == before  # the command line reads what staff read
    # the forger's own view: its own uploads, labelled, outside the band, so not applied either
    entry = _entries(LLAMA_405B, user)[H100_X1]
    assert entry.verdict.value == "does_not_fit"
    assert "outside the band" in entry.evidence.correction
    assert "3 of them your own uploads" in entry.evidence.correction
    assert {m.provenance for m in forged} == {"upload"}


def test_a_reviewed_upload_calibrates_for_staff_and_an_unreviewed_one_does_not(user, staff_user, catalog) -> None:
    order = _order(user, QWEN_7B)
    estimated, _ = acceptance.estimated_views(read_budget(order.budget))["device_used"]
    upload = _upload(order, device_used=int(estimated * 1.3))

    def staff_evidence() -> str:
        return _entries(QWEN_7B, staff_user)[H100_X1].evidence.label

    assert staff_evidence() == "estimate_only"
    rows = Measurement.objects.filter(pk=upload.pk)
    assert measurement_services.review_uploads(rows, staff_user, "argv checked") == 1
    assert Measurement.objects.select_related("review").get(pk=upload.pk).provenance == "reviewed_upload"
    assert staff_evidence() == "measured_here"  # the records cache saw the review (its fingerprint)


def test_node_verified_runs_of_any_user_calibrate_for_staff(user, staff_user, catalog) -> None:
    order = _order(user, QWEN_7B)
    estimated, _ = acceptance.estimated_views(read_budget(order.budget))["device_used"]
    peaks = {"device_used_bytes": int(estimated * 1.1), "host_rss_bytes": 3 * 2**30, "reasons": {}}
    measurement, _ = measurement_services.measurement_record(
        order,
        measurement_document(peaks=peaks),
        source=MeasurementSource.JOB,
        job=AcceptanceJob.objects.create(order=order),
    )
    assert measurement.provenance == "node_verified"
    records = services.acceptance_records(services.catalog_views(), staff_user)
    (record,) = [r for r in records if r.view == "device_used"]
    assert (record.measurement_id, record.provenance) == (measurement.pk, "node_verified")
