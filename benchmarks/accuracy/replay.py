"""Exact tensor-peak replay of PyTorch profiler ``[memory]`` events (pure, torch-free).

The profiler (``profile_memory=True``) emits one allocation event per CPU tensor block
(``alloc_size > 0``) and one per free (``alloc_size < 0``), each with the block's address.
Replaying them in time order gives the live tensor bytes at every instant.

Pitfall handled here: the CPU allocator only knows the size of blocks allocated while a
profiler was active, so frees of blocks allocated *before* profiling started are dropped.
The harness therefore starts the profiler before the model is built; the replay also counts
and reports any free whose allocation it never saw (``unmatched_frees``) instead of guessing.

The functions take plain tuples so they can be unit-tested without torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field


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
    extra: dict = field(default_factory=dict)


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


def window_peak(r: Replay, start_ns: int, end_ns: int) -> dict:
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
                    if r.block_of_event[j] is not None and r.blocks[r.block_of_event[j]] is b:
                        freed_later = True
                        break
                    j += 1
                if freed_later:
                    out.append(b)
        return out
    assert time_ns is not None
    return [b for b in r.blocks if b.alloc_time <= time_ns and (b.free_time is None or b.free_time > time_ns)]
