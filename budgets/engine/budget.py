"""The budget (the answer): frozen dataclasses and named tuples, and a text table. Its JSON (WORKLOAD.md's Budget
object) is defined once, in ``budgets.engine.document``: ``as_contract`` writes it and ``read_budget`` reads it."""

from __future__ import annotations

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
        """The Budget JSON of WORKLOAD.md, with a few added keys (peak_phase, phases, views, plan, serving), as its
        one definition writes it (``budgets.engine.document.BudgetDocument``)."""
        from .document import BudgetDocument

        return BudgetDocument.of(self).contract()


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


def read_budget(data: object) -> Budget:
    """The Budget JSON :meth:`Budget.as_contract` wrote, read back into a :class:`Budget` through the budget
    document (``budgets.engine.document``): every component there, each with ``low ≤ bytes ≤ high``; ``views``
    derived, not read. So ``read_budget(b.as_contract()).as_contract() == b.as_contract()``. A stored budget
    carries no calibration. Raises :class:`BudgetReadError` naming the first field that is missing, of the wrong
    kind or out of range — never a KeyError."""
    from .document import read_document

    document = read_document(data)
    if document.calibration is not None:
        raise BudgetReadError("calibration: expected null (a stored budget carries no calibration)")
    return document.budget()


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
