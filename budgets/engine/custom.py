"""The custom task: the given components summed on one device (no phases, no parallel plan)."""

from __future__ import annotations

from .budget import COMPONENT_NAMES, ZERO, Budget, ComponentBudget, DeviceBudget, HostBudget, PhasePeak, Range
from .components import fragmentation as frag
from .components import host as host_mod
from .components import runtime as rt
from .schema import Workload


def custom_budget(w: Workload) -> Budget:
    """Every given component alive at once: the per-concurrent ones times the concurrency."""
    assert w.custom is not None
    per: dict[str, int] = {"weights": 0, "activations": 0, "kv_cache": 0, "workspace": 0}
    names: dict[str, list[str]] = {k: [] for k in per}
    for c in w.custom.components:
        mult = w.custom.concurrency if c.per_concurrent else 1
        per[c.category] += c.bytes * mult
        names[c.category].append(c.name + (f" ×{mult}" if c.per_concurrent else ""))
    device = w.runtime.device
    runtime_r, runtime_note = rt.cuda_context(device, w.runtime.cuda_version_tuple)
    tensors = sum(per.values())
    fr = frag.fragmentation(device, per["activations"] + per["kv_cache"], 0, w.runtime.expandable_segments, False)
    comps = []
    for name in COMPONENT_NAMES:
        if name in per:
            v = Range.exact(per[name])
            note = "given: " + ", ".join(names[name]) if names[name] else "none given"
        elif name == "runtime":
            v, note = runtime_r, runtime_note
        elif name == "fragmentation":
            v, note = fr, "caching allocator overhead on the given transient components"
        else:
            v, note = ZERO, "not applicable to a custom workload"
        comps.append(ComponentBudget(name, v.low, v.bytes, v.high, note))
    total = Range.exact(tensors) + runtime_r + fr
    pd = DeviceBudget(
        components=tuple(comps),
        total_bytes=total.bytes,
        total_low_bytes=total.low,
        total_high_bytes=total.high,
        peak_phase="run",
        phases=(PhasePeak("run", total.bytes, total.low, total.high),),
    )
    return Budget(
        workload=w.name,
        device=device,
        devices=1,
        per_device=pd,
        host=HostBudget(ram_bytes=host_mod.PROCESS_BASE_BYTES + per["weights"], disk_bytes=per["weights"]),
        assumptions=(
            "GB = 1e9 B, GiB = 2^30 B; every byte count is an integer number of bytes",
            f"custom task: components summed, per-concurrent ones × {w.custom.concurrency}",
        ),
        plan={"tensor": 1, "pipeline": 1, "data": 1, "zero_stage": 0},
    )
