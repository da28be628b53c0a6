"""The budget (the answer): frozen dataclasses and named tuples, the WORKLOAD.md contract dict, its typed reader
and a text table."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

COMPONENT_NAMES: tuple[str, ...] = (
    "weights",
    "activations",
    "kv_cache",
    "gradients",
    "optimizer_state",
    "workspace",
    "runtime",
    "fragmentation",
)

GB = 10**9  # bytes
GIB = 2**30  # bytes


class Range(NamedTuple):
    """A byte count with its uncertainty: low ≤ bytes ≤ high, all ≥ 0 (bytes).

    A named tuple rather than a frozen dataclass: a budget builds a few dozen of them, and a tuple is built
    about three times faster (the plan search of a recommendation budgets hundreds of plans). ``+`` adds
    them (not tuple concatenation). The methods build through `_new` (`tuple.__new__`), half the time of the
    named tuple's keyword-capable constructor (`python -m benchmarks.speed.estimate_speed`)."""

    low: int  # bytes
    bytes: int  # bytes, expected
    high: int  # bytes

    @staticmethod
    def exact(value: float) -> Range:
        v = int(value)
        if v < 0:
            v = 0
        return _new(Range, (v, v, v))

    @staticmethod
    def spread(value: float, low_factor: float, high_factor: float) -> Range:
        v = max(int(value), 0)
        return _new(Range, (min(int(v * low_factor), v), v, max(int(v * high_factor), v)))

    def __add__(self, other: Range) -> Range:  # type: ignore[override]
        return _new(Range, (self[0] + other[0], self[1] + other[1], self[2] + other[2]))

    def scale(self, factor: float) -> Range:
        return _new(Range, (int(self.low * factor), int(self.bytes * factor), int(self.high * factor)))


_new = tuple.__new__
ZERO = Range(0, 0, 0)


class ComponentBudget(NamedTuple):
    """One component of a device budget. A named tuple, like `Range`: eight are built per budget and a tuple is
    built about twice as fast as a frozen dataclass (`python -m benchmarks.speed.estimate_speed`)."""

    name: str
    low: int  # bytes
    bytes: int  # bytes, expected (the component's own peak over phases)
    high: int  # bytes
    note: str


class PhasePeak(NamedTuple):
    """One phase's components summed (a named tuple, as `ComponentBudget`)."""

    name: str  # e.g. "prefill", "decode", "forward", "backward", "optimizer_step", "load"
    bytes: int  # expected bytes live at this phase's peak (tensors + fixed overheads, before fragmentation)
    low: int  # bytes
    high: int  # bytes


@dataclass(frozen=True, slots=True)
class DeviceBudget:
    components: tuple[ComponentBudget, ...]  # in COMPONENT_NAMES order
    total_bytes: int  # expected peak, bytes
    total_low_bytes: int  # bytes
    total_high_bytes: int  # bytes
    peak_phase: str  # the phase that sets the peak
    phases: tuple[PhasePeak, ...]

    def component(self, name: str) -> ComponentBudget:
        for c in self.components:
            if c.name == name:
                return c
        raise KeyError(name)


@dataclass(frozen=True, slots=True)
class HostBudget:
    ram_bytes: int  # host RAM needed to load and feed the devices, bytes (per node)
    disk_bytes: int  # disk for model files and conversions, bytes


