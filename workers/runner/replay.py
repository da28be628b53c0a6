"""The replay of a custom workload: its declared components allocated on the device at once, held, measured.

    python -m workers.runner.replay SPEC_JSON_PATH

SPEC_JSON_PATH holds ``{"workload": <a v1 workload of task custom>, "device": "cpu" | "cuda", "hold_seconds": 1.0}``
(``device`` defaults to the workload's ``runtime.device``).

A custom workload names no model, only what it holds (``custom.components``: a name, a category, bytes, and whether
each concurrent job has its own copy). The budget of it is those components all alive at once, on a CUDA context,
through PyTorch's caching allocator (``budgets/engine/custom.py``). The replay is that run: each component, and each
concurrent copy of a per-concurrent one, is one ``torch.empty`` of its bytes on the device, written end to end
(``fill_``) so every page is resident, in the order given; then all of them are held for ``hold_seconds`` while the
parent samples the device (NVML), and released. What it proves is that the declared memory, the context and the
allocator's rounding fit on this device beside whatever else it holds; what it cannot prove is that the declaration
is the program's: register the program itself (``/api/v1/programs/``) and order its acceptance job for that.

The child speaks the runner protocol (``workers.runner.report``): progress per component, the ``cuda_init`` and
``measured_end`` checkpoints, one ``result`` message with the allocator's counters (``framework``), ``timing``,
``conditions`` (the components as allocated) and ``versions``. Exit status: 0 held · 2 the spec cannot be replayed
(one ``error:`` line naming the field) · 3 out of memory (a result with ``"oom": true`` naming the component).
torch is imported inside ``execute`` only.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from budgets.engine import Workload

from .report import checkpoint
from .synthetic import (
    EXIT_OK,
    EXIT_OOM,
    MEASURED_END_SETTLE_S,
    Progress,
    SpecError,
    WorkloadSpec,
    _is_oom,
    default_tracker,
    json_safe,
    read_spec,
    spec_main,
    versions,
)

PHASE = "allocate"
#: The most allocations one replay makes: a component per concurrent copy, bounded so a spec cannot ask for millions.
MAX_ALLOCATIONS = 10_000


class ReplaySpec(WorkloadSpec):
    """The spec file's content."""

    device: Literal["cpu", "cuda"] | None = Field(None, description="default: the workload's runtime.device")
    hold_seconds: float = Field(1.0, ge=0.0, le=3600.0, description="how long every component is held at once")


@dataclass(frozen=True, slots=True)
class Allocation:
    """One tensor of the replay: a component, or one concurrent copy of a per-concurrent one."""

    name: str
    category: str
    bytes: int
    copy: int  # 0-based; copies of a per-concurrent component count up to the concurrency


@dataclass(frozen=True, slots=True)
class ReplayPlan:
    workload: Workload
    device: str
    hold_seconds: float
    allocations: tuple[Allocation, ...]

    @property
    def total_bytes(self) -> int:
        return sum(a.bytes for a in self.allocations)


def load_plan(raw: Any) -> ReplayPlan:
    """Validate the spec and its custom workload; the allocations the replay makes, in order."""
    spec, workload = read_spec(raw, ReplaySpec)
    if workload.task != "custom" or workload.custom is None:
        raise SpecError(
            f"task {workload.task!r}: the replay runs a custom workload's components; a model's workload runs as"
            " python -m workers.runner.synthetic"
        )
    custom = workload.custom
    allocations = [
        Allocation(c.name, c.category, c.bytes, copy)
        for c in custom.components
        for copy in range(custom.concurrency if c.per_concurrent else 1)
        if c.bytes > 0
    ]
    if len(allocations) > MAX_ALLOCATIONS:
        raise SpecError(
            f"custom.concurrency {custom.concurrency}: the replay would make {len(allocations):,} allocations, more"
            f" than {MAX_ALLOCATIONS:,}; replay a smaller concurrency or give each copy's bytes as one component"
        )
    return ReplayPlan(workload, spec.device or workload.runtime.device, spec.hold_seconds, tuple(allocations))


