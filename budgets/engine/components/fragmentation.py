"""PyTorch caching-allocator overhead: reserved − allocated at the peak.

Requests are rounded to 512 B; ≥ 1 MiB to 2 MiB; 1–10 MiB requests are carved from 20 MiB segments;
freed blocks split and cannot always be reused (ZeRO: OOM "with over 30 % of memory still
available"; FSDP Qwen2.5-7B reserved/allocated 2.08×, 1.59× with expandable_segments —
budget-engine.md §5.1). The expected value is a fraction of the transient (activation-like) bytes
plus rounding per live tensor; calibrate from measurements.
"""

from __future__ import annotations

from ..budget import Range

MIB = 2**20


def fragmentation(
    device: str, transient_bytes: int, live_tensors: int, expandable_segments: bool, preallocated: bool
) -> Range:
    if device == "cpu":
        return Range(0, 0, 0)
    rounding = live_tensors * MIB // 2  # half a 2 MiB rounding unit per live large tensor, on average
    if expandable_segments:
        expected, high = 0.03, 0.15
    elif preallocated:
        expected, high = 0.05, 0.20
    else:
        expected, high = 0.10, 0.35
    return Range(rounding // 2, int(rounding + expected * transient_bytes), int(2 * rounding + high * transient_bytes))
