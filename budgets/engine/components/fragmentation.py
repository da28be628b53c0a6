"""PyTorch caching-allocator overhead: reserved − requested bytes at the peak (device view only).

Two parts (pytorch/pytorch@001074d2 c10/cuda/CUDACachingAllocator.cpp; quotes in CUDA_TERMS.md):

- rounding, derived from the allocator's rules. Every block is rounded to 512 B (`kMinBlockSize`).
  Without expandable segments a request that opens a segment gets `get_allocation_size()`: ≤ 1 MiB →
  a 2 MiB segment, 1–10 MiB → a 20 MiB one, larger → rounded up to 2 MiB (`kRoundLarge`). A live tensor
  that opened its own segment so leaves < 2 MiB of it unused; none when its size is a multiple of
  2 MiB or it was carved from a larger free block. With `expandable_segments` a stream has one segment
  that grows by 20 MiB pages (2 MiB for the small pool) and every block is split down to 512 B
  (`should_split`), so what is lost is the 512 B rounding plus one partly used page per pool.
- split-block slack on the transient bytes: freed blocks split for smaller requests cannot always be
  merged back for a larger one. No rule bounds it; the fractions below are assumptions, not derived.
"""

from __future__ import annotations

from ..budget import ZERO, Range

MIB = 2**20
K_MIN_BLOCK = 512  # "constexpr size_t kMinBlockSize = 512; // all sizes are rounded to at least 512 bytes"
K_ROUND_LARGE = 2 * MIB  # "constexpr size_t kRoundLarge = 2097152; // round up large allocations to 2 MiB"
K_SMALL_BUFFER = 2 * MIB  # "kSmallBuffer = 2097152; // "small" allocations are packed in 2 MiB blocks"
K_LARGE_BUFFER = 20 * MIB  # "kLargeBuffer = 20971520; // "large" allocations may be packed in 20 MiB blocks"

# Split-block slack as a fraction of the transient bytes (expected, high). ASSUMPTION: no source gives
# these numbers for a single phase; whole-job ratios for comparison are in CUDA_TERMS.md (cosmos-rl PR
# #388: reserved/allocated 2.08× in FSDP training, 1.59× with expandable_segments).
SLACK_EXPANDABLE = (0.03, 0.15)
SLACK_PREALLOCATED = (0.05, 0.20)  # a static KV cache or a vLLM pool: fewer distinct transient sizes
SLACK_DEFAULT = (0.10, 0.35)


def rounding(live_tensors: int, expandable_segments: bool) -> Range:
    """Bytes reserved but not requested because of block and segment rounding of the live tensors."""
    block_rounding = live_tensors * K_MIN_BLOCK  # < 512 B per tensor: the high end
    if expandable_segments:
        # the tails are split off and reused; one partly mapped page per pool remains
        return Range(0, block_rounding // 2, block_rounding + K_LARGE_BUFFER + K_SMALL_BUFFER)
    # high: a < 2 MiB tail per tensor (each ≥ 10 MiB tensor in its own segment), plus one partly used
    # 20 MiB segment of the 1–10 MiB tensors and one 2 MiB segment of the small pool, if best fit packs
    # the rest. Expected: half a tail on average, for half of the tensors (the rest are small-pool
    # tensors or carved from free blocks): ASSUMPTION
    high = live_tensors * (K_ROUND_LARGE - K_MIN_BLOCK) + K_LARGE_BUFFER + K_SMALL_BUFFER
    return Range(0, live_tensors * K_ROUND_LARGE // 4, high)


def fragmentation(
    device: str, transient_bytes: int, live_tensors: int, expandable_segments: bool, preallocated: bool
) -> Range:
    if device == "cpu":
        return ZERO
    if expandable_segments:
        expected, high = SLACK_EXPANDABLE
    elif preallocated:
        expected, high = SLACK_PREALLOCATED
    else:
        expected, high = SLACK_DEFAULT
    slack = Range(0, int(expected * transient_bytes), int(high * transient_bytes))
    return rounding(live_tensors, expandable_segments) + slack
