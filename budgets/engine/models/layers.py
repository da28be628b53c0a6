"""The per-layer model: a decoder is a list of runs of identical layers, each a token mixer (attention or a
recurrent state) and an MLP. One formula per mixer kind gives what a layer caches while serving:

| kind | cached per token (elements) | cached per sequence (elements) |
|---|---|---|
| full (MHA/GQA/MQA) | kv_heads/t × (head_dim + v_head_dim) | — |
| sliding, chunked | the same, for at most `window` positions | — |
| mla (DeepSeek latent) | kv_lora_rank + rope dim (+ the V3.2 indexer key), not split by t | — |
| linear (Gated DeltaNet, KDA, lightning) | — | (conv state + recurrent state) / t |
| mamba (Mamba1, Mamba2) | — | (conv state + SSM state) / t |
| cross (encoder tokens) | — | encoder tokens × kv_heads/t × 2 × head_dim |
| none (NAS layers without attention) | — | — |

The rules are vLLM's `KVCacheSpec`s (vllm-0.11.0/v1/kv_cache_interface.py: `FullAttentionSpec.page_size_bytes`
:64-66 is 2 × block × kv_heads × head_size × dtype; `MLAAttentionSpec` one latent of `head_size` =
kv_lora_rank + qk_rope_head_dim per token, `use_mla` → one KV head unsplit, `config/model.py` get_num_kv_heads;
`MambaSpec.page_size_bytes` the sum of the state shapes × dtypes from `model_executor/layers/mamba/mamba_utils.py`
`MambaStateShapeCalculator`). Heads per device follow vLLM's one rounding rule, `max(1, heads // t)`
(vllm-0.11.0/config/model.py:1179-1191); vLLM and Megatron refuse degrees that do not divide the heads (or
that the heads do not divide), so floor and ceiling never differ on a plan either accepts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

MixerKind = Literal["full", "sliding", "chunked", "mla", "linear", "mamba", "cross", "none"]
MlpKind = Literal["dense", "moe", "none"]
# kinds with a fixed state per sequence
STATE_KINDS: frozenset[str] = frozenset({"linear", "mamba"})


def heads_per_device(heads: int, tensor: int) -> int:
    """Heads of one kind on a device under tensor degree t: vLLM's `max(1, heads // t)`."""
    return max(1, heads // tensor) if heads else 0


@dataclass(frozen=True, slots=True)
class Mixer:
    """A layer's token mixer and what it caches."""

    kind: MixerKind
    heads: int = 0  # query heads (attention kinds)
    kv_heads: int = 0
    head_dim: int = 0  # query/key head size (MLA: the cached latent's head size is latent_dim + rope_dim)
    v_head_dim: int = 0  # 0 → head_dim
    window: int = 0  # sliding window or chunk, tokens
    latent_dim: int = 0  # MLA kv_lora_rank
    rope_dim: int = 0  # MLA qk_rope_head_dim
    index_dim: int = 0  # MLA V3.2 indexer key cached per token (elements, bytes in the cache dtype)
    conv_state: int = 0  # linear / mamba: convolution state elements per sequence (whole layer)
    recurrent_state: int = 0  # linear / mamba: recurrent (SSM) state elements per sequence (whole layer)
    sinks: bool = False  # learned attention sinks (gpt-oss): a per-head parameter, nothing cached
    # how the layer computes (read by the activation model, not by the cache rules): the recurrent variant
    # ("mamba1", "mamba2", "gated_delta", "kda"; "" for attention kinds) and its scan's shape. Gated DeltaNet:
    # heads = value heads, kv_heads = key heads, head_dim = key head size, v_head_dim = value head size; KDA:
    # heads × head_dim for q, k and v; Mamba2: heads × head_dim = inner; MLA: q_rank = q_lora_rank, and V3.2's
    # indexer `index_heads` × `index_dim`
    variant: str = ""
    inner: int = 0  # mamba intermediate size (d_inner)
    state_dim: int = 0  # mamba SSM state size per channel (d_state)
    groups: int = 0  # mamba2 B/C groups (n_groups)
    chunk: int = 0  # chunked scan's chunk length (mamba2 chunk_size; 64 for the delta rules)
    kernel: int = 0  # causal conv1d kernel
    rank: int = 0  # mamba1 dt_rank
    q_rank: int = 0  # MLA q_lora_rank (0: a plain q projection)
    index_heads: int = 0  # MLA V3.2 indexer heads
    index_topk: int = 0  # MLA V3.2 positions each query keeps (index_topk)
    gated_norm: bool = False  # Mamba2: the gated RMSNorm over the inner width (else y · silu(gate))
    multipliers: bool = False  # Falcon-H1's µP multipliers around the Mamba2 mixer (copies of its input and output)
    split_proj: bool = False  # Gated DeltaNet: separate in_proj_qkv / z / b / a (Qwen3.5), else fused qkvz + ba

    @property
    def value_dim(self) -> int:
        return self.v_head_dim or self.head_dim

    def kv_elements_per_token(self, tensor: int = 1) -> int:
        """Elements this layer caches per token on one device."""
        if self.kind == "mla":
            return self.latent_dim + self.rope_dim + self.index_dim
        if self.kind in ("full", "sliding", "chunked"):
            return heads_per_device(self.kv_heads, tensor) * (self.head_dim + self.value_dim)
        return 0

    def cached_positions(self, tokens: int) -> int:
        """Positions of one sequence of `tokens` this layer keeps (sliding and chunked: at most the window)."""
        if self.kind in ("full", "mla"):
            return tokens
        if self.kind in ("sliding", "chunked"):
            return min(tokens, self.window) if self.window else tokens
        return 0

    def state_elements_per_sequence(self, tensor: int = 1) -> int:
        """Fixed elements per sequence on one device (recurrent layers: conv + SSM state, split by t)."""
        if self.kind in STATE_KINDS:
            return -(-(self.conv_state + self.recurrent_state) // tensor)
        return 0

    def describe(self) -> str:
        if self.kind == "mla":
            extra = f" + {self.index_dim} indexer" if self.index_dim else ""
            return f"MLA latent {self.latent_dim} + rope {self.rope_dim}{extra} per token"
        if self.kind in ("full", "sliding", "chunked", "cross"):
            size = f"{self.kv_heads} KV heads × {self.head_dim}" + (
                f"/{self.value_dim}" if self.value_dim != self.head_dim else ""
            )
            return f"{self.kind} attention, {size}" + (f", window {self.window}" if self.window else "")
        if self.kind in STATE_KINDS:
            return f"{self.kind} state {self.conv_state:,} conv + {self.recurrent_state:,} recurrent per sequence"
        return "no attention"


@dataclass(frozen=True, slots=True)
class Mlp:
    """A layer's MLP: dense, mixture of experts, or none."""

    kind: MlpKind
    intermediate: int = 0  # dense width, or per routed expert
    experts: int = 1
    experts_per_token: int = 1
    shared_intermediate: int = 0  # shared experts' total width (0: none)


@dataclass(frozen=True, slots=True)
class LayerRun:
    """`count` consecutive identical layers, with the parameters of one of them."""

    count: int
    mixer: Mixer
    mlp: Mlp
    params: int = 0  # parameters of one layer (mixer, MLP, norms); 0 on runs derived from the flat fields
    side: Mixer | None = None  # a second mixer beside the first on the same input (Falcon-H1's Mamba2)


@lru_cache(maxsize=4096)
def layer_mixers(runs: tuple[LayerRun, ...], start: int, stop: int) -> tuple[tuple[Mixer, int], ...]:
    """(mixer, layers) of the layers in [start, stop), merged by mixer."""
    counts: dict[Mixer, int] = {}
    at = 0
    for run in runs:
        lo, hi = max(at, start), min(at + run.count, stop)
        if hi > lo:
            for mixer in (run.mixer, run.side) if run.side else (run.mixer,):
                counts[mixer] = counts.get(mixer, 0) + hi - lo
        at += run.count
    return tuple(counts.items())


def compress(per_layer: Sequence[tuple[Mixer, Mlp, int, Mixer | None]]) -> tuple[LayerRun, ...]:
    """Runs of identical consecutive layers from a per-layer list of (mixer, mlp, params, side mixer)."""
    runs: list[LayerRun] = []
    for mixer, mlp, params, side in per_layer:
        last = runs[-1] if runs else None
        if last and (last.mixer, last.mlp, last.params, last.side) == (mixer, mlp, params, side):
            runs[-1] = LayerRun(last.count + 1, mixer, mlp, params, side)
        else:
            runs.append(LayerRun(1, mixer, mlp, params, side))
    return tuple(runs)
