"""Verdicts (pure): fits, tight, does_not_fit with the overflowing component, unsupported, and the margin."""

from __future__ import annotations

import dataclasses

from catalog import compat
from measurements.calibration import Correction
from recommendations.plans import Evaluator, Plan
from recommendations.verdicts import (
    Corrections,
    Verdict,
    assess_plan,
    choose_plan,
    judge,
    margin_for,
)
from tests.recommendations.catalog_views import llama70b, view

GIB = 2**30
NONE = Corrections()


def _judge(workload, slug: str, corrections: Corrections = NONE):
    requirements = compat.Requirements.from_workload(workload)
    return judge(view(slug), Evaluator(workload), corrections, requirements)


def test_one_h100_does_not_fit_and_says_vllm_will_not_start_and_what_overflows() -> None:
    outcome = _judge(llama70b(), "h100-sxm-80gb-x1-r550")
    assert outcome.verdict == Verdict.DOES_NOT_FIT
    rules = {r.rule: r for r in outcome.reasons}
    assert "vLLM will not start" in rules["vllm"].message and rules["vllm"].component == "weights"
    memory = rules["memory"]
    assert memory.component == "weights"  # 141 GB of bf16 weights on an 85 GB device
    assert memory.overflow_bytes == outcome.assessment.per_device_bytes - view("h100-sxm-80gb-x1-r550").usable_bytes
    assert memory.overflow_bytes > 50 * GIB


def test_four_h100s_fit_with_tensor_parallel_and_the_margin_names_its_source() -> None:
    outcome = _judge(llama70b(), "h100-sxm-80gb-x4-r550")
    a = outcome.assessment
    assert outcome.verdict == Verdict.FITS and a.plan_budget.plan == Plan(4, 1, 1)
    assert a.headroom_bytes == a.usable_bytes - a.per_device_bytes >= a.margin.bytes
    assert a.margin.set_by == "min_headroom_fraction"
    assert a.margin.bytes == int(0.10 * a.usable_bytes) == a.margin.candidates["min_headroom_fraction"]


def test_a_vllm_pool_too_small_for_the_sessions_overflows_in_the_kv_cache() -> None:
    target = view("h100-sxm-80gb-x4-r550")
    workload = llama70b(inference={"concurrent_sessions": 60})  # the pool holds 46
    pb = Evaluator(workload).evaluate(Plan(4, 1, 1), target.usable_bytes, target.accelerator_name)
    a = assess_plan(workload, target, pb, target.usable_bytes, Corrections())
    (reason,) = a.failures
    assert (reason.rule, reason.component) == ("memory", "kv_cache") and "vLLM's pool" in reason.message
    serving = pb.budget.serving
    assert reason.overflow_bytes == serving.kv_bytes_needed - serving.kv_pool_bytes > 0


def test_tight_fits_under_the_expected_budget_but_not_with_the_margin() -> None:
    outcome = _judge(llama70b(acceptance={"min_headroom_fraction": 0.5}), "h100-sxm-80gb-x4-r550")
    a = outcome.assessment
    assert outcome.verdict == Verdict.TIGHT
    assert 0 <= a.headroom_bytes < a.margin.bytes and not a.failures
    assert [r.rule for r in outcome.reasons] == ["headroom"]


def test_a_plan_with_margin_wins_over_a_cheaper_tight_one() -> None:
    # 8 × H200: one device per replica holds the weights but, at 2 sessions each, not with a 10 % margin
    outcome = _judge(llama70b(acceptance={"min_headroom_fraction": 0.3}), "h200-sxm-141gb-x8-r570")
    assert outcome.verdict == Verdict.FITS
    assert outcome.assessment.plan_budget.plan.tensor > 1


def test_the_estimates_uncertainty_sets_the_margin_when_it_is_the_largest() -> None:
    workload = llama70b(acceptance={"min_headroom_fraction": 0.0})
    a = _judge(workload, "h100-sxm-80gb-x4-r550").assessment
    assert a.margin.set_by == "estimate_uncertainty"
    assert a.margin.bytes == a.plan_budget.uncertainty_bytes > 0


