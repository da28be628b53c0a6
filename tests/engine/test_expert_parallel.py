"""Expert parallelism for serving (issue 18): a MoE model's routed experts split whole over ``parallelism.expert``
devices, the rest of its weights split by the tensor degree only, so that with tensor 1 every device holds the
attention and dense layers whole and serves its own sessions (data-parallel attention, the DeepSeek-V3 layout)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from budgets.engine import Workload, estimate, parameter_count
from budgets.engine.parallel import routed_expert_parameters

GIB = 2**30
CONFIGS = Path(__file__).resolve().parent / "data" / "hf_configs"
DEEPSEEK_V3 = json.loads((CONFIGS / "deepseek-v3.json").read_text())["config"]


def _serving(parallelism: dict, sessions: int = 8, engine: str = "vllm", model: dict | None = None) -> Workload:
    return Workload.model_validate(
        {
            "name": "ep",
            "task": "inference",
            "model": model or {"preset": "qwen3-30b-a3b"},
            "precision": {"weights": "bf16"},
            "inference": {"engine": engine, "concurrent_sessions": sessions, "max_input_tokens": 2048,
                          "max_output_tokens": 512},
            "parallelism": parallelism,
        }
    )  # fmt: skip


@pytest.mark.parametrize("expert", [2, 4, 8])
def test_each_device_holds_its_share_of_the_experts_and_the_rest_whole(expert: int) -> None:
    """bf16 weights are parameters × 2 B: doubling the expert degree frees half of a device's experts, exactly; the
    tensor degree splits the rest, not the experts."""
    spec = _serving({"expert": expert}).spec
    total, experts = parameter_count(spec).total, routed_expert_parameters(spec)

    def weights(parallelism: dict) -> int:
        return estimate(_serving(parallelism)).per_device.component("weights").bytes

    assert weights({"expert": expert}) - weights({"expert": 2 * expert}) == pytest.approx(
        2 * experts * (1 / expert - 1 / (2 * expert)), abs=2
    )
    assert weights({"expert": expert}) - weights({"tensor": 2, "expert": expert}) == pytest.approx(
        2 * (total - experts) / 2, rel=1e-3
    )


def test_more_expert_devices_never_need_more_per_device() -> None:
    figures = [estimate(_serving({"expert": e})).per_device.component("weights").bytes for e in (1, 2, 4, 8, 16)]
    assert figures == sorted(figures, reverse=True)


def test_deepseek_v3_fp8_on_16_devices_holds_its_experts_sixteen_ways() -> None:
    """671 B parameters, 654 B of them in routed experts (58 MoE layers × 256 experts × 3 × 7168 × 2048): an EP16
    device holds the 17 B others and 41 B of experts, at about a byte each."""
    workload = _serving({"expert": 16}, sessions=2, model={"hf_config": DEEPSEEK_V3})
    spec = workload.spec
    assert routed_expert_parameters(spec) == 58 * 256 * 3 * 7168 * 2048
    weights = estimate(workload).per_device.component("weights").bytes / GIB
    assert 50 < weights < 60
    assert any("expert parallel 16" in line for line in estimate(workload).assumptions)


@pytest.mark.parametrize(
    ("parallelism", "model", "task_or_engine", "message"),
    [
        ({"expert": 2}, {"preset": "llama-3.1-8b"}, "vllm", "mixture-of-experts"),
        ({"expert": 3}, {"preset": "qwen3-30b-a3b"}, "vllm", "must divide"),
        ({"expert": 2, "pipeline": 2}, {"preset": "qwen3-30b-a3b"}, "vllm", "pipeline 1"),
        ({"expert": 2}, {"preset": "qwen3-30b-a3b"}, "transformers", "an engine that runs it"),
    ],
)
def test_expert_parallel_outside_what_is_modelled_is_a_named_refusal(parallelism, model, task_or_engine, message):
    with pytest.raises(ValidationError, match=message):
        _serving(parallelism, model=model, engine=task_or_engine)
