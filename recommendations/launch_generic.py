"""The launches that are vramplan's own runs of the budget, measured: the generic engine's synthetic model and a
custom workload's replay.

The generic engine names no serving program. Its budget is the general model (no library's bookkeeping, a cache of
the workload's layout, a plain share of the device), which is what vramplan's own synthetic workload runs: a
random-weight transformer built in plain PyTorch at the workload's shapes (``workers/runner/synthetic.py``), the
program an acceptance job runs when its order names none. So the command that reproduces a generic entry is that
run, under ``vramplan-measure``::

    vramplan-measure -- python -m workers.runner.synthetic acceptance_spec.json

with ``acceptance_spec.json`` (the workload, at one replica's share of the sessions) written beside it. Both halves
are checked against this package's own definitions, the release that runs them: ``vramplan-measure``'s parser and
checks (``workers.runner.cli.argv_problems``) and the synthetic spec check (``synthetic.load_plan``), which refuses
what it cannot build (quantized weights, a KV dtype other than the compute's, more than one device per process).

A custom workload names no program either, only the memory it holds; its command is the replay of that declaration
(``workers/runner/replay.py``: every component allocated, written and held at once on the device) under
``vramplan-measure``, with ``replay_spec.json`` beside it, checked the same way (``replay.load_plan``). It measures
that the declared components, the CUDA context and the allocator's rounding fit the device, which is what the custom
budget says; the program's own run is a registered program's acceptance job. Pure.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import replace
from importlib import metadata
from typing import Any

from budgets.engine import Workload
from workers.runner import cli, replay, synthetic

from .launch import Launch
from .launch_transformers import entry_plan
from .plans import Plan
from .training_launch.common import _checked

SPEC_FILE = "acceptance_spec.json"
PROGRAM = ("python", "-m", "workers.runner.synthetic")
REPLAY_FILE = "replay_spec.json"
REPLAY = ("python", "-m", "workers.runner.replay")


def _version() -> str:
    try:
        return metadata.version("vramplan")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "source tree"


def _spec(workload: Workload, sessions: int) -> dict[str, Any]:
    """The synthetic run's spec: the workload as described, as one replica of the plan runs it (its sessions, one
    device: the plan's parallelism, not the description's), on the GPU."""
    inference = workload.inference
    assert inference is not None
    one_device = workload.parallelism.model_copy(update={"tensor": 1, "pipeline": 1, "data": 1, "expert": 1})
    served = workload.model_copy(
        update={
            "inference": inference.model_copy(update={"concurrent_sessions": sessions}),
            "parallelism": one_device,
        }
    )
    return {"workload": served.model_dump(mode="json", exclude_unset=True), "device": "cuda"}


def _notes(
    workload: Workload, settings: Mapping[str, Any], plan: Plan, sessions: int, run: synthetic.Plan
) -> list[str]:
    inference = workload.inference
    assert inference is not None
    notes = [
        "the generic engine names no server: this is the budgeted run itself, vramplan's synthetic workload (random"
        f" weights, seed 0) of {sessions} × {inference.max_input_tokens} prompt tokens and"
        f" {inference.max_output_tokens} generated, measured through NVML, PyTorch's allocator and host RSS;"
        " to serve the model, choose engine vllm, sglang or transformers",
        f"needs vramplan {_version()} with its node extra on the GPU node (from a clone: pip install '.[node]')",
        "add --upload URL --order ID (an order upload token in $VRAMPLAN_UPLOAD_TOKEN) before -- to attach the"
        " measurement to an order",
    ]
    notes += [f"the synthetic run: {note}" for note in run.notes]
    if plan.replicas > 1:
        per = settings.get("devices_per_node")
        where = f", {per} on each node" if isinstance(per, int) and plan.replicas > per else ""
        notes.append(
            f"run {plan.replicas} such processes{where}, replica k on its own device (CUDA_VISIBLE_DEVICES=k), each"
            f" generating {sessions} of the {inference.concurrent_sessions} sessions"
        )
    return notes


def _launch(workload: Workload, settings: Mapping[str, Any], plan: Plan | None) -> Launch | str:
    inference = workload.inference
    if workload.task != "inference" or inference is None or inference.engine != "generic":
        return "not a generic-engine inference workload"
    chosen = entry_plan(settings, plan)
    if chosen is None:
        return "the entry names no plan"
    if chosen.devices_per_replica > 1:
        return (
            f"the synthetic run measures one device per process, and this plan spreads a copy over"
            f" {chosen.devices_per_replica} (tensor {chosen.tensor} × pipeline {chosen.pipeline}): choose engine vllm,"
            " sglang or transformers to launch it"
        )
    sessions = math.ceil(inference.concurrent_sessions / chosen.replicas)
    spec = _spec(workload, sessions)
    try:
        run = synthetic.load_plan(spec)
    except synthetic.SpecError as exc:
        return f"the synthetic run cannot build it: {exc}"
    env = ("env", "CUDA_VISIBLE_DEVICES=0") if chosen.replicas > 1 else ()
    measured = ("vramplan-measure", "--", *PROGRAM, SPEC_FILE)
    files = ((SPEC_FILE, json.dumps(spec, indent=2) + "\n"),)
    launch = _checked(
        "generic",
        None,
        (*env, *measured),
        _notes(workload, settings, chosen, sessions, run),
        cli.argv_problems(measured[1:]),
        checked_against=f"vramplan-measure {_version()}",
        files=files,
    )
    return replace(launch, servers=chosen.replicas)


def generic_launch(workload: Workload, settings: Mapping[str, Any], plan: Plan | None = None) -> Launch | None:
    """The measured synthetic run of a generic-engine entry's ``plan`` (else the plan ``settings`` name); None for
    another engine or task, no plan, or a plan or workload the synthetic run cannot build (``no_generic_launch``
    says why)."""
    found = _launch(workload, settings, plan)
    return found if isinstance(found, Launch) else None


def no_generic_launch(workload: Workload, settings: Mapping[str, Any], plan: Plan | None = None) -> str | None:
    """Why ``generic_launch`` gives no command; None when it gives one."""
    found = _launch(workload, settings, plan)
    return found if isinstance(found, str) else None


def _replay_notes(workload: Workload, run: replay.ReplayPlan) -> list[str]:
    assert workload.custom is not None
    copies = len(run.allocations)
    return [
        f"a custom workload names no program: this is the replay of its declaration, {len(workload.custom.components)}"
        f" components ({copies} allocations with the per-concurrent copies for concurrency"
        f" {workload.custom.concurrency}, {run.total_bytes:,} B) allocated, written and held at once on the device,"
        " measured through NVML, PyTorch's allocator and host RSS",
        "it shows the declared memory fits this device; to measure the program itself, register it"
        " (/api/v1/programs/) and order its acceptance job",
        f"needs vramplan {_version()} with its node extra on the GPU node (from a clone: pip install '.[node]')",
        "add --upload URL --order ID (an order upload token in $VRAMPLAN_UPLOAD_TOKEN) before -- to attach the"
        " measurement to an order",
    ]


def _custom(workload: Workload) -> Launch | str:
    if workload.task != "custom" or workload.custom is None:
        return "not a custom workload"
    spec = {"workload": workload.model_dump(mode="json", exclude_unset=True), "device": workload.runtime.device}
    try:
        run = replay.load_plan(spec)
    except synthetic.SpecError as exc:
        return f"the replay cannot run it: {exc}"
    measured = ("vramplan-measure", "--", *REPLAY, REPLAY_FILE)
    return _checked(
        "custom",
        None,
        measured,
        _replay_notes(workload, run),
        cli.argv_problems(measured[1:]),
        checked_against=f"vramplan-measure {_version()}",
        files=((REPLAY_FILE, json.dumps(spec, indent=2) + "\n"),),
    )


def custom_launch(workload: Workload) -> Launch | None:
    """The measured replay of a custom workload's declared components; None for another task or a declaration the
    replay refuses (``no_custom_launch`` says why)."""
    found = _custom(workload)
    return found if isinstance(found, Launch) else None


def no_custom_launch(workload: Workload) -> str | None:
    """Why ``custom_launch`` gives no command; None when it gives one."""
    found = _custom(workload)
    return found if isinstance(found, str) else None
