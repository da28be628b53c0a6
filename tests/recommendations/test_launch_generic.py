"""The generic engine's launch (``recommendations.launch_generic``): a generic workload's runnable entries carry
``vramplan-measure -- python -m workers.runner.synthetic acceptance_spec.json``, the budgeted run itself, checked
against vramplan-measure's own parser and the synthetic spec check; or the reason the synthetic run cannot build
it."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.recommend_speed import fixture_views
from budgets.engine import Workload, estimate
from recommendations.launch import launch_for, no_serving_launch
from recommendations.launch_generic import (
    REPLAY_FILE,
    SPEC_FILE,
    custom_launch,
    generic_launch,
    no_custom_launch,
    no_generic_launch,
)
from recommendations.plans import Plan
from recommendations.recommend import recommend
from recommendations.verdicts import Verdict
from tests.measurements.helpers import TINY_CPU_WORKLOAD
from workers.runner import cli, replay, synthetic

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "fixtures" / "workloads" / "generic-mistral-7b-contiguous.json"


def _workload(model: dict[str, Any] | None = None, **sections: dict[str, Any]) -> Workload:
    data = json.loads(EXAMPLE.read_text())
    for name, fields in sections.items():
        data[name] = {**data.get(name, {}), **fields}
    return Workload.model_validate({**data, "model": model or data["model"]})


def _spec(launch: Any) -> dict[str, Any]:
    files = dict(launch.files)
    assert set(files) == {SPEC_FILE}
    return json.loads(files[SPEC_FILE])


def test_every_fitting_entry_of_the_example_carries_the_measured_synthetic_run() -> None:
    """Over the catalog: each ``fits`` entry carries a command vramplan-measure accepts, whose spec the synthetic run
    builds, and whose workload, read back, budgets what the entry budgeted for one replica's sessions. The synthetic
    run measures one device per process, so a plan spreading a copy over two is not offered: where only such a plan
    would hold the model (16 GB V100s), the entry says so and names the engines that launch it."""
    workload = _workload()
    entries = recommend(workload, fixture_views())
    fitting = [entry for entry in entries if entry.verdict == Verdict.FITS]
    inference = workload.inference
    assert inference is not None
    assert all(entry.plan is not None and entry.plan.devices_per_replica == 1 for entry in fitting)
    left_out = [reason for entry in entries for reason in entry.reasons if reason.rule == "engine"]
    assert left_out and all("one device per process" in reason.message for reason in left_out)
    assert all("vllm, sglang or transformers" in reason.action for reason in left_out)
    for entry in fitting:
        assert entry.plan is not None and entry.launch is not None, entry.configuration["slug"]
        launch = entry.launch
        measured = launch.argv[launch.argv.index("vramplan-measure") :]
        assert measured == ("vramplan-measure", "--", "python", "-m", "workers.runner.synthetic", SPEC_FILE)
        assert cli.argv_problems(measured[1:]) == []
        spec = _spec(launch)
        synthetic.load_plan(spec)  # raises SpecError if the run could not build it
        assert launch.servers == entry.plan.replicas
        read_back = Workload.model_validate(spec["workload"])
        assert read_back.inference is not None
        sessions = math.ceil(inference.concurrent_sessions / entry.plan.replicas)
        assert read_back.inference.concurrent_sessions == sessions
        one_replica = workload.model_copy(
            update={"inference": inference.model_copy(update={"concurrent_sessions": sessions})}
        )
        assert estimate(read_back).per_device.total_bytes == estimate(one_replica).per_device.total_bytes
        assert launch.checked_against.startswith("vramplan-measure ")


def test_replicas_run_one_process_per_device_with_their_share() -> None:
    workload = _workload()
    launch = generic_launch(workload, {}, Plan(1, 1, 3))
    assert launch is not None and launch.servers == 3
    assert launch.argv[:2] == ("env", "CUDA_VISIBLE_DEVICES=0")
    assert _spec(launch)["workload"]["inference"]["concurrent_sessions"] == 3  # ceil(8 / 3)
    assert any("run 3 such processes" in note for note in launch.notes)


@pytest.mark.parametrize(
    ("sections", "plan", "named"),
    [
        ({}, Plan(2, 1, 1), "one device per process"),
        ({"precision": {"weights": "int4"}}, Plan(1, 1, 1), "precision.weights"),
        ({"precision": {"weights": "bf16", "kv_cache": "fp8"}}, Plan(1, 1, 1), "precision.kv_cache"),
    ],
    ids=["tensor-parallel", "int4-weights", "fp8-kv"],
)
def test_what_the_synthetic_run_cannot_build_gets_a_reason(sections: dict, plan: Plan, named: str) -> None:
    workload = _workload(**sections)
    assert generic_launch(workload, {}, plan) is None
    reason = no_generic_launch(workload, {}, plan)
    assert reason is not None and named in reason
    assert no_serving_launch(workload, {}, plan) == reason


def test_the_serving_registry_names_the_generic_launch() -> None:
    workload = _workload()
    assert launch_for(workload, {}, Plan(1, 1, 1)) == generic_launch(workload, {}, Plan(1, 1, 1))
    assert no_generic_launch(workload, {}, Plan(1, 1, 1)) is None


def test_vramplan_measure_refuses_what_its_parser_refuses() -> None:
    assert cli.argv_problems(["--", "python", "x.py"]) == []
    assert cli.argv_problems([]) == ["give the command to measure after --, e.g. vramplan-measure -- python3 job.py"]
    assert cli.argv_problems(["--interval", "0", "--", "python"]) == [
        "--interval must be between 0.0005 and 10 seconds"
    ]
    assert cli.argv_problems(["--upload", "https://x", "--", "python"]) == ["--upload and --order go together"]


@pytest.mark.slow
def test_the_launch_runs_on_cpu_under_vramplan_measure(tmp_path: Path) -> None:
    """The command as generated, for a tiny architecture with its spec's device set to the CPU (no GPU here):
    vramplan-measure runs the synthetic workload in a child and prints one measurement document."""
    pytest.importorskip("torch")
    workload = _workload(
        model=TINY_CPU_WORKLOAD["model"],
        precision={"weights": "fp32"},
        inference={"max_input_tokens": 16, "max_output_tokens": 4, "concurrent_sessions": 2},
    )
    launch = generic_launch(workload, {}, Plan(1, 1, 1))
    assert launch is not None
    spec = {**_spec(launch), "device": "cpu"}
    (tmp_path / SPEC_FILE).write_text(json.dumps(spec))
    argv = [sys.executable, "-m", "workers.runner.cli", "--quiet", *launch.argv[1:]]
    argv[argv.index("python")] = sys.executable
    run = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    document = json.loads(run.stdout)
    assert document["outcome"] == "succeeded", document.get("error")


CUSTOM = ROOT / "fixtures" / "workloads" / "custom-rendering.json"


def test_every_fitting_custom_entry_carries_the_measured_replay_of_its_declaration() -> None:
    """The custom example over the catalog: every runnable entry carries ``vramplan-measure -- python -m
    workers.runner.replay replay_spec.json``, which vramplan-measure's parser accepts and whose spec, read back by the
    replay, is the workload itself and allocates the declaration's bytes (its own sum, per-concurrent ones × the
    concurrency)."""
    workload = Workload.model_validate(json.loads(CUSTOM.read_text()))
    assert workload.custom is not None
    copies = workload.custom.concurrency
    declared = sum(c.bytes * (copies if c.per_concurrent else 1) for c in workload.custom.components)
    runnable = [e for e in recommend(workload, fixture_views()) if e.verdict in (Verdict.FITS, Verdict.TIGHT)]
    assert runnable
    for entry in runnable:
        launch = entry.launch
        assert launch is not None and launch.engine == "custom", entry.configuration["slug"]
        assert launch.argv == ("vramplan-measure", "--", "python", "-m", "workers.runner.replay", REPLAY_FILE)
        assert cli.argv_problems(launch.argv[1:]) == []
        spec = json.loads(dict(launch.files)[REPLAY_FILE])
        run = replay.load_plan(spec)
        assert run.workload == workload and run.total_bytes == declared
        assert launch_for(workload, entry.suggested_settings, entry.plan) == launch
    assert no_custom_launch(workload) is None


def test_a_declaration_the_replay_cannot_make_has_no_launch_and_says_why() -> None:
    data = json.loads(CUSTOM.read_text())
    data["custom"]["concurrency"] = replay.MAX_ALLOCATIONS
    workload = Workload.model_validate(data)
    assert custom_launch(workload) is None
    reason = no_custom_launch(workload)
    assert reason is not None and "allocations" in reason
