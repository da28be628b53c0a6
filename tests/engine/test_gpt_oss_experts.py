"""gpt-oss's experts as transformers 5.24 runs them on the CPU (grouped_mm with per-row bias gathers and the clamped
sigmoid-gated GLU of `GptOssExperts._apply_gate`), against the accuracy benchmark's measured generate peaks: priced
as a plain grouped MLP they were −4.34 % (round 10) and −8.94 % (round 12; benchmarks/accuracy/HOLDOUT.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import accuracy
from benchmarks.accuracy.cases import TUNING_CASES
from budgets.engine import Workload, estimate

MEASURED = json.loads((Path(accuracy.__file__).parent / "results.json").read_text())["cases"]
# the tuning cases only: a hold-out round is compared once, by the benchmark, before anyone tunes on it
GENERATE = [c for c in TUNING_CASES if "gptoss-gen" in c["name"]]


# beyond 2 % today; strict, so fixing it fails until it is removed here
KNOWN_MISSES = {
    "r14-gptoss-gen-dynamic-bf16-eager-b1": (
        "+4.18 % (in range): one 333-token sequence, eager; the engine's prefill (experts) is 0.5 MB above the "
        "measured peak, not diagnosed (HOLDOUT.md, round 14)"
    )
}


def _param(case: dict):
    miss = KNOWN_MISSES.get(case["name"])
    marks = [pytest.mark.xfail(reason=miss, strict=True)] if miss else []
    return pytest.param(case, id=case["name"], marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in GENERATE])
def test_the_clamped_gate_and_bias_rows_are_what_the_prefill_peak_holds(case):
    measured = MEASURED[case["name"]]["measured_peak_bytes"]
    assert abs(estimate(Workload.model_validate(case)).per_device.total_bytes - measured) / measured < 0.02