def _allocate(plan: ReplayPlan, device: Any, held: list[Any], progress: Progress) -> None:
    import torch

    for index, allocation in enumerate(plan.allocations):
        detail = f"{allocation.name} (copy {allocation.copy + 1})" if allocation.copy else allocation.name
        progress(PHASE, 100.0 * index / len(plan.allocations), detail)
        tensor = torch.empty(allocation.bytes, dtype=torch.uint8, device=device)
        tensor.fill_(index % 255 + 1)  # every page written: resident, not only reserved
        held.append(tensor)
    progress(PHASE, 100.0, "every component held")


def conditions(plan: ReplayPlan) -> dict[str, Any]:
    custom = plan.workload.custom
    assert custom is not None
    return {
        "workload": "replay",
        "name": plan.workload.name,
        "task": "custom",
        "device": plan.device,
        "workload_device": plan.workload.runtime.device,
        "concurrency": custom.concurrency,
        "components": [
            {"name": a.name, "category": a.category, "bytes": a.bytes, "copy": a.copy} for a in plan.allocations
        ],
        "declared_bytes": plan.total_bytes,
        "hold_seconds": plan.hold_seconds,
        "notes": [
            "each component is one uint8 tensor of its bytes, written end to end, all held at once: the declared"
            " memory on this device, not the program that declared it"
        ],
    }


def execute(plan: ReplayPlan, tracker_factory: Any = None) -> tuple[dict[str, Any], int]:
    """Allocate, hold and release the plan's components; the result message and the exit status (0, or 3)."""
    try:
        import torch
    except ImportError as exc:
        raise SpecError(
            f"PyTorch is not installed on this node ({exc}): install the node extra, `pip install -e '.[node]'`"
        ) from None
    if plan.device == "cuda" and not torch.cuda.is_available():
        raise SpecError(f"device 'cuda': torch {torch.__version__} sees no CUDA device")
    tracker = (tracker_factory or default_tracker)(plan.device)
    tracker.start()
    if plan.device == "cuda":
        torch.cuda.init()
        torch.cuda.synchronize()
        device = torch.device("cuda", torch.cuda.current_device())
        checkpoint("cuda_init")
    else:
        device = torch.device("cpu")
    progress = Progress()
    held: list[Any] = []
    oom: str | None = None
    started = time.monotonic()
    tracker.begin_window()
    tracker.begin_step()
    try:
        _allocate(plan, device, held, progress)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        allocated_s = time.monotonic() - started
        time.sleep(plan.hold_seconds)
        tracker.end_step()
        tracker.end_window()
    except BaseException as exc:
        if not _is_oom(exc):
            tracker.stop()
            raise
        oom = str(exc).strip()[:2000]
        allocated_s = time.monotonic() - started
        del exc
    held.clear()
    gc.collect()
    tracker.stop()
    if oom is None and device.type == "cuda":
        torch.cuda.synchronize(device)
    checkpoint("measured_end")
    time.sleep(MEASURED_END_SETTLE_S)
    result: dict[str, Any] = {"type": "result", "oom": oom is not None}
    if oom is not None:
        result.update(oom_message=oom, phase=PHASE, oom_detail=progress.detail)
    result.update(
        framework=tracker.framework(oom=oom is not None),
        timing={"allocate_seconds": round(allocated_s, 3), "hold_seconds": plan.hold_seconds},
        quality=None,
        quality_reason="a replay of declared sizes computes nothing to compare",
        conditions=conditions(plan),
        versions=versions(device),
    )
    return json_safe(result), (EXIT_OOM if oom is not None else EXIT_OK)


def main(argv: list[str] | None = None) -> int:
    return spec_main(argv, "workers.runner.replay", load_plan, execute)


if __name__ == "__main__":
    raise SystemExit(main())
