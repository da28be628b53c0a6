"""Bounded request bodies: above DATA_UPLOAD_MAX_MEMORY_SIZE a clear 413 naming the limit, never a 500; below
it, the workload schema's own bounds (list lengths, numbers) answer 400 naming the field."""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.test import override_settings
from rest_framework.test import APIClient

from tests.measurements.helpers import TINY_CPU_WORKLOAD, cpu_configuration, measurement_document

pytestmark = pytest.mark.django_db

LIMIT = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
CUSTOM_1001 = {
    "task": "custom",
    "model": None,
    "inference": None,
    "custom": {"components": [{"name": "c", "bytes": 1}] * 1001},
}
LORA_9_MODULES = {
    "task": "training",
    "inference": None,
    "training": {"method": "lora", "lora": {"target_modules": ["q_proj"] * 9}},
}


def _padded(size: int) -> str:
    """TINY_CPU_WORKLOAD as JSON, padded with spaces to exactly ``size`` bytes."""
    text = json.dumps(TINY_CPU_WORKLOAD)
    return text + " " * (size - len(text))


def _post(client, url: str, body: str):
    return client.generic("POST", url, body.encode(), content_type="application/json")


def test_the_default_limit_is_one_mib() -> None:
    assert LIMIT == 2**20


@pytest.mark.parametrize("url", ["/api/v1/estimate", "/api/v1/recommend", "/api/v1/workloads/"])
def test_a_body_over_the_limit_is_a_413_naming_it_and_one_at_the_limit_is_read(api, url) -> None:
    response = _post(api, url, _padded(LIMIT + 1))
    assert response.status_code == 413
    detail = response.json()["detail"]
    assert f"({LIMIT + 1:,} bytes)" in detail and f"{LIMIT:,} bytes" in detail
    assert "DATA_UPLOAD_MAX_MEMORY_SIZE" in detail
    assert _post(api, url, _padded(LIMIT)).status_code in (200, 201)  # whitespace is valid JSON


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=4096)
def test_the_limit_is_configurable_and_holds_for_form_bodies_too(api, admin_user) -> None:
    staff_api = APIClient()
    staff_api.force_authenticate(admin_user)
    response = _post(api, "/api/v1/estimate", _padded(5000))
    assert response.status_code == 413 and "4,096 bytes" in response.json()["detail"]
    # The catalog takes form bodies as well: Django's form parsing meets the same limit.
    form = staff_api.post("/api/v1/architectures/", {"name": "x" * 5000, "slug": "big"})
    assert form.status_code == 413 and "4,096 bytes" in form.json()["detail"]
    assert _post(api, "/api/v1/estimate", _padded(4000)).status_code == 200


def test_the_largest_measurement_document_fits_under_the_default(api) -> None:
    """vramplan-measure's longest timeline (5,000 points of 8-byte figures) uploads under the 1 MiB default."""
    configuration = cpu_configuration()
    workload = api.post("/api/v1/workloads/", TINY_CPU_WORKLOAD, format="json").json()
    order = api.post("/api/v1/orders/", {"workload": workload["id"], "configuration": configuration.slug},
                     format="json").json()  # fmt: skip
    timeline = [[round(i * 0.123456, 6), 85_899_345_920 - i, 3_221_225_472 + i] for i in range(5_000)]
    body = json.dumps(measurement_document(timeline=timeline, duration_seconds=620.0))
    assert len(body) < LIMIT / 3
    response = _post(api, f"/api/v1/orders/{order['id']}/measurements/", body)
    assert response.status_code == 201, response.json()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"inference": {"concurrent_sessions": 10**30}}, "inference.concurrent_sessions"),
        ({"inference": {"max_input_tokens": -1}}, "inference.max_input_tokens"),
        ({"parallelism": {"tensor": 10**6}}, "parallelism.tensor"),
        ({"name": "n" * 201}, "name"),
        (CUSTOM_1001, "custom.components"),
        (LORA_9_MODULES, "training.lora.target_modules"),
        ({"model": {"hf_config": {"model_type": "llama", "pad": "x" * 1_000_001}}}, "model"),
    ],
)
def test_lists_and_numbers_in_the_workload_are_bounded(api, change, field) -> None:
    body = {**TINY_CPU_WORKLOAD, **change}
    for url in ("/api/v1/estimate", "/api/v1/recommend"):
        response = api.post(url, body, format="json")
        assert response.status_code == 400, (url, response.status_code)
        assert any(key == field or key.startswith(field + ".") for key in response.json()), (field, response.json())


def test_non_finite_numbers_are_refused_by_the_parser(api) -> None:
    body = json.dumps(TINY_CPU_WORKLOAD).replace('"min_headroom_fraction": 0.1', '"min_headroom_fraction": NaN')
    assert "NaN" in body
    response = _post(api, "/api/v1/estimate", body)
    assert response.status_code == 400 and "detail" in response.json()


def test_a_chunked_body_is_a_411_not_read_as_empty(api, anon_api) -> None:
    # issue 16, finding 8: WSGI reads a body by its Content-Length only, so a chunked one reached the view empty
    for client in (api, anon_api):
        response = client.generic("POST", "/api/v1/estimate", json.dumps(TINY_CPU_WORKLOAD).encode(),
                                  content_type="application/json", HTTP_TRANSFER_ENCODING="chunked")  # fmt: skip
        assert response.status_code == 411
        assert "Content-Length" in response.json()["detail"]


@pytest.mark.parametrize(
    "order_id", ["%C2%B9", "%D9%A3", "%EF%BC%91"], ids=["superscript-1", "arabic-3", "fullwidth-1"]
)
def test_an_upload_to_an_order_id_of_non_ascii_digits_is_a_401_not_a_500(anon_api, order_id) -> None:
    # issue 16, finding 8: str.isdigit accepts "¹", which int() then refuses
    response = anon_api.post(f"/api/v1/orders/{order_id}/measurements/", measurement_document(), format="json",
                             HTTP_AUTHORIZATION="Upload x")  # fmt: skip
    assert response.status_code == 401
    assert response.json()["detail"].startswith("This is not an upload token")
