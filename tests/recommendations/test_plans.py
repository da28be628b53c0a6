"""Plans (pure): which parallel plans a configuration allows, in which order, and how each is budgeted."""

from __future__ import annotations

import dataclasses
import math

import pytest

from benchmarks.recommend_speed import WORKLOAD
from budgets.engine import Workload, estimate
from recommendations import plans
from recommendations.plans import Evaluator, Plan, candidate_plans, plan_workload
from recommendations.training_launch import no_training_launch
from recommendations.verdicts import launchable_plans
from tests.recommendations.catalog_views import llama70b, view

# 12 attention heads over 4 KV heads: tensor degree 3 and 6 divide the attention heads, not the KV heads
SMALL = {
    "model": {
        "architecture": {
            "num_layers": 4,
            "hidden_size": 768,
            "num_attention_heads": 12,
            "num_key_value_heads": 4,
            "intermediate_size": 2048,
            "vocab_size": 32000,
        }
    }
}
TRAIN = {"task": "training", "training": {"micro_batch_size": 1, "sequence_length": 2048}, "inference": None}


def _shapes(found: list[Plan]) -> list[tuple[int, int]]:
    return list(dict.fromkeys((p.tensor, p.pipeline) for p in found))


def test_tensor_degrees_divide_both_the_attention_and_the_kv_heads() -> None:
    found = candidate_plans(Workload.model_validate({**WORKLOAD, **SMALL}), view("h100-sxm-80gb-x8-r550"))
    assert {p.tensor for p in found} == {1, 2, 4}


def test_tensor_parallel_stays_inside_the_nvlink_domain_and_pipeline_goes_beyond_it() -> None:
    pcie_pairs = view("h100-pcie-80gb-x4-r570")  # 4 devices, NVLink bridges in pairs
    assert (pcie_pairs.device_count, pcie_pairs.nvlink_domain_size) == (4, 2)
    assert _shapes(candidate_plans(llama70b(), pcie_pairs)) == [(1, 1), (2, 1), (2, 2)]
    no_links = view("l40s-x8-r550")
    assert _shapes(candidate_plans(llama70b(), no_links)) == [(1, p) for p in range(1, 9)]


def test_plans_are_in_cost_order_and_replicas_fill_the_node() -> None:
    found = candidate_plans(llama70b(), view("h100-sxm-80gb-x8-r550"))
    assert [(p.tensor, p.pipeline, p.replicas) for p in found] == [(1, 1, 8), (2, 1, 4), (4, 1, 2), (8, 1, 1)]


def test_replicas_never_outnumber_the_sessions() -> None:
    found = candidate_plans(llama70b(inference={"concurrent_sessions": 3}), view("h100-sxm-80gb-x8-r550"))
    assert [p.replicas for p in found] == [3, 3, 2, 1]


def test_replicas_divide_the_sessions_and_each_replica_is_budgeted_alone() -> None:
    workload = llama70b(inference={"concurrent_sessions": 17})
    replica = plan_workload(workload, Plan(tensor=2, pipeline=1, replicas=4))
    assert replica.inference.concurrent_sessions == math.ceil(17 / 4)
    assert (replica.parallelism.tensor, replica.parallelism.data) == (2, 1)  # serving replicas are not data parallel
    assert workload.inference.concurrent_sessions == 17  # the given workload is untouched


def test_training_tries_zero_stages_over_data_parallel_and_then_recomputation() -> None:
    found = candidate_plans(llama70b(**TRAIN), view("h100-sxm-80gb-x8-r550"))
    first = [(p.zero_stage, p.recompute) for p in found if (p.tensor, p.pipeline) == (1, 1)]
    assert first == [(z, None) for z in range(4)] + [(z, "full") for z in range(4)]
    assert {p.replicas for p in found if (p.tensor, p.pipeline) == (2, 1)} == {4}
    single = candidate_plans(llama70b(**TRAIN), view("h100-sxm-80gb-x1-r550"))
    assert [(p.zero_stage, p.recompute) for p in single] == [(0, None), (0, "full")]  # ZeRO over one shards nothing


def test_a_training_plan_sets_data_parallel_zero_and_recomputation() -> None:
    replica = plan_workload(llama70b(**TRAIN), Plan(2, 1, 4, zero_stage=3, recompute="full"))
    par = replica.parallelism
    assert (par.tensor, par.data, par.zero_stage) == (2, 4, 3)
    assert replica.training.activation_checkpointing == "full"


def test_each_plan_is_the_engine_budget_of_the_replica_on_one_device() -> None:
    usable, name = view("h100-sxm-80gb-x4-r550").usable_bytes, view("h100-sxm-80gb-x4-r550").accelerator_name
    workload = llama70b()
    plan = Plan(4, 1, 1)
    pb = Evaluator(workload).evaluate(plan, usable, name)
    direct = estimate(plan_workload(workload, plan), device_memory_bytes=usable, device_name=name)
    assert pb.budget == direct
    assert pb.uncertainty_bytes == direct.per_device.total_high_bytes - direct.per_device.total_bytes


def test_vllm_needs_its_non_kv_share_plus_the_kv_its_sessions_fill() -> None:
    target = view("h100-sxm-80gb-x4-r550")
    pb = Evaluator(llama70b()).evaluate(Plan(4, 1, 1), target.usable_bytes, target.accelerator_name)
    serving = pb.budget.serving
    share = int(target.usable_bytes * 0.9)
    assert pb.utilization_bytes == share
    assert pb.need_bytes == share - serving.available_kv_bytes + serving.kv_bytes_needed
    assert pb.need_bytes < pb.budget.per_device.total_bytes  # the unused pool is not the workload's


