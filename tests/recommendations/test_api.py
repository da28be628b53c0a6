"""The recommendation endpoints on the real database with the real catalog: the issue's done-when through
the API, ownership, 400s, evidence from acceptance measurements, and the schema against a real answer."""

from __future__ import annotations

import json
from typing import Any, get_args

import jsonschema_rs
import pytest
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from pydantic import BaseModel, ValidationError

from budgets.services import workload_create
from catalog.models import Configuration
from catalog.units import version_key
from measurements import services as measurement_services
from measurements.calibration import EvidenceLevel
from measurements.choices import MeasurementSource
from measurements.models import AcceptanceJob
from recommendations import document as shapes
from tests.measurements.helpers import measurement_document
from tests.recommendations.catalog_views import _merge
from tests.recommendations.measured import H100_X1, QWEN_7B, measured_workload

pytestmark = pytest.mark.django_db

LLAMA_70B = {
    "name": "llama-3.1-70b-chat",
    "model": {"preset": "llama-3.1-70b"},
    "precision": {"weights": "bf16"},
    "inference": {"engine": "vllm", "max_input_tokens": 8192, "max_output_tokens": 1024, "concurrent_sessions": 16},
}


def recommend(api, body: dict[str, Any], **query: Any) -> dict[str, Any]:
    response = api.post("/api/v1/recommend", body, format="json", QUERY_STRING=_query({"top": 200, **query}))
    assert response.status_code == 200, response.json()
    return response.json()


def _query(params: dict[str, Any]) -> str:
    return "&".join(f"{key}={value}" for key, value in params.items())


def by_slug(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["configuration"]["slug"]: entry for entry in answer["recommendations"]}


# --- The done-when, through POST /api/v1/recommend ------------------------------------------------


def test_llama_70b_does_not_fit_one_h100_or_h200_and_fits_four_h100s_and_two_h200s_tp(api, catalog) -> None:
    entries = by_slug(recommend(api, LLAMA_70B))
    for slug in (H100_X1, "h200-nvl-141gb-x1-r570"):
        assert entries[slug]["verdict"] == "does_not_fit", slug
        assert entries[slug]["reasons"], slug
    for slug, tensor in (("h100-sxm-80gb-x4-r550", 4), ("h200-nvl-141gb-x2-r570", 2)):
        entry = entries[slug]
        assert entry["verdict"] == "fits", slug
        assert (entry["plan"]["tensor"], entry["plan"]["pipeline"]) == (tensor, 1), slug
        assert entry["headroom_bytes"] >= entry["margin"]["bytes"] > 0
        assert entry["suggested_settings"]["tensor_parallel_size"] == tensor
    h100 = entries["h100-sxm-80gb-x4-r550"]["configuration"]
    row = Configuration.objects.select_related("accelerator").get(slug="h100-sxm-80gb-x4-r550")
    assert h100 == {
        "id": row.pk,
        "slug": row.slug,
        "accelerator_name": row.accelerator.name,
        "device_count": 4,
        "driver_version": row.driver_version,
    }


def test_fp8_compute_is_unsupported_on_a100s_with_a_reason_naming_fp8(api, catalog) -> None:
    """FP8 weights alone run weight-only under vLLM on Ampere (tests/recommendations/test_recommend_catalog.py);
    FP8 compute needs FP8 tensor cores."""
    entries = by_slug(recommend(api, _merge(LLAMA_70B, {"precision": {"weights": "fp8", "compute": "fp8"}})))
    a100s = [entry for slug, entry in entries.items() if slug.startswith("a100-")]
    assert a100s
    for entry in a100s:
        assert entry["verdict"] == "unsupported"
        assert entry["plan"] is None
        assert any(r["rule"] == "precision" and "fp8" in r["message"] for r in entry["reasons"])


def test_cuda_12_8_marks_drivers_older_than_570_26_unsupported(api, catalog) -> None:
    entries = by_slug(recommend(api, _merge(LLAMA_70B, {"runtime": {"cuda_version": "12.8"}}), vendor="nvidia"))
    drivers = {slug: entry["configuration"]["driver_version"] for slug, entry in entries.items()}
    old = {slug for slug, driver in drivers.items() if version_key(driver) < version_key("570.26")}
    assert old and old != set(drivers)
    for slug, entry in entries.items():
        driver_reasons = [r for r in entry["reasons"] if r["rule"] == "driver"]
        assert (entry["verdict"] == "unsupported" and bool(driver_reasons)) == (slug in old), slug


# --- Filters and top ---------------------------------------------------------------------------------------


