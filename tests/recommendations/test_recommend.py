"""recommend() and its ranking (pure): entry fields, evidence and calibration, order, top."""

from __future__ import annotations

import dataclasses
import itertools
import json

from measurements.calibration import CalibrationRecord, EvidenceLevel, WorkloadSummary
from recommendations.ranking import VERDICT_ORDER, wasted_bytes
from recommendations.recommend import Calibration, recommend
from tests.recommendations.catalog_views import llama70b, view

ENTRY_FIELDS = {
    "configuration",
    "verdict",
    "launch",
    "plan",
    "per_device_bytes",
    "reserved_bytes",
    "usable_bytes",
    "usable_basis",
    "headroom_bytes",
    "margin",
    "reasons",
    "evidence",
    "suggested_settings",
    "latency",
    "cost",
    "price_basis",
}
SLUGS = [
    "h100-sxm-80gb-x1-r550",
    "h100-sxm-80gb-x4-r550",
    "h100-sxm-80gb-x8-r550",
    "h200-nvl-141gb-x2-r570",
    "a100-80gb-sxm4-x8-r550",
    "t4-x1-r550",
]
SUMMARY = WorkloadSummary("llama-3.1-70b", "inference", "vllm", "bf16", 16, 9216)
_ids = itertools.count(1)


def _record(
    configuration: str, ratio: float, view_name: str = "vllm_need", order: int | None = None
) -> CalibrationRecord:
    """One measured view, on its own order unless ``order`` says otherwise (a correction counts orders)."""
    estimated = 50 * 2**30
    measurement = next(_ids)
    return CalibrationRecord(
        measurement_id=measurement,
        order_id=measurement if order is None else order,
        job_id=9,
        configuration=configuration,
        architecture="hopper-sm90",
        view=view_name,
        measured=estimated * ratio,
        estimated=estimated,
        estimated_low=None,
        estimated_high=None,
        workload=SUMMARY,
    )


def test_every_entry_has_the_issues_fields_and_serializes_to_json() -> None:
    entries = recommend(llama70b(), [view(s) for s in SLUGS])
    for entry in entries:
        out = entry.as_dict()
        assert set(out) == ENTRY_FIELDS
        assert set(out["configuration"]) == {"id", "slug", "accelerator_name", "device_count", "driver_version"}
        json.dumps(out)


def test_entries_are_ranked_feasible_first_then_cheaper() -> None:
    entries = recommend(llama70b(), [view(s) for s in SLUGS])
    orders = [VERDICT_ORDER[e.verdict] for e in entries]
    assert orders == sorted(orders)
    fitting = [e for e in entries if e.verdict == "fits"]
    priced = [e for e in fitting if e.cost is not None]
    assert {e.configuration["slug"] for e in priced} == {
        "h100-sxm-80gb-x4-r550",
        "h100-sxm-80gb-x8-r550",
        "a100-80gb-sxm4-x8-r550",
    }
    per_million = [e.cost.usd_per_million_output_tokens for e in priced]
    assert per_million == sorted(per_million) and all(p > 0 for p in per_million)
    assert fitting[-1].configuration["slug"] == "h200-nvl-141gb-x2-r570" and fitting[-1].cost is None  # no price: last
    assert entries[-1].configuration["slug"] == "t4-x1-r550" and entries[-1].verdict == "unsupported"


def test_equal_entries_keep_a_stable_order_by_slug() -> None:
    base = view("h100-sxm-80gb-x4-r550")
    twins = [dataclasses.replace(base, slug=slug) for slug in ("c-node", "a-node", "b-node")]
    assert [e.configuration["slug"] for e in recommend(llama70b(), twins)] == ["a-node", "b-node", "c-node"]