@dataclass(frozen=True, slots=True)
class ServingPlan:
    """vLLM-style KV pool arithmetic (absent for other engines)."""

    kv_bytes_per_token: int  # bytes per token, per device, all layers
    kv_bytes_needed: int  # bytes the workload's longest request × concurrency needs, per device
    kv_pool_bytes: int | None  # bytes the engine would allocate for KV; None without device memory
    max_concurrent_sessions_at_max_request: int | None = None  # sessions of the longest request the pool holds
    max_request_tokens_at_concurrency: int | None = None  # longest request (tokens) at the asked concurrency
    device_memory_bytes: int | None = None  # device memory T the pool was computed for, bytes
    kv_pool_tokens: int | None = None  # tokens the pool's whole blocks hold ("GPU KV cache size")
    max_concurrency: float | None = None  # requests of max_model_len the pool holds, as vLLM prints it
    starts: bool | None = None  # whether vLLM starts; None without device memory
    reason: str | None = None  # why it does not start
    shortfall_bytes: int | None = None  # more KV memory (within u·T) it needs to start, bytes
    max_model_len: int | None = None  # tokens
    max_num_seqs: int | None = None  # the scheduler's sequence budget used for profiling
    max_num_batched_tokens: int | None = None  # the profiling batch, tokens
    profile: str | None = None  # the vLLM release profile used ("0.11")
    available_kv_bytes: int | None = None  # u·T − non-KV before clamping at 0 (negative when it fails), bytes
    # what the workload needs of vLLM's share: the non-KV part (weights, profile-run peak, non-torch, graphs)
    # + the KV its sessions fill; the figure an acceptance job's `vllm_need` view measures, bytes
    need_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class Budget:
    workload: str
    device: str  # "cuda" | "cpu"
    devices: int  # tensor × pipeline × data
    per_device: DeviceBudget
    host: HostBudget
    assumptions: tuple[str, ...]
    plan: dict[str, Any]
    serving: ServingPlan | None = None
    calibration: None = None

    def as_contract(self) -> dict[str, Any]:
        """The Budget JSON of WORKLOAD.md, with a few added keys (peak_phase, phases, plan, serving)."""
        pd = self.per_device
        out: dict[str, Any] = {
            "workload": self.workload,
            "device": self.device,
            "devices": self.devices,
            "per_device": {
                "components": {
                    c.name: {"bytes": c.bytes, "low": c.low, "high": c.high, "note": c.note} for c in pd.components
                },
                "total": {"bytes": pd.total_bytes, "low": pd.total_low_bytes, "high": pd.total_high_bytes},
                "peak_phase": pd.peak_phase,
                "phases": {p.name: p.bytes for p in pd.phases},
                "views": budget_views(self.device, pd),
            },
            "host": {"ram_bytes": self.host.ram_bytes, "disk_bytes": self.host.disk_bytes},
            "assumptions": list(self.assumptions),
            "calibration": self.calibration,
            "plan": dict(self.plan),
        }
        if self.serving is not None:
            s = self.serving
            out["serving"] = {
                "kv_bytes_per_token": s.kv_bytes_per_token,
                "kv_bytes_needed": s.kv_bytes_needed,
                "kv_pool_bytes": s.kv_pool_bytes,
                "max_concurrent_sessions_at_max_request": s.max_concurrent_sessions_at_max_request,
                "max_request_tokens_at_concurrency": s.max_request_tokens_at_concurrency,
                "device_memory_bytes": s.device_memory_bytes,
                "kv_pool_tokens": s.kv_pool_tokens,
                "max_concurrency": s.max_concurrency,
                "starts": s.starts,
                "reason": s.reason,
                "shortfall_bytes": s.shortfall_bytes,
                "max_model_len": s.max_model_len,
                "max_num_seqs": s.max_num_seqs,
                "max_num_batched_tokens": s.max_num_batched_tokens,
                "profile": s.profile,
                "need_bytes": s.need_bytes,
            }
        return out


def budget_views(device: str, pd: DeviceBudget) -> dict[str, dict[str, int]]:
    """What each measurement view would read at the peak (WORKLOAD.md, budget additions).

    ``device_used`` (NVML) is the total on ``cuda``; ``framework_reserved`` (``max_memory_reserved``)
    leaves out the CUDA context (``runtime``), which is outside PyTorch's allocator;
    ``framework_allocated`` (``max_memory_allocated``) also leaves out the allocator's slack
    (``fragmentation``: reserved but not allocated). Library workspaces stay in all three: cuBLAS's are
    allocator blocks; NCCL's buffers are not, so on multi-GPU plans the framework views are a little
    high. On ``cpu`` the total is the framework's tensor peak, the one view there is.
    """
    total = (pd.total_low_bytes, pd.total_bytes, pd.total_high_bytes)
    allocated_view = {"low": total[0], "bytes": total[1], "high": total[2]}
    if device == "cpu":
        return {"framework_allocated": allocated_view}
    runtime = pd.component("runtime").bytes
    slack = pd.component("fragmentation").bytes

    def less(amount: int) -> dict[str, int]:
        low, expected, high = (max(0, value - amount) for value in total)
        return {"low": low, "bytes": expected, "high": high}

    return {
        "framework_allocated": less(runtime + slack),
        "framework_reserved": less(runtime),
        "device_used": dict(allocated_view),
    }


def _fmt(n: int) -> tuple[str, str]:
    return f"{n / GB:,.3f}", f"{n / GIB:,.3f}"