def test_filters_keep_only_matching_configurations_and_top_cuts_the_ranked_list(api, catalog) -> None:
    amd = set(
        Configuration.objects.filter(accelerator__architecture__vendor__slug="amd").values_list("slug", flat=True)
    )
    assert set(by_slug(recommend(api, LLAMA_70B, vendor="amd"))) == amd
    small = recommend(api, LLAMA_70B, max_devices=2)["recommendations"]
    assert small and all(e["configuration"]["device_count"] <= 2 for e in small)
    cheap = recommend(api, LLAMA_70B, max_price="12.5")["recommendations"]
    assert cheap and all(e["cost"] is not None and e["cost"]["usd_per_hour"] <= 12.5 for e in cheap)
    everything = recommend(api, LLAMA_70B)["recommendations"]
    first = recommend(api, LLAMA_70B, top=3)["recommendations"]
    assert [e["configuration"]["slug"] for e in first] == [e["configuration"]["slug"] for e in everything[:3]]
    assert len(everything) == Configuration.objects.count()


# --- Stored workloads and who may see them -----------------------------------------------------------------


def test_a_stored_workload_gets_its_recommendations_and_another_users_is_a_404(api, other_api, user, catalog) -> None:
    workload = workload_create(owner=user, data=LLAMA_70B)
    response = api.get(f"/api/v1/workloads/{workload.pk}/recommendations/?top=5")
    assert response.status_code == 200
    answer = response.json()
    assert answer["workload"]["id"] == workload.pk
    assert answer["workload"]["description"] == workload.description
    assert len(answer["recommendations"]) == 5
    assert other_api.get(f"/api/v1/workloads/{workload.pk}/recommendations/").status_code == 404
    assert api.get("/api/v1/workloads/999999/recommendations/").status_code == 404


def test_anonymous_requests_are_refused(anon_api, user, catalog) -> None:
    workload = workload_create(owner=user, data=LLAMA_70B)
    assert anon_api.get(f"/api/v1/workloads/{workload.pk}/recommendations/").status_code == 401
    assert anon_api.post("/api/v1/recommend", LLAMA_70B, format="json").status_code == 401


# --- 400s naming the field ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query,field,allowed",
    [
        ("top=0", "top", "from 1 to 200"),
        ("top=201", "top", "from 1 to 200"),
        ("top=many", "top", "from 1 to 200"),
        ("vendor=acme", "vendor", "nvidia, amd, intel, generic"),
        ("max_devices=0", "max_devices", "from 1 to 1024"),
        ("max_price=-1", "max_price", "at least 0"),
        ("max_price=nan", "max_price", "at least 0"),
    ],
)
def test_bad_query_parameters_are_400s_naming_the_parameter_and_allowed_values(
    api, user, catalog, query, field, allowed
) -> None:
    workload = workload_create(owner=user, data=LLAMA_70B)
    for response in (
        api.post(f"/api/v1/recommend?{query}", LLAMA_70B, format="json"),
        api.get(f"/api/v1/workloads/{workload.pk}/recommendations/?{query}"),
    ):
        assert response.status_code == 400
        assert list(response.json()) == [field]
        assert allowed in response.json()[field][0]


def test_a_bad_workload_body_is_a_400_naming_the_field_like_the_estimate(api, catalog) -> None:
    body = _merge(LLAMA_70B, {"inference": {"concurrent_sessions": 0}})
    response = api.post("/api/v1/recommend", body, format="json")
    assert response.status_code == 400
    assert response.json() == api.post("/api/v1/estimate", body, format="json").json()
    assert "inference.concurrent_sessions" in response.json()
    assert api.post("/api/v1/recommend", [], format="json").status_code == 400


# --- Evidence from acceptance measurements -----------------------------------------------------------------


def test_an_acceptance_measurement_shows_as_evidence_and_sets_the_calibrated_margin(
    api, other_api, user, catalog
) -> None:
    before = by_slug(recommend(api, QWEN_7B))[H100_X1]
    assert before["evidence"]["level"] == "estimate_only"
    _, measurement = measured_workload(user, ratio=1.5)
    order, job = measurement.order, measurement.job

    entry = by_slug(recommend(api, QWEN_7B))[H100_X1]
    evidence = entry["evidence"]
    assert evidence["level"] == "measured_here"
    assert f"#{measurement.pk}" in evidence["sentence"]
    linked = {(m["measurement"], m["order"], m["job"], m["configuration"]) for m in evidence["measurements"]}
    assert linked == {(measurement.pk, order.pk, job.pk, H100_X1)}
    margin = entry["margin"]
    assert margin["set_by"] == "calibration_spread"
    assert margin["bytes"] == margin["candidates"]["calibration_spread"] == int(0.5 * entry["per_device_bytes"])
    assert "1 acceptance measurement" in evidence["correction"]  # one run: a spread, not yet a correction
    assert "1 acceptance measurement" in entry["latency"]["correction"]  # its ms per output token too
    others = [e for slug, e in by_slug(recommend(api, QWEN_7B)).items() if slug.startswith("h100-") and slug != H100_X1]
    assert {e["evidence"]["level"] for e in others} == {"measured_architecture"}

    assert by_slug(recommend(other_api, QWEN_7B))[H100_X1]["evidence"]["level"] == "estimate_only"  # not theirs


