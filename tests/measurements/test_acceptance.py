"""The decision and the measured/estimated comparison (pure: no database)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from budgets.engine.budget import COMPONENT_NAMES, Budget, ComponentBudget, DeviceBudget, HostBudget, ServingPlan
from measurements.acceptance import (
    Criteria,
    TransitionError,
    check_transition,
    decide,
    engine_need,
    sglang_need,
    view_ratios,
    vllm_need,
)

GIB = 2**30
USABLE = 80 * GIB
CRITERIA = Criteria(min_headroom_fraction=0.10, max_ms_per_output_token=50.0)


def budget(total: int, device: str = "cuda", need_bytes: int | None = None, **components: int) -> Budget:
    """A budget as ``budgets.engine.budget.read_budget`` reads a stored one (components not named are 0)."""
    parts = tuple(ComponentBudget(n, components.get(n, 0), components.get(n, 0), components.get(n, 0), "")
                  for n in COMPONENT_NAMES)  # fmt: skip
    serving = None if need_bytes is None else ServingPlan(0, 0, 50 * GIB, need_bytes=need_bytes)
    return Budget("w", device, 1, DeviceBudget(parts, total, total, total, "decode", ()), HostBudget(0, 0), (), {},
                  serving)  # fmt: skip


BUDGET = budget(60 * GIB, weights=16 * GIB, kv_cache=40 * GIB, runtime=GIB, fragmentation=2 * GIB)


def test_a_peak_with_enough_headroom_is_accepted_and_says_its_numbers() -> None:
    decision = decide(outcome="succeeded", peaks={"device_used": 60 * GIB}, usable_memory_bytes=USABLE,
                      criteria=CRITERIA, ms_per_output_token=20.0)  # fmt: skip
    assert decision.verdict == "accepted"
    assert decision.margin_bytes == 20 * GIB
    assert decision.margin_fraction == pytest.approx(0.25)
    assert "60.00 GiB" in decision.sentence and "25.0%" in decision.sentence and "20.00 ms" in decision.sentence


def test_too_little_headroom_is_rejected_and_names_the_criterion_and_component() -> None:
    decision = decide(outcome="succeeded", peaks={"device_used": 75 * GIB}, usable_memory_bytes=USABLE,
                      criteria=CRITERIA, budget=BUDGET)  # fmt: skip
    assert decision.verdict == "rejected"
    assert decision.broken_by == "headroom"
    assert decision.component == "kv_cache"
    assert "less than the required headroom of 10%" in decision.sentence


def test_a_slow_run_that_fits_is_rejected_for_latency() -> None:
    decision = decide(outcome="succeeded", peaks={"device_used": 40 * GIB}, usable_memory_bytes=USABLE,
                      criteria=CRITERIA, ms_per_output_token=80.0)  # fmt: skip
    assert (decision.verdict, decision.broken_by) == ("rejected", "latency")


def test_an_oom_is_a_rejection_not_a_crash() -> None:
    decision = decide(outcome="oom", peaks={"device_used": 79 * GIB}, usable_memory_bytes=USABLE,
                      criteria=CRITERIA, budget=BUDGET, oom_phase="prefill")  # fmt: skip
    assert (decision.verdict, decision.broken_by) == ("rejected", "oom")
    assert "during prefill" in decision.sentence


@pytest.mark.parametrize("outcome", ["failed", "timeout", "signalled", "cancelled"])
def test_runs_that_ended_for_other_reasons_decide_nothing(outcome: str) -> None:
    decision = decide(outcome=outcome, peaks={"device_used": GIB}, usable_memory_bytes=USABLE, criteria=CRITERIA)
    assert decision.verdict == "undecided"


def test_the_best_view_decides_device_before_framework_before_host() -> None:
    peaks = {"device_used": None, "framework_reserved": 30 * GIB, "framework_allocated": 20 * GIB, "host_rss": GIB}
    decision = decide(outcome="succeeded", peaks=peaks, usable_memory_bytes=USABLE, criteria=CRITERIA)
    assert (decision.view, decision.measured_peak_bytes) == ("framework_reserved", 30 * GIB)
    nothing = decide(outcome="succeeded", peaks={}, usable_memory_bytes=USABLE, criteria=CRITERIA)
    assert nothing.verdict == "undecided" and "no memory view" in nothing.sentence


def test_ratios_compare_each_view_with_the_budget_figure_that_predicts_it() -> None:
    ratios = view_ratios({"device_used": 66 * GIB, "framework_allocated": 57 * GIB, "host_rss": GIB}, BUDGET)
    assert ratios["device_used"]["ratio"] == pytest.approx(1.1)
    assert ratios["framework_allocated"]["estimated_bytes"] == 57 * GIB  # total − runtime − fragmentation
    assert ratios["framework_allocated"]["ratio"] == pytest.approx(1.0)
    assert "host_rss" not in ratios
    cpu = budget(1000, device="cpu")
    assert view_ratios({"framework_allocated": 1100}, cpu)["framework_allocated"]["ratio"] == pytest.approx(1.1)


def test_a_vllm_budget_predicts_the_vllm_need_view() -> None:
    # the engine's serving block says what the workload needs of vLLM's share; a measured vllm_need (from
    # vLLM's own start-up report) is compared with it, like with like
    vllm_budget = budget(60 * GIB, need_bytes=40 * GIB, weights=16 * GIB, kv_cache=40 * GIB, runtime=GIB,
                         fragmentation=2 * GIB)  # fmt: skip
    ratios = view_ratios({"vllm_need": 44 * GIB, "device_used": 72 * GIB}, vllm_budget)
    assert ratios["vllm_need"] == {"measured_bytes": 44 * GIB, "estimated_bytes": 40 * GIB, "ratio": 1.1,
                                   "basis": "serving.need_bytes"}  # fmt: skip
    assert "vllm_need" not in view_ratios({"vllm_need": 44 * GIB}, BUDGET)  # no serving block, no estimate


def test_order_transitions_follow_the_table() -> None:
    check_transition("draft", "acceptance_pending")
    check_transition("accepted", "confirmed")
    with pytest.raises(TransitionError, match="allowed: acceptance_pending, cancelled"):
        check_transition("draft", "confirmed")
    with pytest.raises(TransitionError, match="it is final"):
        check_transition("confirmed", "cancelled")


def test_an_unmeasured_latency_target_leaves_the_order_undecided() -> None:
    decision = decide(outcome="succeeded", peaks={"device_used": 40 * GIB}, usable_memory_bytes=USABLE,
                      criteria=CRITERIA)  # fmt: skip
    assert decision.verdict == "undecided" and "did not measure the latency target" in decision.sentence


def test_a_node_without_gpu_is_judged_on_host_rss() -> None:
    peaks = {"framework_allocated": GIB, "host_rss": 20 * GIB}
    decision = decide(outcome="succeeded", peaks=peaks, usable_memory_bytes=21 * GIB, host_only=True,
                      criteria=Criteria(0.10, None))  # fmt: skip
    assert (decision.view, decision.verdict) == ("host_rss", "rejected")


# vLLM 0.10.1 on an H100 (vllm-project/vllm#23278 as parsed by workers/runner/vllm_log.py): the device view
# is the pool vLLM preallocates; what the workload needs comes from the report.
VLLM_REPORT = {
    "engine": "vllm",
    "engine_report": {
        "weights_bytes": 15 * GIB,
        "activation_peak_bytes": 2 * GIB,
        "non_torch_bytes": GIB // 2,
        "kv_cache_bytes": 50 * GIB,
        "kv_cache_tokens": 409_600,
    },
}


def test_vllm_is_judged_on_what_its_report_says_the_workload_needs_not_its_preallocated_pool() -> None:
    need, why = vllm_need(VLLM_REPORT, needed_tokens=32 * 8192)
    per_token = 50 * GIB / 409_600
    assert why is None and need == int(15 * GIB + 2 * GIB + GIB // 2 + 32 * 8192 * per_token)
    decision = decide(outcome="succeeded", peaks={"vllm_need": need, "device_used": 72 * GIB},
                      usable_memory_bytes=USABLE, criteria=Criteria(0.10, None))  # fmt: skip
    assert (decision.view, decision.verdict) == ("vllm_need", "accepted")
    too_many, _ = vllm_need(VLLM_REPORT, needed_tokens=10 * 409_600)
    assert decide(outcome="succeeded", peaks={"vllm_need": too_many}, usable_memory_bytes=USABLE,
                  criteria=Criteria(0.10, None)).broken_by == "headroom"  # fmt: skip
    assert vllm_need({"engine": "vllm", "engine_report": {}}, 10)[1].startswith("vLLM's startup report lacks")
    assert vllm_need({"engine": "other"}, 10) == (None, None)


def test_hardware_mismatch_counts_gpus_and_tells_cards_apart_by_their_memory() -> None:
    from measurements.acceptance import hardware_mismatch

    h100 = {"name": "NVIDIA H100 80GB HBM3", "total_bytes": 81_559 * 2**20}  # what NVML reads on an H100 80GB
    rtx = {"name": "NVIDIA GeForce RTX 4090", "total_bytes": 24_564 * 2**20}
    assert hardware_mismatch([h100] * 8, 8, 80 * 10**9) is None
    assert hardware_mismatch([h100] * 4, 8, 80 * 10**9) == "it measured 4 GPU(s); the order is for 8"
    assert "RTX 4090 with 25.8 GB" in (hardware_mismatch([rtx], 1, 80 * 10**9) or "")
    assert hardware_mismatch([h100], 1, 94 * 10**9) is not None  # an H100 80GB is not an H100 NVL 94GB
    assert "no NVML" in (hardware_mismatch([], 1, 80 * 10**9) or "")
    assert hardware_mismatch([], 0, None) is None  # a CPU configuration, measured without GPUs
    assert hardware_mismatch([{"name": "NVIDIA H100"}], 1, 80 * 10**9) is None  # no total read: the count decides


# SGLang's start-up report as workers/runner/sglang_log.py reads a published one: Qwen3-14B on one ~48 GB GPU
# (benchmarks/sglang_published, xorbitsai/inference#3481), and an excerpt with a pool but no weight line
# (tests/workers/data/sglang_logs/pr11830_b200_cuda-graph.log)
REPO = Path(__file__).resolve().parents[2]


def _sglang_report(text: str) -> dict[str, Any]:
    from workers.runner.sglang_log import parse_sglang_memory_report

    return {"engine": "sglang", "engine_report": parse_sglang_memory_report(text).as_dict()}


def _published(record_id: str) -> dict[str, Any]:
    records = json.loads((REPO / "benchmarks" / "sglang_published" / "records.json").read_text())["records"]
    quote = next(r for r in records if r["id"] == record_id)["quote"]  # lines: a list, or joined with " | "
    return _sglang_report("\n".join(quote if isinstance(quote, list) else quote.split(" | ")))


def test_sglang_is_judged_on_what_its_report_says_the_sessions_need_of_its_pool() -> None:
    report = _published("xinference3481-qwen3-14b-1gpu")
    need, why = sglang_need(report, sessions=8, longest_request=5120)
    per_token = round(14.00 * GIB) / 91_749  # K + V of the pool over its tokens: 163,840 B, Qwen3-14B's cell
    assert why is None and need == int(round(27.57 * GIB) + 8 * 5120 * per_token)
    assert engine_need(report, 8, 5120) == ("sglang_need", need, None)
    # the device view of an SGLang run is its static share (weights + the whole pool) and the reserve: the need decides
    decision = decide(outcome="succeeded", peaks={"sglang_need": need, "device_used": 44 * GIB},
                      usable_memory_bytes=46 * GIB, criteria=Criteria(0.10, None))  # fmt: skip
    assert (decision.view, decision.verdict) == ("sglang_need", "accepted")
    more, _ = sglang_need(report, sessions=40, longest_request=5120)
    assert decide(outcome="succeeded", peaks={"sglang_need": more}, usable_memory_bytes=46 * GIB,
                  criteria=Criteria(0.10, None)).broken_by == "headroom"  # fmt: skip


def test_an_sglang_budget_predicts_the_sglang_need_view_and_a_vllm_one_does_not() -> None:
    need, _ = sglang_need(_published("xinference3481-qwen3-14b-1gpu"), sessions=8, longest_request=5120)
    pool = budget(44 * GIB, need_bytes=need // 2, weights=27 * GIB, kv_cache=9 * GIB)
    ratios = view_ratios({"sglang_need": need, "device_used": 44 * GIB}, pool, "sglang")
    assert ratios["sglang_need"]["ratio"] == 2.0 and ratios["sglang_need"]["basis"] == "serving.need_bytes"
    assert "sglang_need" not in view_ratios({"sglang_need": need}, pool)  # a vLLM budget predicts vllm_need only
    assert "vllm_need" not in view_ratios({"vllm_need": need}, pool, "sglang")
    assert "sglang_need" not in view_ratios({"sglang_need": need}, pool, "transformers")


def test_an_sglang_report_without_a_figure_says_which_and_judges_nothing() -> None:
    text = (REPO / "tests" / "workers" / "data" / "sglang_logs" / "pr11830_b200_cuda-graph.log").read_text()
    report = _sglang_report(text.partition("\n\n")[2])
    assert report["engine_report"]["kv_cache_tokens"] == 2243474  # the pool is there, the weights are not
    need, why = sglang_need(report, sessions=8, longest_request=5120)
    assert need is None and why is not None and why.startswith("SGLang's start-up report lacks weights_bytes")
    assert sglang_need(VLLM_REPORT, 8, 5120) == (None, None)
    assert engine_need({"engine": "transformers"}, 8, 5120) == (None, None, None)
    assert engine_need(VLLM_REPORT, 32, 8192)[:2] == ("vllm_need", vllm_need(VLLM_REPORT, 32 * 8192)[0])
