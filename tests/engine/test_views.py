"""The budget names the three views a measurement records, in the order the views nest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from budgets.engine import Workload, estimate
from measurements.acceptance import view_ratios

WORKLOADS = sorted((Path(__file__).resolve().parents[2] / "fixtures" / "workloads").glob("*.json"))


@pytest.mark.parametrize("path", WORKLOADS, ids=lambda p: p.stem)
def test_allocated_within_reserved_within_device_used(path: Path) -> None:
    budget = estimate(Workload.model_validate(json.loads(path.read_text()))).as_contract()
    per_device = budget["per_device"]
    views = per_device["views"]
    if budget["device"] == "cpu":
        assert set(views) == {"framework_allocated"}
        assert views["framework_allocated"]["bytes"] == per_device["total"]["bytes"]
        return
    assert views["device_used"] == {k: per_device["total"][k] for k in ("low", "bytes", "high")}
    for bound in ("low", "bytes", "high"):
        assert 0 <= views["framework_allocated"][bound] <= views["framework_reserved"][bound]
        assert views["framework_reserved"][bound] <= views["device_used"][bound]
    # reserved leaves out exactly the CUDA context; allocated also the allocator's slack
    components = per_device["components"]
    assert views["device_used"]["bytes"] - views["framework_reserved"]["bytes"] == components["runtime"]["bytes"]
    assert (
        views["framework_reserved"]["bytes"] - views["framework_allocated"]["bytes"]
        == components["fragmentation"]["bytes"]
    )


def test_measurements_compare_like_with_like() -> None:
    path = next(p for p in WORKLOADS if p.stem == "vllm-llama-3.1-8b-chat")
    budget = estimate(Workload.model_validate(json.loads(path.read_text())))
    views = budget.as_contract()["per_device"]["views"]
    ratios = view_ratios({"framework_reserved": views["framework_reserved"]["bytes"]}, budget)
    assert ratios["framework_reserved"]["ratio"] == 1.0
    assert ratios["framework_reserved"]["basis"] == "per_device.views.framework_reserved"