VLLM_8B = {
    "name": "llama-3.1-8b-chat",
    "model": {"preset": "llama-3.1-8b"},
    "precision": {"weights": "bf16"},
    "inference": {"engine": "vllm", "max_input_tokens": 4096, "max_output_tokens": 512, "concurrent_sessions": 8},
}


def test_a_vllm_measurement_calibrates_the_need_it_is_judged_by(api, user, catalog) -> None:
    # a vLLM run is judged (and calibrated) on what its start-up report says the workload needs of vLLM's
    # share (view vllm_need), compared with the engine's serving.need_bytes: like with like
    workload = workload_create(owner=user, data=VLLM_8B)
    order = measurement_services.order_create(
        owner=user, workload=workload, configuration=Configuration.objects.get(slug=H100_X1)
    )
    serving = order.budget["serving"]
    tokens = 8 * (4096 + 512)
    kv_needed = serving["kv_bytes_per_token"] * tokens
    report = {  # vLLM's own figures: the KV part as the engine has it, the rest 1.5 × the engine's need
        "engine": "vllm",
        "engine_report": {
            "weights_bytes": int(1.5 * serving["need_bytes"]) - kv_needed,
            "kv_cache_bytes": serving["kv_bytes_per_token"] * 4 * tokens,
            "kv_cache_tokens": 4 * tokens,
        },
    }
    measurement, _ = measurement_services.measurement_record(
        order,
        measurement_document(program_report=report),
        source=MeasurementSource.JOB,
        job=AcceptanceJob.objects.create(order=order),
    )
    assert measurement.ratios["vllm_need"]["ratio"] == pytest.approx(1.5, abs=1e-3)
    assert measurement.ratios["vllm_need"]["basis"] == "serving.need_bytes"

    entry = by_slug(recommend(api, VLLM_8B))[H100_X1]
    assert entry["evidence"]["level"] == "measured_here"
    assert entry["margin"]["set_by"] == "calibration_spread"
    assert entry["margin"]["bytes"] == pytest.approx(0.5 * entry["per_device_bytes"], rel=1e-3)


# --- The schema and a real answer agree ---------------------------------------------------------------------


def _schema() -> dict[str, Any]:
    document = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(OpenApiJsonRenderer().render(document, renderer_context={}))


def _keys_match(model: type[BaseModel], value: dict[str, Any], *, subset: bool = False) -> None:
    fields = set(model.model_fields)
    assert (set(value) <= fields) if subset else (set(value) == fields), (model.__name__, set(value) ^ fields)


def test_a_real_answer_validates_against_the_schema_and_mirrors_each_dataclass(api, user, catalog) -> None:
    measured_workload(user, ratio=1.1)
    schema = _schema()
    operation = schema["paths"]["/api/v1/recommend/"]["post"]["responses"]["200"]["content"]["application/json"]
    validator = jsonschema_rs.validator_for({**operation["schema"], "components": schema["components"]})
    answers = [recommend(api, QWEN_7B), recommend(api, LLAMA_70B), recommend(api, _merge(LLAMA_70B, {
        "precision": {"weights": "fp8"}}))]  # fmt: skip
    for answer in answers:
        errors = [str(error) for error in validator.iter_errors(answer)]
        assert not errors, errors[:3]
    _keys_match(shapes.RecommendationsDocument, answers[0])
    _keys_match(shapes.RecommendedWorkloadDocument, answers[0]["workload"])
    entries = [entry for answer in answers for entry in answer["recommendations"]]
    parts = {
        "configuration": shapes.ConfigurationRefDocument,
        "plan": shapes.PlanDocument,
        "margin": shapes.MarginDocument,
        "evidence": shapes.EvidenceDocument,
        "latency": shapes.LatencyDocument,
        "cost": shapes.CostDocument,
    }
    seen = {name: False for name in [*parts, "reasons", "measurements", "nearest_changes"]}
    for entry in entries:
        _keys_match(shapes.RecommendationDocument, entry)
        _keys_match(shapes.SuggestedSettingsDocument, entry["suggested_settings"], subset=True)
        for name, serializer in parts.items():
            if entry[name] is not None:
                _keys_match(serializer, entry[name])
                seen[name] = True
        for reason in entry["reasons"]:
            _keys_match(shapes.ReasonDocument, reason)
            seen["reasons"] = True
        for measured in entry["evidence"]["measurements"]:
            _keys_match(shapes.EvidenceMeasurementDocument, measured)
            seen["measurements"] = True
        for change in entry["suggested_settings"].get("nearest_changes", []):
            _keys_match(shapes.ChangeDocument, change)
            _keys_match(shapes.PlanDocument, change["plan"])
            seen["nearest_changes"] = True
    assert all(seen.values()), seen  # every part was present in some answer, so every part was compared


