"""The token mixers the attention operators of `activations.py` do not describe: DeepSeek's latent attention (`mla`),
Mamba layers (`ssm`) and linear attention (`linear_attention`), each modelled operator by operator in its own module
and measured there (`benchmarks/mixers/`). This module hands them one layer's shape on one device and answers for
the activation model: the mixer's transient at inference, what it saves for training, its training-forward and
backward transients. A mixer kind with no module here is priced by the attention operators.
"""

from __future__ import annotations

from dataclasses import replace

from ..models.layers import Mixer, heads_per_device
from . import kv_cache, linear_attention, mla, ssm

MODELLED = frozenset({"mla", "mamba", "linear"})


def on_device(mixer: Mixer, tensor: int) -> Mixer:
    """The mixer's heads on one device under tensor degree `tensor` (vLLM's and Megatron's split of the heads)."""
    if tensor == 1:
        return mixer
    return replace(
        mixer,
        heads=heads_per_device(mixer.heads, tensor),
        kv_heads=heads_per_device(mixer.kv_heads, tensor),
        index_heads=heads_per_device(mixer.index_heads, tensor),
    )


def _topk(mixer: Mixer) -> int:
    return mixer.index_topk or 2048


def forward_transient(
    mixer: Mixer, b: int, s: int, k: int, h: int, d: float, cuda: bool, attention: str = "sdpa"
) -> float:
    """Inference: the peak above the mixer's entry, as generate calls it (prefill s = k; decode s = 1). The
    recurrent states a prefill writes are the KV component's, not counted here. `attention` (the attention
    implementation) matters to MLA only: eager or SDPA."""
    if mixer.kind == "mla":
        return mla.forward_transient(mixer, b, s, k, h, int(d), _topk(mixer), cuda, attention=attention)
    if mixer.kind == "mamba":
        if s == 1 and k > 1:
            return ssm.decode_transient(mixer, b, h, d, mixer.gated_norm, mixer.multipliers)
        return ssm.forward_transient(mixer, b, s, h, d, mixer.gated_norm, new_state=False, falcon=mixer.multipliers)
    if mixer.kind == "linear":
        if s == 1 and k > 1:
            return linear_attention.decode_transient(mixer, b, h, d)
        # the cache's conv state, allocated before the scan, is the KV component's (kv_cache.state_bytes_per_sequence)
        conv = b * kv_cache.generate_conv_state_elements(mixer) * d
        return linear_attention.forward_transient(mixer, b, s, h, d) - conv
    raise ValueError(f"no mixer model for {mixer.kind}")


def saved(mixer: Mixer, b: int, s: int, h: int, d: float, cuda: bool, attention: str = "sdpa") -> float:
    """Training: what the mixer's forward keeps for backward (its input excluded)."""
    if mixer.kind == "mla":
        return mla.saved(mixer, b, s, h, int(d), _topk(mixer), cuda, attention=attention)
    if mixer.kind == "mamba":
        return ssm.saved(mixer, b, s, h, d, mixer.gated_norm, mixer.multipliers)
    if mixer.kind == "linear":
        return linear_attention.saved(mixer, b, s, h, d)
    raise ValueError(f"no mixer model for {mixer.kind}")


def backward_transient(mixer: Mixer, b: int, s: int, h: int, d: float, cuda: bool) -> float:
    """Training: the peak of the mixer's backward above its start (its saved tensors, the output's gradient and its
    input); 0 where the mixer's module does not model it (MLA: its backward is q/k/v-sized, below the MLP's)."""
    if mixer.kind == "mamba":
        return ssm.backward_transient(mixer, b, s, h, d, mixer.gated_norm, mixer.multipliers)
    if mixer.kind == "linear":
        return linear_attention.backward_transient(mixer, b, s, h, d)
    return 0.0


def forward_extra(mixer: Mixer, b: int, s: int, h: int, d: float, cuda: bool, attention: str = "sdpa") -> float:
    """Training: the mixer forward's peak beyond what it keeps (V3.2's no-grad indexer broadcast, say)."""
    if mixer.kind in ("mamba", "linear"):
        return 0.0  # its forward peak is within what it keeps plus the scan's transients, below the layer's saved
    if mixer.kind == "mla":
        topk = _topk(mixer)
        return mla.train_forward_transient(mixer, b, s, h, int(d), topk, cuda, attention) - mla.saved(
            mixer, b, s, h, int(d), topk, cuda, attention
        )
    raise ValueError(f"no mixer model for {mixer.kind}")
