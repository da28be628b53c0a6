"""Suggested settings (pure): vLLM's settings from the serving block, the largest micro-batch, the nearest changes."""

from __future__ import annotations

from budgets.engine import Workload
from catalog import compat
from recommendations.plans import Plan
from recommendations.settings import Variants, nearest_changes, suggested_settings
from recommendations.verdicts import Corrections, Verdict, assess_plan, choose_plan, judge
from tests.recommendations.catalog_views import llama70b, view

NONE = Corrections()
TRAIN_1B = {
    "name": "train-1b",
    "task": "training",
    "model": {"preset": "llama-3.2-1b"},
    "precision": {"weights": "bf16", "master_weights": "fp32"},
    "training": {"micro_batch_size": 1, "sequence_length": 2048, "activation_checkpointing": "full"},
}


def _settings(workload, slug: str) -> tuple[dict, object]:
    variants = Variants(workload)
    target = view(slug)
    outcome = judge(target, variants.base, NONE, compat.Requirements.from_workload(workload))
    return suggested_settings(workload, target, outcome, variants, NONE), outcome


def test_vllm_settings_come_from_the_plan_and_the_budgets_serving_block() -> None:
    settings, outcome = _settings(llama70b(), "h100-sxm-80gb-x8-r550")
    pb = outcome.assessment.plan_budget
    serving = pb.budget.serving
    assert outcome.verdict == Verdict.FITS and pb.plan == Plan(4, 1, 2)
    assert settings["tensor_parallel_size"] == 4 and settings["replicas"] == 2
    assert settings["kv_cache_bytes"] == serving.kv_pool_bytes > 0
    assert settings["max_model_len"] == 8192 + 1024 and settings["gpu_memory_utilization"] == 0.9
    per_replica = settings["max_concurrency_at_longest_request_per_replica"]
    assert per_replica == serving.max_concurrent_sessions_at_max_request >= 8  # 16 sessions over 2 replicas
    assert settings["max_concurrency_at_longest_request"] == 2 * per_replica  # replicas serve side by side
    assert "nearest_changes" not in settings


def test_training_suggests_the_largest_micro_batch_that_fits_under_the_plan() -> None:
    workload = Workload.model_validate(TRAIN_1B)
    settings, outcome = _settings(workload, "h100-sxm-80gb-x1-r550")
    assert outcome.verdict == Verdict.FITS
    largest = settings["max_micro_batch_size"]
    assert largest > 1
    variants = Variants(workload)
    plan, target = outcome.assessment.plan_budget.plan, view("h100-sxm-80gb-x1-r550")

    def fits(batch: int) -> bool:
        shaped = workload.model_copy(
            update={"training": workload.training.model_copy(update={"micro_batch_size": batch})}
        )
        evaluator = variants.get(("test", batch), lambda w: shaped)
        pb = evaluator.evaluate(plan, target.usable_bytes, target.accelerator_name)
        return assess_plan(shaped, target, pb, target.usable_bytes, NONE).fits

    assert fits(largest) and not fits(largest + 1)


def test_nothing_fits_and_the_nearest_changes_each_fit_with_their_budget() -> None:
    settings, outcome = _settings(llama70b(inference={"concurrent_sessions": 60}), "h100-sxm-80gb-x4-r550")
    assert outcome.verdict == Verdict.DOES_NOT_FIT  # TP4's pool holds 46 sessions of 9,216 tokens
    changes = {c["kind"]: c for c in settings["nearest_changes"]}
    assert set(changes) == {"fewer_sessions", "fp8_kv_cache", "shorter_context", "more_devices"}
    assert changes["more_devices"]["changes"] == {"device_count": 8}
    assert changes["more_devices"]["plan"]["replicas"] == 2
    assert 1 <= changes["fewer_sessions"]["changes"]["inference.concurrent_sessions"] < 46
    assert changes["shorter_context"]["changes"]["inference.max_input_tokens"] < 8192
    for change in changes.values():
        assert change["headroom_bytes"] == change["usable_bytes"] - change["per_device_bytes"] > 0
        assert change["budget"]["components"]["weights"] > 0


def test_only_changes_that_help_are_suggested() -> None:
    # 2 × H100: TP2 leaves 0.17 GiB for vLLM's pool, less than one 9,216-token request in any KV precision
    settings, outcome = _settings(llama70b(), "h100-sxm-80gb-x2-r550")
    assert outcome.verdict == Verdict.DOES_NOT_FIT
    assert [(c["kind"], c["changes"]) for c in settings["nearest_changes"]] == [("more_devices", {"device_count": 4})]


def test_each_nearest_change_is_the_largest_that_fits_on_its_grid() -> None:
    workload = llama70b(inference={"concurrent_sessions": 60})
    target = view("h100-sxm-80gb-x4-r550")
    variants = Variants(workload)
    outcome = choose_plan(target, variants.base, NONE)
    changes = {c.kind: c for c in nearest_changes(workload, target, outcome, variants, NONE)}
    sessions = changes["fewer_sessions"].changes["inference.concurrent_sessions"]
    step = 60 // 16  # searched in sixteenths of the asked figure
    assert sessions % step == 0
    more = llama70b(inference={"concurrent_sessions": sessions + step})
    assert choose_plan(target, Variants(more).base, NONE).verdict != Verdict.FITS
    prompt = changes["shorter_context"].changes["inference.max_input_tokens"]
    assert prompt % (8192 // 16) == 0  # the context in sixteenths of the asked prompt
    longer = llama70b(inference={"concurrent_sessions": 60, "max_input_tokens": prompt + 8192 // 16})
    assert choose_plan(target, Variants(longer).base, NONE).verdict != Verdict.FITS


def test_an_fp8_kv_cache_is_not_suggested_where_the_device_has_no_fp8() -> None:
    settings, outcome = _settings(llama70b(inference={"concurrent_sessions": 60}), "a100-80gb-sxm4-x4-r550")
    assert outcome.verdict == Verdict.DOES_NOT_FIT
    kinds = {c["kind"] for c in settings["nearest_changes"]}
    assert "fp8_kv_cache" not in kinds and "fewer_sessions" in kinds


def test_a_missed_latency_target_suggests_the_concurrency_that_meets_it() -> None:
    settings, outcome = _settings(llama70b(acceptance={"max_ms_per_output_token": 20.0}), "h100-sxm-80gb-x4-r550")
    assert outcome.verdict == Verdict.DOES_NOT_FIT
    assert settings["max_concurrency_within_latency_target"] == outcome.assessment.latency.max_sessions_within_target
    fewer = [c for c in settings["nearest_changes"] if c["kind"] == "fewer_sessions"]
    assert fewer and fewer[0]["changes"]["inference.concurrent_sessions"] <= 15