def test_the_documents_evidence_labels_are_the_calibrations() -> None:
    assert set(get_args(shapes.EvidenceLabel)) == {level.label for level in EvidenceLevel}


def test_a_setting_the_document_does_not_define_fails_where_it_is_written() -> None:
    """The suggested settings are plain dicts built across ``recommendations.settings``; the document validates them
    on the way out, so a key it does not define (a renamed or misspelt setting) fails there, not in a client."""
    shapes.SuggestedSettingsDocument.model_validate({"max_num_seqs": 8, "tensor_parallel_size": 2})
    with pytest.raises(ValidationError, match="max_num_seq\n"):
        shapes.SuggestedSettingsDocument.model_validate({"max_num_seq": 8})


def test_a_workload_naming_no_cuda_is_judged_on_blackwell_with_what_its_driver_runs(api, catalog) -> None:
    """Issue 16, first hour, item 3: a silent CUDA 12.4 made every Blackwell configuration `unsupported`."""
    assert "cuda_version" not in LLAMA_70B.get("runtime", {})
    entries = by_slug(recommend(api, LLAMA_70B))
    blackwell = [e for slug, e in entries.items() if slug.startswith("b200-")]
    assert blackwell and all(e["verdict"] != "unsupported" for e in blackwell)
    for entry in blackwell:
        cuda = entry["suggested_settings"]["cuda_version"]
        assert version_key(cuda["value"]) >= version_key("12.8") and "not given" in cuda["basis"]
    stated = by_slug(recommend(api, _merge(LLAMA_70B, {"runtime": {"cuda_version": "12.4"}})))
    assert {stated[slug]["verdict"] for slug in stated if slug.startswith("b200-")} == {"unsupported"}


def test_an_order_records_the_recommenders_verdict_and_unsupported_needs_an_override(api, catalog) -> None:
    """Issue 16, 'orders decide on the right run': an order keeps the verdict the recommender gave its configuration;
    ordering an `unsupported` one needs an explicit reason."""
    fits = api.post("/api/v1/workloads/", QWEN_7B, format="json").json()
    ordered = api.post("/api/v1/orders/", {"workload": fits["id"], "configuration": H100_X1}, format="json")
    assert ordered.status_code == 201, ordered.json()
    expected = by_slug(recommend(api, QWEN_7B))[H100_X1]
    assert ordered.json()["recommended_verdict"] == expected["verdict"] != "unsupported"

    fp8 = api.post("/api/v1/workloads/", _merge(QWEN_7B, {"name": "qwen-fp8", "precision": {"weights": "fp8"}}),
                   format="json").json()  # fmt: skip
    a100 = "a100-80gb-pcie-x1-r550"
    assert by_slug(recommend(api, _merge(QWEN_7B, {"precision": {"weights": "fp8"}})))[a100]["verdict"] == "unsupported"
    refused = api.post("/api/v1/orders/", {"workload": fp8["id"], "configuration": a100}, format="json")
    assert refused.status_code == 400
    (message,) = refused.json()["override_reason"]
    assert "unsupported" in message and "fp8" in message
    overridden = api.post(
        "/api/v1/orders/",
        {"workload": fp8["id"], "configuration": a100, "override_reason": "our own Marlin build runs fp8 here"},
        format="json",
    )
    assert overridden.status_code == 201
    body = overridden.json()
    assert body["recommended_verdict"] == "unsupported" and body["override_reason"].startswith("our own Marlin")
    assert any(r["rule"] == "precision" for r in body["recommended_reasons"])


def test_need_and_reservation_are_both_shown_labelled(api, user, catalog) -> None:
    """Issue 16, first hour, item 5: the recommendation said the 8B chat workload needs 55.7 GB on an H100 while the
    order stored 78.0 GB (vLLM's preallocated pool); both figures are now given, each named."""
    entry = by_slug(recommend(api, VLLM_8B))[H100_X1]
    assert entry["reserved_bytes"] > entry["per_device_bytes"] > 0  # the pool vLLM takes, and what the workload fills
    workload = api.post("/api/v1/workloads/", VLLM_8B, format="json").json()
    order = api.post("/api/v1/orders/", {"workload": workload["id"], "configuration": H100_X1}, format="json").json()
    assert order["need_bytes"] == order["budget"]["serving"]["need_bytes"]
    assert order["budget_peak_bytes"] == order["budget"]["per_device"]["total"]["bytes"] > order["need_bytes"]
