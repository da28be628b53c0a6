"""Budget endpoints: stateless estimate, owner-scoped workloads, presets, and 400s that name the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from budgets.engine.budget import COMPONENT_NAMES

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "fixtures" / "workloads").glob("*.json"))
COMPONENTS = set(COMPONENT_NAMES)

CHAT: dict[str, Any] = {
    "name": "support-chat-8b",
    "task": "inference",
    "model": {"preset": "llama-3.1-8b"},
    "precision": {"weights": "bf16", "compute": "bf16", "kv_cache": "bf16"},
    "inference": {
        "max_input_tokens": 6144,
        "max_output_tokens": 2048,
        "concurrent_sessions": 32,
        "engine": "vllm",
        "kv_cache_layout": "paged",
        "kv_block_tokens": 16,
    },
}


def _check_contract(budget: dict) -> None:
    assert {"workload", "device", "devices", "per_device", "host", "assumptions", "calibration"} <= set(budget)
    assert set(budget["per_device"]["components"]) == COMPONENTS
    for component in budget["per_device"]["components"].values():
        assert {"bytes", "low", "high", "note"} <= set(component)
        assert 0 <= component["low"] <= component["bytes"] <= component["high"]
    total = budget["per_device"]["total"]
    assert 0 < total["low"] <= total["bytes"] <= total["high"]
    assert {"ram_bytes", "disk_bytes"} == set(budget["host"])


def test_estimate_returns_the_contract(api) -> None:
    response = api.post("/api/v1/estimate", CHAT, format="json")
    assert response.status_code == 200, response.content
    budget = response.json()
    _check_contract(budget)
    assert budget["workload"] == "support-chat-8b"
    weights = budget["per_device"]["components"]["weights"]["bytes"]
    assert 16.0e9 < weights < 16.2e9  # 8,030,261,248 parameters × 2 bytes


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_workload_estimates(api, path) -> None:
    response = api.post("/api/v1/estimate/", json.loads(path.read_text()), format="json")
    assert response.status_code == 200, response.content
    _check_contract(response.json())


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"task": "dance"}, "task"),
        ({"inference": {**CHAT["inference"], "concurrent_sessions": 0}}, "inference.concurrent_sessions"),
        ({"inference": {**CHAT["inference"], "max_input_tokens": -1}}, "inference.max_input_tokens"),
        ({"inference": {**CHAT["inference"], "max_output_tokens": 10**12}}, "inference.max_output_tokens"),
        ({"inference": {**CHAT["inference"], "engine": "tgi"}}, "inference.engine"),
        ({"precision": {"weights": "fp7"}}, "precision.weights"),
        ({"surprise": 1}, "surprise"),
        ({"parallelism": {"tensor": "two"}}, "parallelism.tensor"),
        ({"parallelism": {"zero_stage": 4}}, "parallelism.zero_stage"),
        ({"runtime": {"device": "tpu"}}, "runtime.device"),
    ],
)
def test_invalid_input_is_a_400_naming_the_field(api, change, field) -> None:
    response = api.post("/api/v1/estimate", {**CHAT, **change}, format="json")
    assert response.status_code == 400, response.content
    body = response.json()
    assert any(key == field or key.startswith(field + ".") for key in body), body


def test_unknown_preset_and_unsupported_model_type_say_what_is_allowed(api) -> None:
    response = api.post("/api/v1/estimate", {**CHAT, "model": {"preset": "llama-3.1-8"}}, format="json")
    assert response.status_code == 400
    assert "llama-3.1-8b" in json.dumps(response.json())
    config = {"model_type": "mamba", "hidden_size": 768, "num_hidden_layers": 2}
    response = api.post("/api/v1/estimate", {**CHAT, "model": {"hf_config": config}}, format="json")
    assert response.status_code == 400
    body = json.dumps(response.json())
    assert "num_attention_heads" in body and "vocab_size" in body and "llama" not in body


@pytest.mark.parametrize("body", ["[]", '"text"', "{not json", "null"])
def test_malformed_bodies_are_400(api, body) -> None:
    response = api.generic("POST", "/api/v1/estimate", body, content_type="application/json")
    assert response.status_code == 400


def test_estimate_requires_login(anon_api) -> None:
    assert anon_api.post("/api/v1/estimate", CHAT, format="json").status_code == 401


def test_workloads_are_owner_scoped(api, other_api, staff_api) -> None:
    created = api.post("/api/v1/workloads/", CHAT, format="json")
    assert created.status_code == 201, created.content
    workload_id = created.json()["id"]
    assert created.json()["peak_bytes"] > 0

    mine = api.get("/api/v1/workloads/").json()["results"]
    assert [w["id"] for w in mine] == [workload_id]
    budget = api.get(f"/api/v1/workloads/{workload_id}/budget")
    assert budget.status_code == 200
    _check_contract(budget.json())
    assert budget.json()["per_device"]["total"]["bytes"] == created.json()["peak_bytes"]

    assert other_api.get("/api/v1/workloads/").json()["results"] == []
    assert other_api.get(f"/api/v1/workloads/{workload_id}/").status_code == 404
    assert other_api.get(f"/api/v1/workloads/{workload_id}/budget").status_code == 404
    assert other_api.delete(f"/api/v1/workloads/{workload_id}/").status_code == 404
    assert staff_api.get(f"/api/v1/workloads/{workload_id}/").status_code == 200


def test_stored_description_round_trips(api) -> None:
    created = api.post("/api/v1/workloads/", CHAT, format="json").json()
    again = api.post("/api/v1/estimate", created["description"], format="json")
    assert again.status_code == 200, again.content
    stored = api.get(f"/api/v1/workloads/{created['id']}/budget").json()
    assert again.json()["per_device"]["total"] == stored["per_device"]["total"]


def test_invalid_workload_is_not_stored(api) -> None:
    response = api.post("/api/v1/workloads/", {**CHAT, "task": "dance"}, format="json")
    assert response.status_code == 400
    assert api.get("/api/v1/workloads/").json()["count"] == 0


def test_model_presets_list_and_detail(api) -> None:
    presets = api.get("/api/v1/model-presets/").json()
    ids = {p["id"] for p in presets}
    assert len(ids) >= 25
    assert {"llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b", "qwen2.5-72b"} <= ids
    detail = api.get("/api/v1/model-presets/llama-3.1-8b/").json()
    assert detail["parameter_count"] == 8_030_261_248
    assert api.get("/api/v1/model-presets/no-such-model/").status_code == 404


def test_a_budget_beyond_any_machine_is_a_400_not_a_database_error(api) -> None:
    huge = {
        "name": "typo",
        "task": "custom",
        "custom": {
            "components": [{"name": "scene", "category": "weights", "bytes": 10**15, "per_concurrent": True}],
            "concurrency": 100_000,
        },
    }
    for url in ("/api/v1/estimate", "/api/v1/workloads/"):
        response = api.post(url, huge, format="json")
        assert response.status_code == 400, response.content
        assert "1 EiB" in response.json()["workload"][0]
    assert api.get("/api/v1/workloads/").json()["count"] == 0


@pytest.mark.parametrize(
    "body",
    [
        '{"name": "chat\\u0000", "model": {"preset": "gpt2"}}',
        '{"name": "x", "model": {"hf_config": {"junk": "\\ud800"}}}',
        "[" * 5000 + "]" * 5000,
        '{"a":' * 40 + "1" + "}" * 40,
    ],
    ids=["nul", "lone-surrogate", "deep-list", "deep-object"],
)
def test_unstorable_or_absurdly_nested_bodies_are_400(api, body) -> None:
    response = api.generic("POST", "/api/v1/workloads/", body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert api.get("/api/v1/workloads/").json()["count"] == 0


def test_pagination_limits_are_clamped(api) -> None:
    api.post("/api/v1/workloads/", CHAT, format="json")
    response = api.get("/api/v1/workloads/?limit=99999999999999999999&offset=99999999999999999999")
    assert response.status_code == 200
    assert response.json()["results"] == []
