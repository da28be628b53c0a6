"""Exact CPU tensor peaks: PyTorch profiler ``[memory]`` events replayed in time order.

The CPU allocator has no caching pool and no high-water mark, but the profiler
(``profile_memory=True``) emits one allocation event per CPU block (``alloc_size > 0``) and one per
free (``alloc_size < 0``), each with the block's address. Replaying them in time order gives the live
tensor bytes at every instant — what WORKLOAD.md calls the ``cpu`` budget ("the peak bytes held by
framework tensors on the host, what the PyTorch profiler's allocation events sum to").

Pitfall handled here: the allocator only reports the size of blocks allocated while a profiler was
active, so frees of blocks allocated *before* profiling started are dropped by the profiler. Start the
profiler before the model is built (``CpuPeakTracker.start``); the replay also counts and reports any
free whose allocation it never saw (``unmatched_frees``) instead of guessing.

The replay functions take plain tuples and import nothing, so they are testable without torch; the
tracker imports torch lazily (``workers.runner`` must stay importable on a node without torch).
``benchmarks.accuracy`` imports the replay from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

WINDOW_LABEL = "vramplan::window"
STEP_LABEL = "vramplan::step"
CPU_NO_POOL = "the CPU allocator has no caching pool"


@dataclass
class Event:
    time_ns: int
    ptr: int
    size: int  # > 0 allocation, < 0 free
    seq: int = 0  # tie-breaker: original order
    ctx: object = None  # anything the caller wants back (the profiler node)


@dataclass
class Block:
    ptr: int
    size: int
    alloc_time: int
    alloc_index: int
    free_time: int | None = None
    ctx: object = None


@dataclass
class Replay:
    events: list[Event]
    live_after: list[int]  # live bytes after each event
    blocks: list[Block]  # every allocation, in order
    block_of_event: list[int | None]  # block index allocated (alloc) or freed (free) by each event
    unmatched_frees: int = 0
    unmatched_free_bytes: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def replay(events: list[Event]) -> Replay:
    """Replay events (any order; sorted here by time, then original order)."""
    evs = sorted(events, key=lambda e: (e.time_ns, e.seq))
    live = 0
    open_blocks: dict[int, int] = {}
    blocks: list[Block] = []
    live_after: list[int] = []
    block_of_event: list[int | None] = []
    unmatched = 0
    unmatched_bytes = 0
    for i, e in enumerate(evs):
        if e.size > 0:
            if e.ptr in open_blocks:  # a free we never saw: close the stale block at this time
                stale = blocks[open_blocks.pop(e.ptr)]
                stale.free_time = e.time_ns
                live -= stale.size
            open_blocks[e.ptr] = len(blocks)
            blocks.append(Block(e.ptr, e.size, e.time_ns, i, ctx=e.ctx))
            block_of_event.append(len(blocks) - 1)
            live += e.size
        elif e.size < 0:
            bi = open_blocks.pop(e.ptr, None)
            if bi is None:
                unmatched += 1
                unmatched_bytes += -e.size
                block_of_event.append(None)
            else:
                blocks[bi].free_time = e.time_ns
                live -= blocks[bi].size
                block_of_event.append(bi)
        else:
            block_of_event.append(None)
        live_after.append(live)
    return Replay(evs, live_after, blocks, block_of_event, unmatched, unmatched_bytes)


def window_peak(r: Replay, start_ns: int, end_ns: int) -> dict[str, Any]:
    """Peak of live bytes within [start_ns, end_ns], including what is live at start_ns.

    Returns baseline (live just before the window), peak bytes, the index of the event that
    reached the peak and its time.
    """
    baseline = 0
    first = None
    for i, e in enumerate(r.events):
        if e.time_ns < start_ns:
            baseline = r.live_after[i]
            continue
        first = i
        break
    peak = baseline
    peak_index = None
    peak_time = start_ns
    if first is not None:
        for i in range(first, len(r.events)):
            e = r.events[i]
            if e.time_ns > end_ns:
                break
            if r.live_after[i] > peak:
                peak = r.live_after[i]
                peak_index = i
                peak_time = e.time_ns
    return {"baseline": baseline, "peak": peak, "peak_index": peak_index, "peak_time_ns": peak_time}


def live_blocks_at(r: Replay, index: int | None, time_ns: int | None = None) -> list[Block]:
    """Blocks live right after event ``index`` (or at ``time_ns`` when index is None)."""
    if index is not None:
        t_event = r.events[index]
        out = []
        for b in r.blocks:
            if b.alloc_index > index:
                break
            if b.free_time is None:
                out.append(b)
                continue
            # freed after this event? compare by event order using free time; equal times are
            # resolved by the order of the replay
            if b.free_time > t_event.time_ns:
                out.append(b)
            elif b.free_time == t_event.time_ns:
                # find whether the free event comes after index
                j = index + 1
                freed_later = False
                while j < len(r.events) and r.events[j].time_ns == t_event.time_ns:
                    if (k := r.block_of_event[j]) is not None and r.blocks[k] is b:
                        freed_later = True
                        break
                    j += 1
                if freed_later:
                    out.append(b)
        return out
    assert time_ns is not None
    return [b for b in r.blocks if b.alloc_time <= time_ns and (b.free_time is None or b.free_time > time_ns)]


# --------------------------------------------------------------------------------------------
# the profiler side (torch imported lazily)
# --------------------------------------------------------------------------------------------


def profiler_events(
    prof: Any, label_prefix: str = "vramplan::"
) -> tuple[list[Event], dict[str, list[tuple[int, int]]]]:
    """Allocation events and the (start, end) of every ``record_function`` label with the prefix."""
    from torch._C._profiler import _ExtraFields_Allocation

    roots = prof.profiler.kineto_results.experimental_event_tree()
    events: list[Event] = []
    labels: dict[str, list[tuple[int, int]]] = {}
    stack = list(roots)
    while stack:
        node = stack.pop()
        extra = node.extra_fields
        if isinstance(extra, _ExtraFields_Allocation):
            if extra.alloc_size != 0:
                # the profiler's node id orders events that share a timestamp
                events.append(Event(node.start_time_ns, extra.ptr, extra.alloc_size, node.id))
        elif node.name.startswith(label_prefix):
            labels.setdefault(node.name, []).append((node.start_time_ns, node.end_time_ns))
        stack.extend(node.children)
    for spans in labels.values():
        spans.sort()
    return events, labels


def is_cpu_oom(exc: BaseException) -> bool:
    """A failed host allocation: MemoryError, or the CPU allocator's RuntimeError."""
    if isinstance(exc, MemoryError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and (
        "DefaultCPUAllocator" in text or "can't allocate memory" in text or "not enough memory" in text
    )


class CpuPeakTracker:
    """Exact peak of live CPU tensor bytes over a measured window, by profiler replay.

    Call ``start()`` before anything of the workload is allocated, mark the measured window with
    ``begin_window()``/``end_window()`` and each measured step inside it with ``begin_step()``/``end_step()``,
    ``stop()`` as soon as the window closes (profiling is not free), and read ``framework()`` at the end.
    The window's peak includes everything live when it opens (weights, optimizer state, inputs).
    """

    method = (
        "torch.profiler CPU [memory] allocation/free events replayed in time order; the profiler starts before "
        "the model is built, so the window's peak includes the bytes live when it opens (weights, optimizer state)"
    )

    def __init__(self) -> None:
        self._prof: Any = None
        self._open: list[Any] = []
        self._stopped = False
        self._window_opened = False
        self._analysis: dict[str, Any] | None = None

    # -- recording ------------------------------------------------------------------------------
    def start(self) -> None:
        from torch.profiler import ProfilerActivity, profile

        self._prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=False)
        self._prof.__enter__()

    def _enter(self, name: str) -> None:
        import torch

        rf = torch.profiler.record_function(name)
        rf.__enter__()
        self._open.append(rf)

    def _exit(self) -> None:
        if self._open:
            self._open.pop().__exit__(None, None, None)

    def begin_window(self) -> None:
        self._window_opened = True
        self._enter(WINDOW_LABEL)

    def end_window(self) -> None:
        while self._open:  # a step label left open closes with its window
            self._exit()

    def begin_step(self) -> None:
        self._enter(STEP_LABEL)

    def end_step(self) -> None:
        self._exit()

    def stop(self) -> None:
        """Close open labels and stop profiling (idempotent; safe after a failure)."""
        if self._stopped or self._prof is None:
            return
        self._stopped = True
        while self._open:
            self._exit()
        self._prof.__exit__(None, None, None)

    # -- analysis -------------------------------------------------------------------------------
    def analyse(self) -> dict[str, Any]:
        if self._analysis is not None:
            return self._analysis
        self.stop()
        events, labels = profiler_events(self._prof)
        r = replay(events)
        windows = labels.get(WINDOW_LABEL, [])
        if windows:
            start, end = windows[0][0], windows[-1][1]
            scope = "measured window"
        else:  # failed before the window opened: the whole run up to the failure
            start, end = -1, 1 << 62
            scope = "whole run (no measured window was reached)"
        wp = window_peak(r, start, end)
        step_peaks = [window_peak(r, a, b)["peak"] for a, b in labels.get(STEP_LABEL, []) if a >= start and b <= end]
        self._analysis = {
            "peak": wp["peak"],
            "baseline": wp["baseline"],
            "scope": scope,
            "step_peaks": step_peaks,
            "events": len(r.events),
            "unmatched_frees": r.unmatched_frees,
            "unmatched_free_bytes": r.unmatched_free_bytes,
        }
        self._prof = None  # the trace can be large: drop it once analysed
        return self._analysis

    def framework(self, oom: bool = False) -> dict[str, Any]:
        """The ``framework`` section of a result message."""
        a = self.analyse()
        method = self.method
        if oom:
            method += f"; the run failed to allocate: peak over the {a['scope']} up to the failure"
        return {
            "allocated_bytes_peak": a["peak"],
            "reserved_bytes_peak": None,
            "inactive_split_bytes_peak": None,
            "num_alloc_retries": None,
            "num_ooms": None,
            "method": method,
            "reasons": {
                "reserved_bytes_peak": CPU_NO_POOL,
                "inactive_split_bytes_peak": CPU_NO_POOL,
                "num_alloc_retries": CPU_NO_POOL,
                "num_ooms": CPU_NO_POOL + " (an allocation failure is reported as oom)",
            },
            "baseline_bytes": a["baseline"],
            "step_peaks": a["step_peaks"],
            "profiler_events": a["events"],
            "unmatched_frees": a["unmatched_frees"],
            "unmatched_free_bytes": a["unmatched_free_bytes"],
        }


__all__ = [
    "CPU_NO_POOL",
    "STEP_LABEL",
    "WINDOW_LABEL",
    "Block",
    "CpuPeakTracker",
    "Event",
    "Replay",
    "is_cpu_oom",
    "live_blocks_at",
    "profiler_events",
    "replay",
    "window_peak",
]
