"""The optimizer step's implementation: as the workload gives it, else torch's default for the device
(torch 2.13 torch/optim/optimizer.py `_default_to_fused_or_foreach`: foreach only with every parameter on
CUDA, so the for-loop on the CPU), named in the assumptions, with a range over the alternatives."""

from __future__ import annotations

import pytest

from budgets.engine import Workload, estimate
from budgets.engine.budget import Budget
from budgets.engine.components import training as tr

# Llama 3.2 1B: 1,235,814,400 parameters; its largest tensor is the tied 128,256 × 2,048 embedding
PARAMS, VOCAB_MATRIX = 1_235_814_400, 128_256 * 2_048


def _budget(device: str, impl: str | None = None) -> Budget:
    training: dict = {"micro_batch_size": 1, "sequence_length": 128, "method": "full"}
    if impl is not None:
        training["optimizer_impl"] = impl
    payload = {
        "task": "training",
        "model": {"preset": "llama-3.2-1b"},
        "precision": {"weights": "bf16"},
        "training": training,
        "runtime": {"device": device},
    }
    return estimate(Workload.model_validate(payload))


def _step_workspace(budget: Budget) -> tuple[int, int, int]:
    step = next(p for p in budget.per_device.phases if p.name == "optimizer_step")
    fused = next(p for p in _budget(budget.device, "fused").per_device.phases if p.name == "optimizer_step")
    return step.low - fused.low, step.bytes - fused.bytes, step.high - fused.high


def _step_line(budget: Budget) -> str:
    return next(line for line in budget.assumptions if "zero_grad" in line)


@pytest.mark.parametrize(("device", "default"), [("cpu", "for_loop"), ("cuda", "foreach")])
def test_an_unstated_implementation_is_torchs_default_for_the_device(device: str, default: str) -> None:
    assert tr.default_optimizer_impl(device) == default
    assert _budget(device).per_device.total_bytes == _budget(device, default).per_device.total_bytes


def test_the_cpu_default_is_the_for_loop_and_the_budget_names_it() -> None:
    budget = _budget("cpu")
    line = _step_line(budget)
    assert "for-loop step" in line
    assert "training.optimizer_impl not given: torch's default for device cpu" in line
    assert "_default_to_fused_or_foreach" in line
    assert "(for_loop) temporary" in budget.per_device.component("workspace").note
    # a stated implementation is not a default: nothing to name
    assert "not given" not in _step_line(_budget("cpu", "for_loop"))


def test_the_cuda_default_is_foreach_and_the_budget_names_it() -> None:
    line = _step_line(_budget("cuda"))
    assert "foreach step allocates a parameter-sized buffer" in line
    assert "torch's default for device cuda" in line


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_an_unstated_implementation_ranges_over_fused_to_foreach(device: str) -> None:
    # bf16 states: foreach holds every parameter once more, the for-loop two copies of the largest tensor,
    # fused nothing (components/training.py optimizer_step_transient)
    low, expected, high = _step_workspace(_budget(device))
    default = PARAMS * 2 if device == "cuda" else 2 * VOCAB_MATRIX * 2
    assert (low, expected, high) == (0, default, PARAMS * 2)


@pytest.mark.parametrize("impl", ["foreach", "fused", "for_loop"])
def test_a_stated_implementation_stays_exact(impl: str) -> None:
    step = {"foreach": PARAMS * 2, "fused": 0, "for_loop": 2 * VOCAB_MATRIX * 2}[impl]
    for device in ("cpu", "cuda"):
        assert _step_workspace(_budget(device, impl)) == (step, step, step)