def render_table(budget: Budget) -> str:
    """A fixed-width table for the command line: every component in GB (1e9 B) and GiB (2^30 B)."""
    pd = budget.per_device
    lines = [
        f"workload {budget.workload!r}  device {budget.device}  devices {budget.devices}  peak phase {pd.peak_phase}",
        f"{'component':<16}{'GB':>12}{'GiB':>12}{'low GiB':>12}{'high GiB':>12}  note",
    ]
    for c in pd.components:
        gb, gib = _fmt(c.bytes)
        lines.append(f"{c.name:<16}{gb:>12}{gib:>12}{c.low / GIB:>12,.3f}{c.high / GIB:>12,.3f}  {c.note}")
    gb, gib = _fmt(pd.total_bytes)
    lines.append(
        f"{'total (peak)':<16}{gb:>12}{gib:>12}{pd.total_low_bytes / GIB:>12,.3f}{pd.total_high_bytes / GIB:>12,.3f}"
    )
    lines.append("phases: " + ", ".join(f"{p.name} {p.bytes / GIB:,.3f} GiB" for p in pd.phases))
    ram_gb, ram_gib = _fmt(budget.host.ram_bytes)
    disk_gb, disk_gib = _fmt(budget.host.disk_bytes)
    lines.append(f"host RAM {ram_gb} GB ({ram_gib} GiB), disk {disk_gb} GB ({disk_gib} GiB)")
    if budget.serving is not None:
        s = budget.serving
        lines.append(
            f"serving: KV {s.kv_bytes_per_token:,} B/token/device, needed {s.kv_bytes_needed / GIB:,.3f} GiB"
            + (
                f", pool {s.kv_pool_bytes / GIB:,.3f} GiB, max sessions at longest request "
                f"{s.max_concurrent_sessions_at_max_request}, longest request at concurrency "
                f"{s.max_request_tokens_at_concurrency} tokens"
                if s.kv_pool_bytes is not None
                else ""
            )
        )
        if s.starts is False:
            lines.append(f"serving: {s.reason}")
    lines.append("assumptions:")
    lines.extend(f"  - {a}" for a in budget.assumptions)
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# Reading a stored budget back (the contract JSON a workload, an order or a measurement keeps)


class BudgetReadError(ValueError):
    """A stored budget that does not read as :class:`Budget`; the message names the field (``per_device.total``)."""


_MISSING = object()


def _field(data: Mapping[str, Any], path: str, name: str, kinds: tuple[type, ...], *, optional: bool = False) -> Any:
    value = data.get(name, _MISSING)
    where = f"{path}.{name}" if path else name
    if value is _MISSING or value is None:
        if optional:
            return None
        raise BudgetReadError(f"{where}: {'missing' if value is _MISSING else 'null'}")
    if isinstance(value, bool) and bool not in kinds:
        raise BudgetReadError(f"{where}: expected {_names(kinds)}, got {value!r}")
    if not isinstance(value, kinds):
        raise BudgetReadError(f"{where}: expected {_names(kinds)}, got {type(value).__name__} {value!r}"[:160])
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        raise BudgetReadError(f"{where}: expected a number ≥ 0, got {value}")
    return value


def _names(kinds: tuple[type, ...]) -> str:
    words = {int: "a whole number", float: "a number", str: "a string", dict: "an object", list: "a list",
             bool: "true or false"}  # fmt: skip
    return " or ".join(words.get(kind, kind.__name__) for kind in kinds)


def _object(data: Mapping[str, Any], path: str, name: str) -> Mapping[str, Any]:
    return _field(data, path, name, (dict,))  # type: ignore[no-any-return]


def _range(data: Mapping[str, Any], path: str) -> tuple[int, int, int]:
    low, expected, high = (_field(data, path, key, (int,)) for key in ("low", "bytes", "high"))
    if not low <= expected <= high:
        raise BudgetReadError(f"{path}: expected low ≤ bytes ≤ high, got {low}, {expected}, {high}")
    return low, expected, high


_SERVING_FIELDS: dict[str, tuple[type, ...]] = {
    "kv_pool_bytes": (int,),
    "max_concurrent_sessions_at_max_request": (int,),
    "max_request_tokens_at_concurrency": (int,),
    "device_memory_bytes": (int,),
    "kv_pool_tokens": (int,),
    "max_concurrency": (int, float),
    "starts": (bool,),
    "reason": (str,),
    "shortfall_bytes": (int,),
    "max_model_len": (int,),
    "max_num_seqs": (int,),
    "max_num_batched_tokens": (int,),
    "profile": (str,),
    "need_bytes": (int,),
}


