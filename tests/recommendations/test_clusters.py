"""Clusters (issue 18): multi-node configurations of the real catalog, expert parallelism with data-parallel
attention, and the communication each plan needs in its roofline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.recommend_speed import fixture_views
from budgets.engine import Workload
from recommendations import roofline
from recommendations.plans import ConfigurationView, candidate_plans
from recommendations.recommend import Entry, recommend

GIB = 2**30
CONFIGS = Path(__file__).resolve().parents[1] / "engine" / "data" / "hf_configs"
# its config.json as the hub serves it, which names the repository a launch loads
DEEPSEEK_V3 = {
    **json.loads((CONFIGS / "deepseek-v3.json").read_text())["config"],
    "_name_or_path": "deepseek-ai/DeepSeek-V3",
}


def _deepseek(engine: str) -> Workload:
    """DeepSeek-V3, its FP8 checkpoint, 32 sessions of 32k tokens (30,720 in, 2,048 out)."""
    return Workload.model_validate(
        {
            "name": "deepseek-v3-32x32k",
            "task": "inference",
            "model": {"hf_config": DEEPSEEK_V3},
            "precision": {"weights": "fp8"},
            "inference": {"engine": engine, "concurrent_sessions": 32, "max_input_tokens": 30_720,
                          "max_output_tokens": 2_048},
        }
    )  # fmt: skip


def _views() -> dict[str, ConfigurationView]:
    return {view.slug: view for view in fixture_views()}


def _judged(workload: Workload, *slugs: str) -> dict[str, Entry]:
    views = _views()
    return {entry.configuration["slug"]: entry for entry in recommend(workload, [views[s] for s in slugs])}


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_deepseek_v3_fp8_32_sessions_of_32k_on_h200_h100_and_two_h100_nodes(engine: str) -> None:
    """8×H200 fits (experts split eight ways, each device serving 4 sessions); 8×H100 does not (its share of the
    FP8 weights alone, 92 GiB, is more than an H100 holds); 2×8 H100 fits with a named plan, its per-device budget,
    and the all-to-all over the nodes' InfiniBand in its latency."""
    entries = _judged(_deepseek(engine), "h200-sxm-141gb-x8-r570", "h100-sxm-80gb-x8-r570", "h100-sxm-80gb-2x8-r570")
    h200, h100, cluster = (
        entries["h200-sxm-141gb-x8-r570"],
        entries["h100-sxm-80gb-x8-r570"],
        (entries["h100-sxm-80gb-2x8-r570"]),
    )
    assert h200.verdict == "fits" and h200.plan is not None and h200.plan.devices == 8
    assert h100.verdict == "does_not_fit"
    assert any(r.rule == "memory" for r in h100.reasons)
    assert cluster.verdict == "fits" and cluster.plan is not None and cluster.plan.devices == 16
    assert cluster.plan.label() in ("EP16, data-parallel attention (16 ranks)", "TP8 × PP2")
    assert cluster.per_device_bytes is not None and cluster.per_device_bytes < cluster.usable_bytes
    assert cluster.budget is not None and cluster.budget.per_device.component("weights").bytes > 40 * GIB
    latency = cluster.latency
    assert latency is not None
    assert latency.all_to_all_ms + latency.pipeline_transfer_ms > 0
    assert "Gb/s per GPU" in latency.communication
    document = cluster.as_dict()
    assert document["latency"]["communication"] == latency.communication
    assert document["launch"] is not None and document["launch"]["servers"] == 1
    assert "HEAD_NODE_IP" in document["launch"]["text"]


def test_expert_parallel_plans_are_offered_for_moe_serving_only() -> None:
    views = _views()
    cluster = views["h100-sxm-80gb-2x8-r570"]
    assert {p.expert for p in candidate_plans(_deepseek("vllm"), cluster)} >= {2, 4, 8, 16}
    dense = Workload.model_validate(
        {"task": "inference", "model": {"preset": "llama-3.1-70b"}, "inference": {"concurrent_sessions": 32}}
    )
    assert {p.expert for p in candidate_plans(dense, cluster)} == {1}
    generate = _deepseek("vllm").model_copy(
        update={"inference": _deepseek("vllm").inference.model_copy(update={"engine": "transformers"})}
    )
    assert {p.expert for p in candidate_plans(generate, cluster)} == {1}


def test_a_pipeline_over_two_nodes_passes_its_activations_over_the_scale_out_network() -> None:
    """Llama-3.1-405B in bf16 (810 GB) needs more than one node of H100: tensor parallel 8 inside each node's
    NVLink, two pipeline stages across the InfiniBand between them."""
    workload = Workload.model_validate(
        {
            "task": "inference",
            "model": {"preset": "llama-3.1-405b"},
            "precision": {"weights": "bf16"},
            "inference": {"concurrent_sessions": 8, "max_input_tokens": 4096, "max_output_tokens": 1024},
        }
    )
    entry = _judged(workload, "h100-sxm-80gb-2x8-r570")["h100-sxm-80gb-2x8-r570"]
    assert entry.verdict in ("fits", "tight") and entry.plan is not None
    assert (entry.plan.tensor, entry.plan.pipeline) == (8, 2)
    assert entry.latency is not None and entry.latency.pipeline_transfer_ms > 0 and entry.latency.all_reduce_ms > 0
    assert "between nodes" in entry.latency.communication and "NVLink" in entry.latency.communication


