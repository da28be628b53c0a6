"""Deciding an order from a measurement, and comparing a measurement with its budget. Pure: no Django.

The decision is a sentence and its numbers. The peak it judges is the best view the measurement has,
in this order: what a serving engine that preallocates its pool (vLLM, SGLang) says in its own start-up
report that the workload needs of it (``engine_need``), the device view (NVML: what the driver saw, CUDA
context and every allocator included), the framework's reserved pool, the framework's allocated tensors,
the host process tree's RSS (a node without a GPU). The view used is part of the decision, so a reader
knows which it was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeGuard

from budgets.engine.budget import Budget, budget_views

from .document import MAX_BYTES

#: Measurement views, best evidence of device memory first. ``vllm_need`` (when a vLLM program ran) is
#: what vLLM's own startup report says the workload needs; the device view of a vLLM run is the pool it
#: preallocates (gpu_memory_utilization × total), which says nothing about the workload. ``sglang_need`` is the
#: same for SGLang, whose static share (mem_fraction_static × free memory) is preallocated likewise.
VIEWS = ("vllm_need", "sglang_need", "device_used", "framework_reserved", "framework_allocated", "host_rss")
#: The view a serving engine's run is judged by, read from its own start-up report (``program_report.engine``),
#: and the one the budget's ``serving.need_bytes`` predicts for a workload of that engine.
ENGINE_NEED_VIEWS = {"vllm": "vllm_need", "sglang": "sglang_need"}
#: On a node without a GPU the "device" is host memory: the process tree's RSS is what must fit.
HOST_VIEWS = ("host_rss", "framework_allocated")

#: The run outcomes the runner reports (``workers.runner.execute``).
OUTCOME_SUCCEEDED = "succeeded"
OUTCOME_OOM = "oom"

#: Which order status may follow which: the one table ``order_transition`` enforces.
ORDER_TRANSITIONS: dict[str, frozenset[str]] = {
    "draft": frozenset({"acceptance_pending", "cancelled"}),
    "acceptance_pending": frozenset({"accepted", "rejected", "cancelled"}),
    # A decided order may be measured again (a new job or upload re-decides it) until it is confirmed.
    "accepted": frozenset({"confirmed", "cancelled", "acceptance_pending", "rejected"}),
    "rejected": frozenset({"acceptance_pending", "accepted", "cancelled"}),
    "confirmed": frozenset(),
    "cancelled": frozenset(),
}


# An acceptance job: queued until a node claims it; a running job is re-queued when its node goes silent (the reaper);
# it ends succeeded, failed (its run, or no live node at the start) or cancelled
JOB_TRANSITIONS: dict[str, frozenset[str]] = {
    "queued": frozenset({"running", "failed", "cancelled"}),
    "running": frozenset({"succeeded", "failed", "cancelled", "queued"}),
    "succeeded": frozenset(),
    "failed": frozenset(),
    "cancelled": frozenset(),
}


class TransitionError(ValueError):
    """An order status change the table does not allow; the message says what is allowed."""


def check_transition(current: str, new: str) -> None:
    _check(ORDER_TRANSITIONS, "an order", current, new)


def check_job_transition(current: str, new: str) -> None:
    _check(JOB_TRANSITIONS, "a job", current, new)


def _check(table: dict[str, frozenset[str]], what: str, current: str, new: str) -> None:
    allowed = table.get(current, frozenset())
    if new not in allowed:
        choices = ", ".join(sorted(allowed)) or "none (it is final)"
        raise TransitionError(f"{what} that is {current!r} cannot become {new!r}; allowed: {choices}")


@dataclass(frozen=True)
class Criteria:
    min_headroom_fraction: float  # least free share of usable memory to keep on the device
    max_ms_per_output_token: float | None  # per-session latency target (inference), or None


@dataclass(frozen=True)
class Decision:
    verdict: str  # "accepted" | "rejected" | "undecided"
    sentence: str
    view: str | None  # the measurement view the peak came from
    measured_peak_bytes: int | None
    usable_memory_bytes: int | None
    margin_bytes: int | None  # usable − peak
    margin_fraction: float | None  # margin / usable
    min_headroom_fraction: float
    max_ms_per_output_token: float | None
    ms_per_output_token: float | None
    broken_by: str | None  # on rejection: "oom", "headroom", "latency", plus the component, when one is known
    component: str | None  # the budget component that dominates the overflow, when the budget is known

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def peak_view(peaks: Mapping[str, int | None], order: tuple[str, ...] = VIEWS) -> tuple[str | None, int | None]:
    """The best available view and its peak bytes (see the module docstring for the order)."""
    for view in order:
        value = peaks.get(view)
        if value is not None:
            return view, int(value)
    return None, None


def _largest_component(budget: Budget | None) -> str | None:
    if budget is None:
        return None
    return max(budget.per_device.components, key=lambda c: c.bytes).name


def _gib(value: int) -> str:
    """GiB for device-sized figures, MiB below 1 GiB (a tiny CPU run is not "0.00 GiB")."""
    if abs(value) < 2**30:
        return f"{value / 2**20:,.1f} MiB"
    return f"{value / 2**30:,.2f} GiB"


def decide(
    *,
    outcome: str,
    peaks: Mapping[str, int | None],
    usable_memory_bytes: int | None,
    criteria: Criteria,
    ms_per_output_token: float | None = None,
    budget: Budget | None = None,
    oom_phase: str | None = None,
    host_only: bool = False,
) -> Decision:
    """Accept, reject, or leave undecided (a run that failed for reasons other than memory decides nothing).

    ``host_only``: the node has no GPU, so host memory is what must fit (RSS first).
    """
    view, peak = peak_view(peaks, HOST_VIEWS if host_only else VIEWS)
    component = _largest_component(budget)
    base: dict[str, Any] = {
        "view": view,
        "measured_peak_bytes": peak,
        "usable_memory_bytes": usable_memory_bytes,
        "min_headroom_fraction": criteria.min_headroom_fraction,
        "max_ms_per_output_token": criteria.max_ms_per_output_token,
        "ms_per_output_token": ms_per_output_token,
    }
    margin = usable_memory_bytes - peak if usable_memory_bytes is not None and peak is not None else None
    fraction = margin / usable_memory_bytes if margin is not None and usable_memory_bytes else None

    if outcome == OUTCOME_OOM:
        where = f" during {oom_phase}" if oom_phase else ""
        seen = f"; the largest reading before it was {_gib(peak)} ({view})" if peak is not None else ""
        return Decision(
            verdict="rejected",
            sentence=f"Did not fit: the run ran out of memory{where}{seen}.",
            margin_bytes=margin,
            margin_fraction=fraction,
            broken_by="oom",
            component=component,
            **base,
        )
    if outcome != OUTCOME_SUCCEEDED:
        return Decision(
            verdict="undecided",
            sentence=f"Not decided: the run ended {outcome!r}, which says nothing about fit; run it again.",
            margin_bytes=margin,
            margin_fraction=fraction,
            broken_by=None,
            component=None,
            **base,
        )
    if peak is None or usable_memory_bytes is None:
        missing = "no memory view could be read" if peak is None else "the node's usable memory is unknown"
        return Decision(
            verdict="undecided",
            sentence=f"Not decided: {missing}.",
            margin_bytes=margin,
            margin_fraction=fraction,
            broken_by=None,
            component=None,
            **base,
        )
    assert margin is not None and fraction is not None
    required = criteria.min_headroom_fraction
    if fraction < required:
        return Decision(
            verdict="rejected",
            sentence=(
                f"Rejected: the measured peak {_gib(peak)} ({view}) leaves {_gib(margin)} of "
                f"{_gib(usable_memory_bytes)} usable ({fraction:.1%}), "
                f"less than the required headroom of {required:.0%}"
                + (f"; the budget's largest component is {component}." if component else ".")
            ),
            margin_bytes=margin,
            margin_fraction=fraction,
            broken_by="headroom",
            component=component,
            **base,
        )
    target = criteria.max_ms_per_output_token
    if target is not None and ms_per_output_token is not None and ms_per_output_token > target:
        return Decision(
            verdict="rejected",
            sentence=(
                f"Rejected: {ms_per_output_token:.2f} ms per output token is slower than the target of "
                f"{target:g} ms (memory fits with {fraction:.1%} headroom)."
            ),
            margin_bytes=margin,
            margin_fraction=fraction,
            broken_by="latency",
            component=None,
            **base,
        )
    if target is not None and ms_per_output_token is None:
        return Decision(
            verdict="undecided",
            sentence=(
                f"Not decided: memory fits with {fraction:.1%} headroom, but this run did not measure the latency "
                f"target of {target:g} ms per output token; run a job that generates tokens."
            ),
            margin_bytes=margin,
            margin_fraction=fraction,
            broken_by=None,
            component=None,
            **base,
        )
    latency = f"; {ms_per_output_token:.2f} ms per output token meets {target:g} ms" if target is not None else ""
    return Decision(
        verdict="accepted",
        sentence=(
            f"Accepted: the measured peak {_gib(peak)} ({view}) leaves {_gib(margin)} of {_gib(usable_memory_bytes)} "
            f"usable ({fraction:.1%}), at least the required {required:.0%}{latency}."
        ),
        margin_bytes=margin,
        margin_fraction=fraction,
        broken_by=None,
        component=None,
        **base,
    )


def estimated_views(budget: Budget, engine: str = "vllm") -> dict[str, tuple[int, str]]:
    """What the budget predicts for each view, and which figure of the budget that is.

    The budget's views (:func:`budgets.engine.budget.budget_views`: on ``cuda`` the total is the device view,
    and the framework views leave out what the allocator does not hold — the CUDA context is ``runtime``, the
    caching allocator's slack is ``fragmentation``; on ``cpu`` the total is the framework's allocated peak).
    A pool engine's budget with a device memory also predicts its need view (``serving.need_bytes``), named by
    ``engine``, the workload's (``ENGINE_NEED_VIEWS``: ``vllm_need``, ``sglang_need``). A stored budget comes
    here through ``budgets.engine.budget.read_budget``.
    """
    views = budget_views(budget.device, budget.per_device)
    named = {name: (view["bytes"], f"per_device.views.{name}") for name, view in views.items()}
    need = budget.serving.need_bytes if budget.serving is not None else None
    need_view = ENGINE_NEED_VIEWS.get(engine)
    if need_view is None or need is None or need <= 0:
        return named
    return named | {need_view: (need, "serving.need_bytes")}


def estimated_bounds(budget: Budget | None) -> dict[str, tuple[int, int]]:
    """Each view's (low, high) estimate, for the views the budget has ranges for."""
    if budget is None:
        return {}
    return {name: (v["low"], v["high"]) for name, v in budget_views(budget.device, budget.per_device).items()}