def test_the_calibration_spread_sets_the_margin_and_the_correction_scales_the_need() -> None:
    workload = llama70b()
    wide = Correction("hopper-sm90", "vllm", "inference", "vllm_need", factor=1.05, spread=0.4, n=3,
                      measurement_ids=(1, 2, 3))  # fmt: skip
    plain = _judge(workload, "h100-sxm-80gb-x4-r550").assessment
    corrected = _judge(workload, "h100-sxm-80gb-x4-r550", Corrections(memory=wide)).assessment
    assert corrected.per_device_bytes == int(plain.plan_budget.need_bytes * 1.05)
    assert corrected.margin.set_by == "calibration_spread"
    assert corrected.margin.bytes == int(0.4 * corrected.per_device_bytes)
    assert "Corrected × 1.050" in corrected.need.sentence


def test_margin_ties_go_to_the_workloads_own_fraction() -> None:
    workload = llama70b()
    a = _judge(workload, "h100-sxm-80gb-x4-r550").assessment
    pb = dataclasses.replace(a.plan_budget, uncertainty_bytes=a.margin.bytes)
    assert margin_for(workload, pb, a.per_device_bytes, a.usable_bytes, None).set_by == "min_headroom_fraction"


def test_fp8_compute_is_unsupported_on_an_a100_with_a_reason_naming_fp8() -> None:
    outcome = _judge(llama70b(precision={"weights": "fp8", "compute": "fp8"}), "a100-80gb-sxm4-x8-r550")
    assert outcome.verdict == Verdict.UNSUPPORTED and outcome.assessment is None
    assert any(r.rule == "precision" and "fp8" in r.message for r in outcome.reasons)


def test_fp8_weights_alone_run_weight_only_on_an_a100_under_vllm() -> None:
    outcome = _judge(llama70b(precision={"weights": "fp8"}), "a100-80gb-sxm4-x8-r550")
    assert not any(r.rule == "precision" for r in outcome.reasons)
    assert outcome.verdict != Verdict.UNSUPPORTED


def test_a_cuda_12_8_workload_is_unsupported_on_a_driver_older_than_570_26() -> None:
    workload = llama70b(runtime={"cuda_version": "12.8"})
    old = _judge(workload, "h100-sxm-80gb-x4-r550")
    assert old.verdict == Verdict.UNSUPPORTED
    (driver,) = [r for r in old.reasons if r.rule == "driver"]
    assert "570.26" in driver.action
    assert _judge(workload, "h200-sxm-141gb-x8-r570").verdict == Verdict.FITS


def test_a_latency_target_the_roofline_cannot_meet_does_not_fit_and_says_which_concurrency_would() -> None:
    workload = llama70b(acceptance={"max_ms_per_output_token": 20.0})
    outcome = _judge(workload, "h100-sxm-80gb-x4-r550")
    assert outcome.verdict == Verdict.DOES_NOT_FIT
    (latency,) = [r for r in outcome.reasons if r.rule == "latency"]
    figures = outcome.assessment.latency
    assert figures.ms_per_output_token > 20.0 and figures.target_ms == 20.0
    assert f"at most {figures.max_sessions_within_target} sessions" in latency.action
    assert 0 < figures.max_sessions_within_target < 16


def test_a_reachable_latency_target_keeps_the_memory_verdict() -> None:
    outcome = _judge(llama70b(acceptance={"max_ms_per_output_token": 200.0}), "h100-sxm-80gb-x4-r550")
    assert outcome.verdict == Verdict.FITS
    assert outcome.assessment.latency.ms_per_output_token < 200.0


def test_does_not_fit_reports_the_closest_plan() -> None:
    outcome = _judge(llama70b(), "h100-sxm-80gb-x2-r550")
    assert outcome.verdict == Verdict.DOES_NOT_FIT
    assert outcome.assessment.plan_budget.plan == Plan(2, 1, 1)  # TP2 overflows less than one device


def test_the_verdict_is_judged_once_per_configuration_shape() -> None:
    evaluator = Evaluator(llama70b())
    first = choose_plan(view("h100-sxm-80gb-x8-r550"), evaluator, Corrections())
    twin = dataclasses.replace(view("h100-sxm-80gb-x8-r550"), slug="twin", hourly_price_usd=None)
    assert choose_plan(twin, evaluator, Corrections()) is first