def test_an_nvl72_rack_plans_tensor_parallel_across_its_trays_over_nvlink() -> None:
    """A GB200 NVL72 rack is one NVLink domain of 72 GPUs in 18 trays of 4: a model too large for a tray's 4 runs
    tensor parallel wider than a tray, and its all-reduces use NVLink, not the trays' network."""
    views = _views()
    (rack,) = [v for v in views.values() if v.slug.startswith("gb200-nvl72")]
    assert rack.nvlink_domain_size == 72 and rack.node_count == 18 and rack.devices_per_node == 4
    workload = Workload.model_validate(
        {
            "task": "inference",
            "model": {"preset": "llama-3.1-405b"},
            "precision": {"weights": "bf16"},
            "inference": {"concurrent_sessions": 64, "max_input_tokens": 8192, "max_output_tokens": 1024},
            "runtime": {"cuda_version": "13.0"},
        }
    )
    (entry,) = recommend(workload, [rack])
    assert entry.verdict in ("fits", "tight") and entry.plan is not None
    assert entry.plan.tensor > rack.devices_per_node and entry.plan.pipeline == 1
    assert entry.latency is not None and entry.latency.all_reduce_ms > 0
    assert "72-GPU domain" in entry.latency.communication and "between nodes" not in entry.latency.communication


def test_the_all_to_all_latency_is_deepeps_measured_row_at_or_above_the_ep_size() -> None:
    assert roofline.all_to_all_us(8) == 77 + 114
    assert roofline.all_to_all_us(16) == 118 + 195
    assert roofline.all_to_all_us(12) == roofline.all_to_all_us(16)  # between rows: the larger group's
    assert roofline.all_to_all_us(2) == roofline.all_to_all_us(8)
    assert roofline.all_to_all_us(512) == roofline.all_to_all_us(256)
    figures = [roofline.all_to_all_us(n) for n in (8, 16, 32, 64, 128)]
    assert figures == sorted(figures)


def test_the_smallest_h100_cluster_for_a_405b_full_fine_tune_under_torchtitan() -> None:
    """Llama-3.1-405B, bf16 full fine-tune, AdamW, 2 × 8192 tokens per device, full recomputation, torchtitan:
    FSDP (ZeRO-3) over the data-parallel ranks with tensor parallel 8 inside each node, whose norms run sequence
    parallel (torchtitan v0.2.0 models/llama3/infra/parallelize.py:171, 208, 217). One node or two cannot hold the
    optimizer states; 8 nodes can. torchtitan's own 405B runs (docs/performance.md at 3faaa1a: FSDP 16 × TP 8 on
    128 H100s runs at batch 2 with full checkpointing; FSDP alone runs out of memory) publish no memory figure for
    bf16, so the per-device budget is checked against the usable memory here, not a measurement."""
    workload = Workload.model_validate(
        {
            "name": "405b-ft",
            "task": "training",
            "model": {"preset": "llama-3.1-405b"},
            "precision": {"weights": "bf16"},
            "training": {"framework": "torchtitan", "method": "full", "micro_batch_size": 2,
                         "sequence_length": 8192, "activation_checkpointing": "full"},
        }
    )  # fmt: skip
    clusters = [f"h100-sxm-80gb-{n}x8-r570" for n in (2, 4, 8, 16)]
    entries = _judged(workload, "h100-sxm-80gb-x8-r570", *clusters)
    fitting = sorted(
        (entry.configuration["device_count"], slug) for slug, entry in entries.items() if entry.verdict == "fits"
    )
    assert fitting and fitting[0] == (64, "h100-sxm-80gb-8x8-r570")
    smallest = entries["h100-sxm-80gb-8x8-r570"]
    assert smallest.plan is not None and smallest.plan.tensor == 8 and smallest.plan.zero_stage == 3
    assert smallest.budget is not None and smallest.per_device_bytes is not None
    assert 40 * GIB < smallest.per_device_bytes < smallest.usable_bytes
    assert "ZeRO-3" in smallest.plan.label()


@pytest.mark.parametrize(("framework", "sequence_parallel"), [("torchtitan", True), ("transformers", False)])
def test_a_framework_whose_tensor_parallelism_shards_the_sequence_runs_it_in_every_tensor_plan(
    framework: str, sequence_parallel: bool
) -> None:
    from recommendations.plans import Plan, plan_workload

    workload = Workload.model_validate(
        {"task": "training", "model": {"preset": "llama-3.1-8b"}, "training": {"framework": framework}}
    )
    assert plan_workload(workload, Plan(4, 1, 2, zero_stage=3)).parallelism.sequence_parallel is sequence_parallel
    assert plan_workload(workload, Plan(1, 1, 8, zero_stage=3)).parallelism.sequence_parallel is False


def test_expert_parallel_on_one_node_without_nvlink_names_pcie_not_a_network() -> None:
    """Four L40S cards in one server have no NVLink between them: an expert-parallel plan's all-to-all crosses PCIe,
    and the entry says so rather than naming a scale-out network the configuration does not have; on a cluster the
    same plan beyond one node names the cluster's network."""
    from recommendations.plans import Plan
    from recommendations.verdicts import _communication, _links_text

    workload = Workload.model_validate(
        {"task": "inference", "model": {"preset": "qwen3-30b-a3b"}, "inference": {"concurrent_sessions": 64}}
    )
    views = _views()
    pcie = next(v for s, v in views.items() if s.startswith("l40s-x4") and v.nvlink_domain_size == 1)
    plan = Plan(1, 1, 4, expert=4)
    assert plan in candidate_plans(workload, pcie)
    text = _links_text(pcie, plan, _communication(workload, pcie, plan))
    assert "PCIe" in text and "Gb/s per GPU" not in text
    cluster = views["h100-sxm-80gb-2x8-r570"]
    wide = Plan(1, 1, 16, expert=16)
    text = _links_text(cluster, wide, _communication(workload, cluster, wide))
    assert "400 Gb/s per GPU" in text and "PCIe" not in text