def _serving(data: Mapping[str, Any]) -> ServingPlan:
    optional = {name: _field(data, "serving", name, kinds, optional=True) for name, kinds in _SERVING_FIELDS.items()}
    if isinstance(optional["max_concurrency"], int):
        optional["max_concurrency"] = float(optional["max_concurrency"])
    return ServingPlan(
        kv_bytes_per_token=_field(data, "serving", "kv_bytes_per_token", (int,)),
        kv_bytes_needed=_field(data, "serving", "kv_bytes_needed", (int,)),
        **optional,
    )


def read_budget(data: object) -> Budget:
    """The Budget JSON :meth:`Budget.as_contract` wrote, read back into a :class:`Budget`.

    Every component of :data:`COMPONENT_NAMES` must be there, each with ``low ≤ bytes ≤ high``; ``views`` are
    derived from the components (:func:`budget_views`) and not read. What the contract does not store reads as
    the nearest it says: a phase's low and high as its expected bytes, ``serving.available_kv_bytes`` as None.
    So ``read_budget(b.as_contract()).as_contract() == b.as_contract()``. Raises :class:`BudgetReadError` naming
    the first field that is missing or of the wrong kind — never a KeyError.
    """
    if not isinstance(data, Mapping):
        raise BudgetReadError(f"budget: expected an object, got {type(data).__name__}")
    per_device = _object(data, "", "per_device")
    components = _object(per_device, "per_device", "components")
    unknown = sorted(set(components) - set(COMPONENT_NAMES))
    if unknown:
        raise BudgetReadError(
            f"per_device.components: unknown component(s) {', '.join(unknown)}; known: {', '.join(COMPONENT_NAMES)}"
        )
    parts = []
    for name in COMPONENT_NAMES:
        component = _object(components, "per_device.components", name)
        low, expected, high = _range(component, f"per_device.components.{name}")
        note = _field(component, f"per_device.components.{name}", "note", (str,), optional=True) or ""
        parts.append(ComponentBudget(name=name, low=low, bytes=expected, high=high, note=note))
    total_low, total, total_high = _range(_object(per_device, "per_device", "total"), "per_device.total")
    phases = _object(per_device, "per_device", "phases")
    device = _field(data, "", "device", (str,))
    if device not in ("cuda", "cpu"):
        raise BudgetReadError(f"device: expected cuda or cpu, got {device!r}")
    host = _object(data, "", "host")
    assumptions = _field(data, "", "assumptions", (list,))
    if not all(isinstance(a, str) for a in assumptions):
        raise BudgetReadError("assumptions: expected a list of strings")
    if data.get("calibration") is not None:
        raise BudgetReadError("calibration: expected null (a stored budget carries no calibration)")
    devices = _field(data, "", "devices", (int,))
    if devices < 1:
        raise BudgetReadError(f"devices: expected a whole number ≥ 1, got {devices}")
    serving = data.get("serving")
    return Budget(
        workload=_field(data, "", "workload", (str,)),
        device=device,
        devices=devices,
        per_device=DeviceBudget(
            components=tuple(parts),
            total_bytes=total,
            total_low_bytes=total_low,
            total_high_bytes=total_high,
            peak_phase=_field(per_device, "per_device", "peak_phase", (str,)),
            phases=tuple(
                PhasePeak(name=name, bytes=value, low=value, high=value)
                for name in phases
                for value in (_field(phases, "per_device.phases", name, (int,)),)
            ),
        ),
        host=HostBudget(
            ram_bytes=_field(host, "host", "ram_bytes", (int,)), disk_bytes=_field(host, "host", "disk_bytes", (int,))
        ),
        assumptions=tuple(assumptions),
        plan=dict(_object(data, "", "plan")),
        serving=None if serving is None else _serving(_object(data, "", "serving")),
    )


UNREADABLE_BUDGET = "unreadable budget"


@dataclass(frozen=True, slots=True)
class StoredBudget:
    """A stored budget as display code reads it (the admin, the API): ``budget`` when it reads through
    :func:`read_budget`; ``error`` (the reader's message, naming the field) when it does not; both None when
    nothing is stored."""

    budget: Budget | None
    error: str | None = None

    @property
    def message(self) -> str | None:
        """``"unreadable budget: <field>: <why>"`` for a stored budget that does not read, else None."""
        return None if self.error is None else f"{UNREADABLE_BUDGET}: {self.error}"


def read_stored_budget(data: object) -> StoredBudget:
    """:func:`read_budget` for display: None (nothing stored) is no budget, not an error; a budget that does not
    read is a :class:`StoredBudget` with its ``error`` — never an exception, never a half-read dict."""
    if data is None:
        return StoredBudget(None)
    try:
        return StoredBudget(read_budget(data))
    except BudgetReadError as exc:
        return StoredBudget(None, str(exc))
