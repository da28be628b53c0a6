"""The device a budget is for, as the catalog knows it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Device:
    """One accelerator: its memory as cudaMemGetInfo reports it (T, bytes), its name (vLLM's own defaults read it)
    and its compute capability (the architecture-dependent terms read it). All optional: a budget without a
    device reports what the workload needs."""

    memory_bytes: int | None = None
    name: str | None = None
    compute_capability: tuple[int, int] | None = None


NO_DEVICE = Device()