def test_less_wasted_memory_ranks_first_among_otherwise_equal_entries() -> None:
    smaller = dataclasses.replace(view("h200-nvl-141gb-x2-r570"), slug="z-smaller", usable_bytes=135 * 2**30)
    entries = recommend(llama70b(), [view("h200-nvl-141gb-x2-r570"), smaller])
    assert [e.configuration["slug"] for e in entries] == ["z-smaller", "h200-nvl-141gb-x2-r570"]
    assert wasted_bytes(entries[0]) < wasted_bytes(entries[1])


def test_top_keeps_the_best_entries() -> None:
    everything = recommend(llama70b(), [view(s) for s in SLUGS])
    assert [e.configuration for e in recommend(llama70b(), [view(s) for s in SLUGS], top=2)] == [
        e.configuration for e in everything[:2]
    ]


def test_a_measurement_on_the_configuration_is_its_evidence_and_calibrates_the_margin() -> None:
    slug = "h100-sxm-80gb-x4-r550"
    records = [_record(slug, 1.02), _record(slug, 1.10), _record(slug, 1.30)]
    records.append(_record(slug, 1.0, "ms_per_output_token", order=records[0].order_id))
    calibration = Calibration.build(records, SUMMARY)
    plain, measured = (
        recommend(llama70b(), [view(slug)])[0],
        recommend(llama70b(), [view(slug)], calibration=calibration)[0],
    )
    assert measured.evidence.level == EvidenceLevel.MEASURED_HERE
    assert {m["measurement"] for m in measured.evidence.measurements} == {r.measurement_id for r in records}
    assert {m["order"] for m in measured.evidence.measurements} == {r.order_id for r in records}
    assert measured.per_device_bytes == int(plain.per_device_bytes * 1.10)  # the median ratio
    assert measured.margin.set_by == "calibration_spread"  # worst miss 0.20 of the need, above 10 % of usable
    assert "Corrected × 1.100" in measured.evidence.correction
    assert plain.evidence.level == EvidenceLevel.ESTIMATE_ONLY


def test_measurements_on_the_architecture_rank_above_an_estimate_only() -> None:
    calibration = Calibration.build([_record("h100-sxm-80gb-x8-r550", 1.0)], SUMMARY)
    twins = [dataclasses.replace(view("h100-sxm-80gb-x4-r550"), slug=s) for s in ("a-estimate", "b-kin")]
    twins[0] = dataclasses.replace(twins[0], architecture="other-architecture")
    entries = recommend(llama70b(), twins, calibration=calibration)
    assert [e.configuration["slug"] for e in entries] == ["b-kin", "a-estimate"]
    assert entries[0].evidence.label == "measured_architecture"


def test_latency_and_cost_are_labelled_estimates() -> None:
    entry = recommend(llama70b(), [view("h100-sxm-80gb-x4-r550")])[0]
    out = entry.as_dict()
    assert out["latency"]["label"] == "roofline estimate" and out["latency"]["sessions_per_replica"] == 16
    price = view("h100-sxm-80gb-x4-r550").hourly_price_usd
    assert out["cost"]["usd_per_hour"] == price and out["cost"]["usd_per_month"] == price * 730
    throughput = 16 * 1000 / entry.latency.ms_per_output_token
    assert out["cost"]["usd_per_million_output_tokens"] == price / (throughput * 3600) * 1e6


def test_configurations_that_do_not_fit_are_ranked_by_how_close_they_come() -> None:
    """Issue 16, first hour, item 4: the top 'recommendation' of the 70B training fixture was 2 x RTX A6000 needing
    726 GiB per device, ranked by its price; a configuration that does not fit is ranked by how close it comes."""
    from recommendations.ranking import overflow_ratio

    singles = ["h100-sxm-80gb-x1-r550", "a100-80gb-pcie-x1-r550", "a10-x1-r550", "l4-x1-r550", "l40s-x1-r550"]
    entries = recommend(llama70b(), [view(s) for s in singles])
    misses = [e for e in entries if e.verdict == "does_not_fit"]
    assert len(misses) >= 3
    ratios = [overflow_ratio(e) for e in misses]
    assert ratios == sorted(ratios) and all(r > 0 for r in ratios)
