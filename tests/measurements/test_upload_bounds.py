"""Every number in an uploaded measurement is bounded on the way in (a 400 naming the field), and a figure
stored before the bounds existed does not make its readers fail (issue 16, finding 2)."""

from __future__ import annotations

from typing import Any

import pytest

from budgets.services import workload_create
from measurements import services
from measurements.acceptance import vllm_need
from measurements.document import MAX_BYTES
from measurements.models import Measurement

from .helpers import TINY_CPU_WORKLOAD, cpu_configuration, measurement_document

pytestmark = pytest.mark.django_db

WEIGHTS = "program_report.engine_report.weights_bytes"


@pytest.fixture
def order(user):
    workload = workload_create(owner=user, data=TINY_CPU_WORKLOAD)
    return services.order_create(owner=user, workload=workload, configuration=cpu_configuration())


def _vllm_report(weights_bytes: Any) -> dict[str, Any]:
    return {"engine": "vllm", "engine_report": {"weights_bytes": weights_bytes, "kv_cache_bytes": 2**30,
                                                "kv_cache_tokens": 4096}}  # fmt: skip


def _upload(api, anon_api, order, document: dict[str, Any]):
    token = api.post(f"/api/v1/orders/{order.pk}/upload-token/").json()["token"]
    url = f"/api/v1/orders/{order.pk}/measurements/"
    return anon_api.post(url, document, format="json", HTTP_AUTHORIZATION=f"Upload {token}")


@pytest.mark.parametrize(
    "weights_bytes", [10**308, 10**400, MAX_BYTES + 1, 1e300], ids=["1e308", "1e400", "1PiB+1", "float"]
)
def test_an_engine_report_figure_beyond_1_pib_is_a_400_naming_the_field(api, anon_api, order, weights_bytes) -> None:
    response = _upload(api, anon_api, order, measurement_document(program_report=_vllm_report(weights_bytes)))
    assert response.status_code == 400, response.content[:300]
    (message,) = response.json()[WEIGHTS]
    assert "out of range: expected a number of bytes" in message and f"{MAX_BYTES:,}" in message
    assert not Measurement.objects.exists()


@pytest.mark.parametrize(
    ("section", "value", "field", "allowed"),
    [
        ("conditions", {"anything": 10**30}, "conditions.anything", "9,223,372,036,854,775,807"),
        ("sampling", {"interval_s": -0.5}, "sampling.interval_s", "0 to 2,592,000"),
        ("timing", {"ms_per_output_token": 1e12}, "timing.ms_per_output_token", "milliseconds"),
        ("devices", [{"index": 0, "total_memory_bytes": 2**60}], "devices.0.total_memory_bytes", "bytes"),
        ("program_report", {"engine_report": {"gpu_memory_utilization": 3.0}},
         "program_report.engine_report.gpu_memory_utilization", "a fraction, 0 to 1"),
    ],
)  # fmt: skip
def test_every_number_of_a_free_form_section_is_bounded_by_what_its_key_says(
    api, anon_api, order, section, value, field, allowed
) -> None:
    response = _upload(api, anon_api, order, measurement_document(**{section: value}))
    assert response.status_code == 400, response.content[:300]
    assert allowed in response.json()[field][0]


def test_a_real_vllm_report_with_a_negative_kv_budget_is_still_accepted(api, anon_api, order) -> None:
    report = _vllm_report(15 * 2**30)
    report["engine_report"]["kv_cache_bytes"] = -2 * 2**30  # vLLM found no room (tests/workers/test_vllm_log.py)
    assert _upload(api, anon_api, order, measurement_document(program_report=report)).status_code == 201


def test_a_stored_figure_out_of_range_is_left_out_of_calibration_not_a_500(order) -> None:
    kept, _ = services.measurement_record(order, measurement_document(), source="upload")
    broken, _ = services.measurement_record(order, measurement_document(), source="upload")
    ratios = {view: {**r, "measured_bytes": 10**400} for view, r in broken.ratios.items()}
    Measurement.objects.filter(pk=broken.pk).update(
        ratios=ratios, document={**broken.document, "timing": {"ms_per_output_token": 10**400}}
    )
    records = services.calibration_records(Measurement.objects.all(), estimate_ms_per_output_token=lambda m: 20.0)
    assert {r.measurement_id for r in records} == {kept.pk}


def test_vllm_need_reads_a_stored_report_beyond_the_bound_as_missing() -> None:
    need, why = vllm_need(_vllm_report(10**400), needed_tokens=1000)
    assert need is None and why is not None and "weights_bytes" in why
    need, why = vllm_need({**_vllm_report(MAX_BYTES), "engine_report": {"weights_bytes": MAX_BYTES,
                          "kv_cache_bytes": MAX_BYTES, "kv_cache_tokens": 1}}, needed_tokens=1000)  # fmt: skip
    assert need is None and why is not None and "more than" in why
