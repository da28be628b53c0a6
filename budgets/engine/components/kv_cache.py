"""KV cache and recurrent state, per layer kind (models/layers.py), per layout.

Every layer of the device's range caches by its mixer: full attention and MLA keep every position, sliding and
chunked layers at most their window, linear-attention and Mamba layers a fixed state per sequence, layers
without attention nothing (PagedAttention §3 for the per-token bytes; vLLM's `KVCacheSpec`s for the kinds).

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
from functools import lru_cache

from ..dtypes import nbytes
from ..models.layers import STATE_KINDS, Mixer, layer_mixers
from ..models.spec import ModelSpec


@lru_cache(maxsize=4096)
def stage_mixers(spec: ModelSpec, first: int, layers: int) -> tuple[tuple[Mixer, int], ...]:
    """(mixer, layer count) over the device's layers [first, first + layers). Cached by the spec, whose hash is
    computed once, rather than by its runs, whose hash is not."""
    return layer_mixers(spec.runs, first, first + layers)


@lru_cache(maxsize=4096)
def kv_bytes_per_token(spec: ModelSpec, tensor: int, first: int, layers: int, precision: str) -> int:
    """Bytes one more token adds to the cache of one sequence on the device (every layer that keeps positions,
    sliding ones included: the figure before any window applies)."""
    per = sum(m.kv_elements_per_token(tensor) * n for m, n in stage_mixers(spec, first, layers))
    return int(per * nbytes(precision))


@lru_cache(maxsize=4096)
def state_bytes_per_sequence(spec: ModelSpec, tensor: int, first: int, layers: int, precision: str) -> int:
    """Fixed bytes per sequence as vLLM pages them: the recurrent states of linear-attention and Mamba layers in the
    model dtype (`mamba_cache_dtype="auto"`, vllm-0.11.0/config/cache.py:96,100)."""
    per = sum(m.state_elements_per_sequence(tensor) * n for m, n in stage_mixers(spec, first, layers))
    return int(per * nbytes(precision))


def generate_state_bytes(mixer: Mixer, sequences: int, precision: str | float) -> float:
    """One layer's recurrent state in a transformers cache: transformers 5.24 cache_utils.py `LinearAttentionLayer`
    keeps the conv state as `zeros(b, channels, kernel)` in the model dtype (the whole kernel, where vLLM keeps
    kernel − 1 positions) and the recurrent/SSM state as the scans return it, fp32 (measured:
    benchmarks/mixers/ssm.py, benchmarks/mixers/linear_attention.py). 0 for a layer without one."""
    if mixer.kind not in STATE_KINDS:
        return 0.0
    d = nbytes(precision) if isinstance(precision, str) else precision
    return sequences * (generate_conv_state_elements(mixer) * d + mixer.recurrent_state * 4)


def generate_conv_state_elements(mixer: Mixer) -> int:
    """Elements of one sequence's conv state in a transformers cache: channels × the whole kernel."""
    if mixer.kernel > 1:
        return mixer.conv_state // (mixer.kernel - 1) * mixer.kernel
    return mixer.conv_state


@lru_cache(maxsize=4096)
def generate_state_bytes_per_sequence(spec: ModelSpec, tensor: int, first: int, layers: int, precision: str) -> int:
    """Fixed bytes per sequence in a transformers cache over the device's layers (`generate_state_bytes`)."""
    per = sum(generate_state_bytes(m, 1, precision) * n / tensor for m, n in stage_mixers(spec, first, layers))
    return int(per)


def kv_cache_bytes(
    spec: ModelSpec,
    tensor: int,
    first: int,
    layers: int,
    precision: str,
    layout: str,
    tokens: int,
    sequences: int,
    block_tokens: int = 16,
    window: bool = True,
) -> int:
    """Bytes of K and V (and recurrent state) for `sequences` sequences of `tokens` positions under a layout, in a
    transformers generate cache."""
    if layout == "paged":
        tokens = math.ceil(tokens / block_tokens) * block_tokens
    per = 0
    for m, n in stage_mixers(spec, first, layers):
        kept = m.cached_positions(tokens) if window or m.kind not in ("sliding", "chunked") else tokens
        per += m.kv_elements_per_token(tensor) * kept * n
    d = nbytes(precision)
    states = generate_state_bytes_per_sequence(spec, tensor, first, layers, precision)
    return int(per * d * sequences) + states * sequences


def dynamic_growth_transient(
    spec: ModelSpec, tensor: int, first: int, layers: int, precision: str, tokens: int, sequences: int
) -> int:
    """The extra copy torch.cat makes of one layer's K (or V) when the dynamic cache grows: the largest layer's."""
    mixers = stage_mixers(spec, first, layers)
    halves = [m.kv_elements_per_token(tensor) / (1 if m.kind == "mla" else 2) for m, _ in mixers]
    return int(max(halves, default=0) * nbytes(precision) * tokens * sequences)


def describe_layers(spec: ModelSpec) -> str:
    """The layer kinds in words, for the budget's assumptions."""
    counts: dict[str, int] = {}
    for m, n in layer_mixers(spec.runs, 0, spec.num_layers):
        counts[m.describe()] = counts.get(m.describe(), 0) + n
    return "; ".join(f"{n} × {what}" for what, n in counts.items())