def view_ratios(
    peaks: Mapping[str, int | None], budget: Budget | None, engine: str = "vllm"
) -> dict[str, dict[str, Any]]:
    """measured / estimated for every view both sides have, with the budget figure it was compared with
    (``engine``: the workload's serving engine, which names the need view the budget predicts)."""
    if budget is None:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for view, (estimated, basis) in estimated_views(budget, engine).items():
        measured = peaks.get(view)
        if measured is None or estimated <= 0:
            continue
        out[view] = {
            "measured_bytes": int(measured),
            "estimated_bytes": estimated,
            "ratio": round(measured / estimated, 4),
            "basis": basis,
        }
    return out


def vllm_need(program_report: Mapping[str, Any] | None, needed_tokens: int) -> tuple[int | None, str | None]:
    """What a vLLM run needs of the device for ``needed_tokens`` of KV cache, from vLLM's own startup report.

    weights + activation peak + non-torch memory + CUDA graphs + the tokens' share of the KV pool (the pool's
    bytes per token). (None, why) when the report lacks a figure. Returns a negative "need" never: the
    parts are sizes. ``needed_tokens`` is the asked concurrency × the longest request.
    """
    if not program_report or program_report.get("engine") != "vllm":
        return None, None
    report: Mapping[str, Any] = program_report.get("engine_report") or {}
    parts: dict[str, Any] = {name: report.get(name) for name in ("weights_bytes", "kv_cache_bytes", "kv_cache_tokens")}
    missing = [name for name, value in parts.items() if not _figure(value)]
    if missing:
        return None, f"vLLM's startup report lacks {', '.join(missing)} (or gives more than {MAX_BYTES:,})"
    per_token = parts["kv_cache_bytes"] / parts["kv_cache_tokens"]
    extra = sum(
        value
        for value in (report.get(k) for k in ("activation_peak_bytes", "non_torch_bytes", "cuda_graph_bytes"))
        if _figure(value)
    )
    need = parts["weights_bytes"] + extra + needed_tokens * per_token
    if need > MAX_BYTES:
        return None, f"vLLM's startup report gives a need of more than {MAX_BYTES:,} bytes (1 PiB)"
    return int(need), None


