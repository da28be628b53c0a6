"""Pure tests of the accuracy benchmark's profiler replay (benchmarks/accuracy/replay.py).

The torch-based test checks the whole measuring path (profiler + replay + attribution) against
an analytic peak: a plain stack of Linear layers under no_grad.
"""

from __future__ import annotations

import pytest

from benchmarks.accuracy.replay import Event, live_blocks_at, replay, window_peak


def ev(t, ptr, size):
    return Event(time_ns=t, ptr=ptr, size=size, seq=t)


def test_replay_counts_live_bytes_and_window_includes_baseline():
    events = [
        ev(1, 0xA, 100),
        ev(2, 0xB, 50),
        ev(3, 0xB, -50),
        ev(10, 0xC, 30),
        ev(11, 0xD, 40),
        ev(12, 0xC, -30),
        ev(13, 0xE, 5),
        ev(20, 0xF, 1000),
    ]
    r = replay(events)
    assert r.live_after == [100, 150, 100, 130, 170, 140, 145, 1145]
    w = window_peak(r, 10, 15)
    assert w["baseline"] == 100  # 0xA allocated before the window is counted
    assert w["peak"] == 170 and w["peak_time_ns"] == 11
    live = live_blocks_at(r, w["peak_index"])
    assert sorted(b.ptr for b in live) == [0xA, 0xC, 0xD]
    assert sum(b.size for b in live) == 170


def test_window_without_allocations_reports_baseline():
    r = replay([ev(1, 1, 10), ev(50, 1, -10)])
    w = window_peak(r, 10, 20)
    assert w == {"baseline": 10, "peak": 10, "peak_index": None, "peak_time_ns": 10}


def test_unmatched_frees_are_counted_not_subtracted():
    # a free of a block allocated before profiling started carries its size (negative) but the
    # replay never saw the allocation: it must not go below zero nor hide it
    r = replay([ev(1, 1, 10), ev(2, 99, -500), ev(3, 1, -10)])
    assert r.live_after == [10, 10, 0]
    assert r.unmatched_frees == 1 and r.unmatched_free_bytes == 500


def test_address_reuse_after_a_missed_free_closes_the_stale_block():
    r = replay([ev(1, 7, 10), ev(2, 7, 20)])
    assert r.live_after == [10, 20]


def test_linear_stack_peak_is_exact():
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    from benchmarks.accuracy.measure import Tracer, analyse

    B, D, L = 64, 256, 4
    torch.manual_seed(0)
    tracer = Tracer()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=False) as prof:
        layers = [torch.nn.Linear(D, D, bias=False) for _ in range(L)]
        tracer.snap("weights", [layer.weight for layer in layers])
        x0 = torch.randn(B, D)
        with torch.no_grad():
            junk = torch.empty(10_000)  # allocated before, freed inside the window
            with tracer.label("window"), tracer.label("phase:generate"):
                del junk
                x = x0
                for layer in layers:
                    x = layer(x)
                del x
    res = analyse(prof, tracer, "inference")
    W = L * D * D * 4
    act = B * D * 4
    assert res["baseline"] == W + act + 10_000 * 4
    # x0 held by the caller + the previous activation + the new one
    assert res["peak"] == W + act + 2 * act
    assert res["live_at_peak_by_category"]["weights"] == W
    assert res["replay"]["unmatched_frees"] == 0
