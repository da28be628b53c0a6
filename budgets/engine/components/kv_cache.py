"""KV cache: 2 × layers × kv_heads × head_dim × bytes per token (PagedAttention §3), per layout.

- dynamic (transformers DynamicCache): grows by torch.cat, so while layer i grows there is a
  transient second copy of that layer's K (then V) at the new length. Generation writes
  prompt + output − 1 positions (the last token is never fed back).
- contiguous (static cache / preallocated): every slot holds the longest request.
- paged (vLLM): blocks of `kv_block_tokens`; at most one partly filled block per sequence.
Sliding-window layers (Gemma 2/3, Mistral v0.1) keep at most `window` positions, except in a dynamic
cache during prefill: DynamicSlidingWindowLayer.update stores a view of the last window − 1 positions
of the full concatenation, so the whole prompt-length storage stays alive until the next step.
"""

from __future__ import annotations

import math

from ..dtypes import nbytes
from ..models.spec import ModelSpec


def kv_bytes_per_token_per_layer(spec: ModelSpec, kv_heads: int, precision: str) -> float:
    return 2 * kv_heads * spec.head_dim * nbytes(precision)


def kv_bytes_per_token(spec: ModelSpec, kv_heads: int, layers: int, precision: str) -> int:
    """Bytes per token for `layers` layers, ignoring sliding windows (the full-attention figure)."""
    return int(kv_bytes_per_token_per_layer(spec, kv_heads, precision) * layers)


def cached_positions(spec: ModelSpec, layers: int, tokens: int, window: bool = True) -> int:
    """Sum over the device's layers of the positions each layer keeps for one sequence."""
    if window and spec.sliding_window and spec.num_sliding_layers and tokens > spec.sliding_window:
        sliding = round(spec.num_sliding_layers * layers / spec.num_layers)
        return (layers - sliding) * tokens + sliding * spec.sliding_window
    return layers * tokens


def kv_cache_bytes(
    spec: ModelSpec,
    kv_heads: int,
    layers: int,
    precision: str,
    layout: str,
    tokens: int,
    sequences: int,
    block_tokens: int = 16,
    window: bool = True,
) -> int:
    """Bytes of K and V for `sequences` sequences of `tokens` positions under a layout."""
    if layout == "paged":
        tokens = math.ceil(tokens / block_tokens) * block_tokens
    per = kv_bytes_per_token_per_layer(spec, kv_heads, precision)
    return int(per * cached_positions(spec, layers, tokens, window) * sequences)


def dynamic_growth_transient(spec: ModelSpec, kv_heads: int, precision: str, tokens: int, sequences: int) -> int:
    """The extra copy torch.cat makes of one layer's K (or V) when the dynamic cache grows."""
    return int(kv_heads * spec.head_dim * nbytes(precision) * tokens * sequences)