def sglang_need(
    program_report: Mapping[str, Any] | None, sessions: int, longest_request: int
) -> tuple[int | None, str | None]:
    """What an SGLang run needs of its static share for ``sessions`` requests of ``longest_request`` tokens, from
    SGLang's own start-up report (``workers.runner.sglang_log``): the weights + the sessions' KV at the pool's
    bytes per token (+ their recurrent state at the mamba pool's bytes per request, for hybrid linear models).

    The figure the SGLang budget's ``serving.need_bytes`` estimates (``budgets.engine.sglang.serving_plan``:
    weights + the KV the sessions need), so the two compare like with like. The device view of an SGLang run
    says nothing about the workload: SGLang preallocates mem_fraction_static × free memory (weights + the whole
    KV pool) and keeps the rest as its reserve. (None, why) when the report lacks a figure.
    """
    if not program_report or program_report.get("engine") != "sglang":
        return None, None
    report: Mapping[str, Any] = program_report.get("engine_report") or {}
    parts: dict[str, Any] = {name: report.get(name) for name in ("weights_bytes", "kv_cache_bytes", "kv_cache_tokens")}
    missing = [name for name, value in parts.items() if not _figure(value)]
    if missing:
        return None, f"SGLang's start-up report lacks {', '.join(missing)} (or gives more than {MAX_BYTES:,})"
    need = parts["weights_bytes"] + sessions * longest_request * parts["kv_cache_bytes"] / parts["kv_cache_tokens"]
    mamba, requests = report.get("mamba_cache_bytes"), report.get("max_mamba_cache_size")
    if _figure(mamba) and _figure(requests):
        need += sessions * mamba / requests
    if need > MAX_BYTES:
        return None, f"SGLang's start-up report gives a need of more than {MAX_BYTES:,} bytes (1 PiB)"
    return int(need), None