def test_the_evaluator_asks_the_engine_once_per_device_and_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = plans.estimate

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(plans, "estimate", counting)
    evaluator = Evaluator(llama70b())
    h100 = view("h100-sxm-80gb-x8-r550")
    first = evaluator.evaluate(Plan(2, 1, 4), h100.usable_bytes, h100.accelerator_name)
    again = evaluator.evaluate(Plan(2, 1, 4), h100.usable_bytes, h100.accelerator_name)
    evaluator.evaluate(Plan(4, 1, 2), h100.usable_bytes, h100.accelerator_name)
    assert first is again and len(calls) == 2


def test_configurations_that_differ_only_in_driver_or_price_share_a_shape() -> None:
    base = view("h100-sxm-80gb-x8-r550")
    other = dataclasses.replace(base, slug="other", driver_version="580.95.05", hourly_price_usd=1.0)
    assert base.shape() == other.shape()
    assert dataclasses.replace(base, device_count=4).shape() != base.shape()


@pytest.mark.parametrize(
    "framework,stages",
    [("transformers", {0, 1, 2, 3}), ("torchtune", {2, 3}), ("torchtitan", {0, 2, 3})],
)
def test_data_parallel_plans_use_only_the_zero_stages_the_framework_runs(framework: str, stages: set[int]) -> None:
    """torchtune's distributed recipes always shard with FSDP2 (stage 3, or 2 with fsdp_reshard_after_forward off);
    torchtitan runs FSDP2 or, on a one-dimensional mesh, DDP; DeepSpeed under transformers runs any stage. A plan the
    framework cannot launch is never budgeted as a recommendation."""
    workload = Workload.model_validate(
        {
            "name": f"{framework}-8b-full",
            "task": "training",
            "model": {"preset": "llama-3.1-8b"},
            "precision": {"weights": "bf16"},
            "training": {"framework": framework, "micro_batch_size": 1, "sequence_length": 2048},
        }
    )
    found: dict[tuple[int, int], set[int]] = {}
    for plan in candidate_plans(workload, view("h100-sxm-80gb-x8-r570")):
        if plan.replicas > 1:
            found.setdefault((plan.tensor, plan.pipeline), set()).add(plan.zero_stage)
    assert found[(1, 1)] == stages
    model_parallel = {zero for (tensor, pipeline), zeros in found.items() if tensor * pipeline > 1 for zero in zeros}
    assert model_parallel == (stages - {0} if framework == "torchtitan" else stages)


def _trained(framework: str, preset: str = "llama-3.1-8b", weights: str = "bf16", **training: object) -> Workload:
    return Workload.model_validate(
        {
            "name": f"{framework}-{preset}",
            "task": "training",
            "model": {"preset": preset},
            "precision": {"weights": weights},
            "training": {"framework": framework, "micro_batch_size": 1, "sequence_length": 2048, **training},
        }
    )


@pytest.mark.parametrize(
    ("framework", "tensor", "pipeline"),
    [("transformers", False, False), ("torchtune", True, False), ("torchtitan", True, True)],
)
def test_the_recommender_keeps_the_model_parallel_plans_the_framework_launches(
    framework: str, tensor: bool, pipeline: bool
) -> None:
    """The HF Trainer and TRL run data parallelism only, torchtune's recipes tensor parallelism but no pipeline,
    torchtitan both: the plans searched are those, and the rest are named in one reason."""
    workload = _trained(framework)
    h100 = view("h100-pcie-80gb-x4-r570")  # NVLink bridges in pairs: tensor 2, pipeline stages beyond a pair
    kept, left_out = launchable_plans(workload, h100)
    assert kept and all(no_training_launch(workload, {}, plan) is None for plan in kept)
    assert any(plan.tensor > 1 for plan in kept) == tensor
    assert any(plan.pipeline > 1 for plan in kept) == pipeline
    every = candidate_plans(workload, h100)
    dropped = len(every) - len(kept)
    if dropped:
        (reason,) = left_out
        assert reason.rule == "framework" and reason.message.startswith(f"{dropped} of the {len(every)} plans")
    else:
        assert left_out == ()


def test_a_one_gpu_framework_is_planned_on_one_device_of_a_larger_node() -> None:
    """Unsloth's open-source release trains on one GPU whatever the node has: its plan there is one device."""
    workload = _trained("unsloth", weights="nf4", method="qlora")
    kept, left_out = launchable_plans(workload, view("h100-sxm-80gb-x8-r570"))
    assert {(plan.tensor, plan.pipeline, plan.replicas) for plan in kept} == {(1, 1, 1)}
    assert left_out == ()


def test_a_workload_no_plan_of_which_launches_keeps_the_plans_refused_for_the_workload_alone() -> None:
    """An architecture with no checkpoint, which no Hugging Face model type builds (a standard MLP with RMSNorm), has
    no HF Trainer command on any plan: that is the workload's refusal, not the plans', so the search keeps the plans
    refused for it alone (the entries say why none launches), and still leaves out the tensor-parallel ones the HF
    Trainer could not run with a checkpoint either."""
    unbuilt = {"model": {"architecture": {**SMALL["model"]["architecture"], "mlp": "standard", "norm": "rms"}}}
    workload = Workload.model_validate(
        {**TRAIN, **unbuilt, "name": "no-checkpoint", "training": {"micro_batch_size": 1, "sequence_length": 2048}}
    )
    h100 = view("h100-sxm-80gb-x8-r570")
    kept, left_out = launchable_plans(workload, h100)
    (refusal,) = {no_training_launch(workload, {}, plan) for plan in kept}
    assert refusal is not None
    assert refusal.startswith("the workload names no checkpoint for trl sft to load, and vramplan cannot build one")
    assert kept == [plan for plan in candidate_plans(workload, h100) if plan.tensor == plan.pipeline == 1]
    (reason,) = left_out
    assert "tensor or pipeline parallelism" in reason.message
