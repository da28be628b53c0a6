"""Device memory as an input: the vLLM KV pool and concurrency for a given card, from the API and the command."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from tests.factories import AcceleratorFactory, ConfigurationFactory

pytestmark = pytest.mark.django_db

VLLM = json.loads((Path(__file__).resolve().parents[2] / "fixtures/workloads/vllm-llama-3.1-8b-chat.json").read_text())
GIB = 2**30


def test_more_device_memory_gives_a_larger_pool_and_more_concurrency(api) -> None:
    small = api.post("/api/v1/estimate?device_memory=40GiB", VLLM, format="json").json()["serving"]
    large = api.post("/api/v1/estimate?device_memory=79.19GiB", VLLM, format="json").json()["serving"]
    assert small["device_memory_bytes"] == 40 * GIB
    assert large["device_memory_bytes"] == int(79.19 * GIB)
    assert large["kv_pool_bytes"] > small["kv_pool_bytes"] > 0
    assert large["max_concurrent_sessions_at_max_request"] > small["max_concurrent_sessions_at_max_request"]
    # The pool holds that many sessions of the longest request, and not one more.
    per_session = VLLM["inference"]["max_input_tokens"] + VLLM["inference"]["max_output_tokens"]
    tokens = large["kv_pool_bytes"] // large["kv_bytes_per_token"]
    assert large["max_concurrent_sessions_at_max_request"] == tokens // per_session


def test_a_configuration_gives_its_usable_memory_per_device(api) -> None:
    accelerator = AcceleratorFactory(marketed_memory_bytes=80 * 10**9, usable_memory_bytes=85_029_615_043)
    configuration = ConfigurationFactory(accelerator=accelerator)
    answer = api.post(f"/api/v1/estimate?configuration={configuration.slug}", VLLM, format="json").json()
    assert answer["serving"]["device_memory_bytes"] == 85_029_615_043


@pytest.mark.parametrize(
    ("query", "field"),
    [("device_memory=banana", "device_memory"), ("configuration=nope", "configuration"),
     ("device_memory=80GB&configuration=x", "device_memory"), ("device_memory=2EiB", "device_memory")],
)  # fmt: skip
def test_bad_device_memory_is_a_400_naming_the_parameter(api, query: str, field: str) -> None:
    response = api.post(f"/api/v1/estimate?{query}", VLLM, format="json")
    assert response.status_code == 400 and field in response.json(), response.json()


def test_the_command_takes_device_memory_or_a_configuration(tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    path.write_text(json.dumps(VLLM))
    out = StringIO()
    call_command("estimate", str(path), "--device-memory", "79.19GiB", stdout=out)
    assert json.loads(out.getvalue())["serving"]["device_memory_bytes"] == int(79.19 * GIB)
    with pytest.raises(CommandError, match="--configuration: no catalog configuration 'nope'"):
        call_command("estimate", str(path), "--configuration", "nope", stdout=StringIO())
    with pytest.raises(CommandError, match="--device-memory"):
        call_command("estimate", str(path), "--device-memory", "lots", stdout=StringIO())


def test_the_schema_documents_plan_and_serving(api) -> None:
    schema = api.get("/api/schema/?format=json").json()
    budget = schema["components"]["schemas"]["BudgetDocument"]["properties"]
    assert {"plan", "serving"} <= set(budget)
    assert {p["name"] for p in schema["paths"]["/api/v1/estimate/"]["post"]["parameters"]} >= {
        "device_memory",
        "configuration",
    }


def test_a_bare_number_below_a_mebibyte_is_a_400_that_suggests_a_unit(api) -> None:
    response = api.post("/api/v1/estimate?device_memory=80", VLLM, format="json")
    assert response.status_code == 400
    (message,) = response.json()["device_memory"]
    assert "read as 80 bytes" in message and "80GB" in message
    assert api.post(f"/api/v1/estimate?device_memory={2**30}", VLLM, format="json").status_code == 200  # bytes, large


def test_the_answer_says_whether_the_asked_concurrency_fits_the_pool(api) -> None:
    busy = {**VLLM, "inference": {**VLLM["inference"], "concurrent_sessions": 32}}
    small = api.post("/api/v1/estimate?device_memory=24GB", busy, format="json").json()
    held = small["serving"]["max_concurrent_sessions_at_max_request"]
    assert small["serving"]["starts"] is True and held < 32
    assert any(f"holds {held} sessions" in a and "the asked 32 do NOT fit" in a for a in small["assumptions"])
    large = api.post("/api/v1/estimate?device_memory=141GB", busy, format="json").json()
    assert any("the asked 32 fit" in a for a in large["assumptions"])


def test_the_command_refuses_a_bare_number_below_a_mebibyte_too(tmp_path) -> None:
    path = tmp_path / "w.json"
    path.write_text(json.dumps(VLLM))
    with pytest.raises(CommandError, match="read as 80 bytes"):
        call_command("estimate", str(path), "--device-memory", "80", stdout=StringIO())