def engine_need(
    program_report: Mapping[str, Any] | None, sessions: int, longest_request: int
) -> tuple[str | None, int | None, str | None]:
    """(view, need, why) of a serving program's run: ``vllm_need`` or ``sglang_need`` by the engine its report
    names (``ENGINE_NEED_VIEWS``), for ``sessions`` requests of ``longest_request`` tokens; (None, None, None) for a
    run without such a report."""
    engine = program_report.get("engine") if program_report else None
    view = ENGINE_NEED_VIEWS.get(engine) if isinstance(engine, str) else None
    if view is None:
        return None, None, None
    if engine == "sglang":
        need, why = sglang_need(program_report, sessions, longest_request)
    else:
        need, why = vllm_need(program_report, sessions * longest_request)
    return view, need, why


def _figure(value: Any) -> TypeGuard[int]:
    """A positive integer figure no larger than ``MAX_BYTES`` (a stored report is read as it was stored: an
    upload validated before the bound existed may hold anything)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_BYTES


#: How far a measured GPU's total memory may sit from the ordered accelerator's marketed size and still be that card,
#: as fractions of the marketed size. nvidia-smi's totals are the marketed size in GB or in GiB: H100 80GB 81,559 MiB
#: (1.07 ×), A100 80GB 81,920 MiB, A100 40GB 40,960 MiB (1.07 ×), A10 23,028 MiB, L4 23,034 MiB, L40S 46,068 MiB,
#: T4 15,360 MiB (1.01 ×) (modal-labs/modal-client PR #2797), H100 NVL 99,961,274,368 B (1.06 ×; fastfetch issue #1658).
#: The catalog's neighbouring cards sit further apart: an H100 80GB read against the 94 GB of an H100 NVL is 0.91 ×,
#: an A100 40GB against a 48 GB card 0.89 ×, an L40S against a 40 GB card 1.21 ×.
SAME_CARD_BAND = (0.97, 1.12)


def hardware_mismatch(
    devices: Sequence[Mapping[str, Any]], device_count: int, marketed_bytes: int | None
) -> str | None:
    """Why a run's measured GPUs are not the ordered configuration's, or None when they match: as many GPUs (none
    for a CPU configuration), each with a total memory inside ``SAME_CARD_BAND`` of the accelerator's marketed size.
    An upload that did not read its GPUs (no NVML) cannot show it ran on them."""
    measured = [d for d in devices if isinstance(d, Mapping)]
    if device_count == 0:
        return f"it measured {len(measured)} GPU(s); the order is for a CPU configuration" if measured else None
    if not measured:
        return f"it read no GPU (no NVML view); the order is for {device_count} GPU(s)"
    if len(measured) != device_count:
        return f"it measured {len(measured)} GPU(s); the order is for {device_count}"
    if marketed_bytes:
        low, high = SAME_CARD_BAND
        for d in measured:
            total = d.get("total_bytes")
            if isinstance(total, int) and not isinstance(total, bool) and not low <= total / marketed_bytes <= high:
                name = d.get("name") or "a GPU"
                return (
                    f"it measured {name} with {total / 1e9:.1f} GB; the ordered accelerator has"
                    f" {marketed_bytes / 1e9:.0f} GB"
                )
    return None
