"""The replay of a custom workload (``workers.runner.replay``): its declared components held at once, measured.

The expected bytes are the declaration's own arithmetic (each component, per-concurrent ones once per concurrent
copy), not the replay's code: the CPU run's exact tensor peak must equal them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from workers.runner import replay
from workers.runner.execute import RunOptions, run_measured
from workers.runner.synthetic import EXIT_SPEC_ERROR, SpecError

TABLES, FRAME, SCRATCH, CONCURRENCY = 6_000_000, 1_500_000, 700_000, 3
DECLARED = TABLES + CONCURRENCY * FRAME + SCRATCH


def _spec(**changes: Any) -> dict[str, Any]:
    workload = {
        "name": "renderer",
        "task": "custom",
        "runtime": {"device": "cpu"},
        "custom": {
            "components": [
                {"name": "tables", "category": "weights", "bytes": TABLES},
                {"name": "frame", "category": "activations", "bytes": FRAME, "per_concurrent": True},
                {"name": "scratch", "category": "workspace", "bytes": SCRATCH},
                {"name": "nothing", "category": "workspace", "bytes": 0},
            ],
            "concurrency": CONCURRENCY,
        },
    }
    return {"workload": workload, "hold_seconds": 0.0, **changes}


def test_each_component_and_each_concurrent_copy_is_one_allocation_in_order() -> None:
    plan = replay.load_plan(_spec())
    assert [(a.name, a.copy) for a in plan.allocations] == [
        ("tables", 0), ("frame", 0), ("frame", 1), ("frame", 2), ("scratch", 0)
    ]  # fmt: skip
    assert plan.total_bytes == DECLARED and plan.device == "cpu"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"workload": {"task": "inference", "model": {"preset": "llama-3.1-8b"}}}, "task 'inference'"),
        ({**_spec(), "quality": True}, "unknown key"),
        (_spec(hold_seconds=-1), "hold_seconds"),
        ({"workload": {"task": "custom", "custom": {"components": []}}}, "workload.custom.components"),
    ],
)
def test_what_the_replay_cannot_run_is_refused_naming_the_field(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        replay.load_plan(spec)


def test_a_concurrency_beyond_the_allocation_bound_is_refused() -> None:
    spec = _spec()
    spec["workload"]["custom"]["concurrency"] = replay.MAX_ALLOCATIONS + 1
    with pytest.raises(SpecError, match="allocations"):
        replay.load_plan(spec)


def test_the_cpu_replay_holds_exactly_the_declared_bytes_at_once() -> None:
    pytest.importorskip("torch")
    result, status = replay.execute(replay.load_plan(_spec()))
    assert status == replay.EXIT_OK and result["oom"] is False
    assert result["framework"]["allocated_bytes_peak"] == DECLARED
    assert result["conditions"]["declared_bytes"] == DECLARED
    assert len(result["conditions"]["components"]) == 5


@pytest.mark.slow
def test_vramplan_measure_runs_the_replay_in_a_child_and_reads_its_peak(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    spec = tmp_path / "replay_spec.json"
    spec.write_text(json.dumps(_spec(hold_seconds=0.2)))
    argv = [sys.executable, "-m", "workers.runner.replay", str(spec)]
    document = run_measured(RunOptions(argv=argv, cwd=str(tmp_path), time_limit_s=120))
    assert document["outcome"] == "succeeded", document["error"]
    assert document["peaks"]["framework_allocated_bytes"] == DECLARED
    assert document["peaks"]["host_rss_bytes"] > DECLARED


def test_a_spec_file_that_is_not_json_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "spec.json"
    path.write_text("{not json")
    assert replay.main([str(path)]) == EXIT_SPEC_ERROR
    assert "cannot read the spec" in capsys.readouterr().err
