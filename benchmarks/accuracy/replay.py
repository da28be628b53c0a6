"""Exact tensor-peak replay of PyTorch profiler ``[memory]`` events (pure, torch-free).

The implementation lives in ``workers.runner.cpu_memory`` (the synthetic acceptance workload measures
its CPU peaks with it too); this module re-exports it so the benchmark and its tests keep their imports.
"""

from __future__ import annotations

from workers.runner.cpu_memory import Block, Event, Replay, live_blocks_at, replay, window_peak

__all__ = ["Block", "Event", "Replay", "live_blocks_at", "replay", "window_peak"]
