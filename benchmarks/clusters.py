"""Clusters (issue 18): what the recommender says for the workloads that need more than one node, on the committed
catalog (``fixtures/catalog``, without a database).

    python -m benchmarks.clusters

Prints, per workload, each configuration's verdict, plan, per-device need against usable memory, the roofline's
time per output token and its communication terms (tensor parallel's all-reduces, the pipeline's transfers between
nodes, expert parallel's all-to-all), and the links they cross. A report, not a gate: the targets are tests
(``tests/recommendations/test_clusters.py``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.recommend_speed import fixture_views  # noqa: E402
from budgets.engine import Workload  # noqa: E402
from recommendations.recommend import recommend  # noqa: E402

GIB = 2**30
DEEPSEEK_V3 = {
    **json.loads((REPO / "tests" / "engine" / "data" / "hf_configs" / "deepseek-v3.json").read_text())["config"],
    "_name_or_path": "deepseek-ai/DeepSeek-V3",
}
H100 = ("h100-sxm-80gb-x8-r570", *(f"h100-sxm-80gb-{n}x8-r570" for n in (2, 4, 8, 16)))
CASES: list[tuple[str, dict, tuple[str, ...]]] = [
    (
        "DeepSeek-V3 FP8, vLLM, 32 sessions × 32k tokens",
        {"task": "inference", "model": {"hf_config": DEEPSEEK_V3}, "precision": {"weights": "fp8"},
         "inference": {"engine": "vllm", "concurrent_sessions": 32, "max_input_tokens": 30720,
                       "max_output_tokens": 2048}},
        ("h200-sxm-141gb-x8-r570", "h100-sxm-80gb-x8-r570", "h100-sxm-80gb-2x8-r570", "b200-2x8-r570",
         "gb200-nvl72-r580"),
    ),
    (
        "Llama-3.1-405B bf16, vLLM, 64 sessions × 9k tokens",
        {"task": "inference", "model": {"preset": "llama-3.1-405b"}, "precision": {"weights": "bf16"},
         "inference": {"concurrent_sessions": 64, "max_input_tokens": 8192, "max_output_tokens": 1024}},
        ("h100-sxm-80gb-2x8-r570", "h200-sxm-141gb-2x8-r570", "gb200-nvl72-r580"),
    ),
    (
        "Llama-3.1-405B bf16 full fine-tune, torchtitan, 2 × 8192 tokens, full recomputation",
        {"task": "training", "model": {"preset": "llama-3.1-405b"}, "precision": {"weights": "bf16"},
         "training": {"framework": "torchtitan", "method": "full", "micro_batch_size": 2, "sequence_length": 8192,
                      "activation_checkpointing": "full"}},
        H100,
    ),
]  # fmt: skip


def main() -> int:
    views = {view.slug: view for view in fixture_views()}
    for title, description, slugs in CASES:
        workload = Workload.model_validate({"name": title, **description})
        print(title)
        for entry in recommend(workload, [views[slug] for slug in slugs]):
            plan = entry.plan.label() if entry.plan else "—"
            need = f"{entry.per_device_bytes / GIB:7.1f}" if entry.per_device_bytes is not None else "      —"
            usable = entry.usable_bytes / GIB
            print(f"  {entry.configuration['slug']:<26} {entry.verdict.value:<13} {need} of {usable:5.1f} GiB  {plan}")
            latency = entry.latency
            if latency is not None:
                print(f"      {latency.ms_per_output_token:6.1f} ms/token; all-reduce {latency.all_reduce_ms:.2f} ms,"
                      f" pipeline transfer {latency.pipeline_transfer_ms:.2f} ms, all-to-all"
                      f" {latency.all_to_all_ms:.2f} ms; {latency.communication}")  # fmt: skip
            if entry.cost is not None:
                per_m = entry.cost.usd_per_million_output_tokens
                tokens = f", ${per_m:,.2f} per million output tokens" if per_m else ""
                print(f"      ${entry.cost.usd_per_hour:,.2f}/h, ${entry.cost.usd_per_month:,.0f}/month{tokens}"
                      f" {entry.cost.offer_text()}")  # fmt: skip
            elif entry.verdict.value != "unsupported":
                print("      no price")
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
