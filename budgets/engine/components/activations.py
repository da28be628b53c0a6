"""Activations and intermediates, operator by operator: the general model by operator class (norm,
attention, MLP / experts, loss, masks, position tables), whose variants follow the architecture
features on `ModelSpec`. What a library's loop allocates on top (generate's id copies, logits
processors) is its implementation profile's (`budgets/engine/profiles/`).

Shapes: b sequences, s positions computed now, k positions attended to, h hidden, q = heads × head_dim
and kv = kv_heads × head_dim (per device under tensor parallelism), I the MLP width, V the vocabulary,
d the compute dtype's bytes. Every function returns bytes.

Cross-check: for a GPT-style layer with dropout these reduce to Korthikanti et al. (arXiv:2205.05198,
Table 2) `sbh(34 + 5as/h)`; the real HF operators differ (gated MLPs keep four b·s·I tensors, RMSNorm
upcasts to fp32, no dropout masks when dropout is 0, SDPA keeps only the log-sum-exp).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import NamedTuple

from .. import frameworks
from ..models.spec import ModelSpec
from . import mixers
from .layer_views import ATTENTION_KINDS, view_widths, views

# activation functions whose HF implementation is a chain of elementwise python ops
PYTHON_GELU = ("gelu_new", "gelu_fast", "gelu_pytorch_tanh_python")


class Shape(NamedTuple):
    """One layer's tensor shapes on a device (a named tuple: several are built per estimate, and a tuple is built
    several times faster than a frozen dataclass of 13 fields)."""

    b: int  # sequences
    s: int  # positions computed in this forward
    k: int  # positions attended to (cache + new)
    h: int  # hidden size
    q: int  # query width on this device (heads × head_dim)
    kv: int  # key/value width on this device
    heads: int  # attention heads on this device
    inter: int  # MLP width on this device (dense)
    vocab: int  # vocabulary on this device
    d: float  # compute dtype bytes
    # softmax(x, dtype=float32) of a half-precision x first makes an fp32 copy of x: at::softmax
    # (aten/src/ATen/native/SoftMax.cpp) takes the copy-free half_to_float path only for fp16 on CUDA
    softmax_copy: bool = True
    cuda: bool = False  # dropout keeps a bool mask there, and SDPA its fused kernels (`dropout_mask_bytes`)
    tensor: int = 1  # tensor-parallel degree the widths above are split by

    @property
    def tokens(self) -> int:
        return self.b * self.s


# Architecture features (ModelSpec fields, resolved by the HF adapter from transformers' modeling files,
# models/hf_config.py `_FAMILY_FEATURES`): norm_weight_offset, rope_per_layer_type, one_mask_with_window,
# sliding_mask_unread, router_weights_fp32, fused_qkv, rope_by_cat, mlp_input_freed, attn_output_kept.


def _norm_forward_transient(spec: ModelSpec, x: Shape) -> float:
    """RMSNorm upcasts to fp32: copy, pow, product (LlamaRMSNorm); LayerNorm is one kernel."""
    t = x.tokens * x.h
    if spec.norm == "layer":
        return t * x.d
    if x.d < 4 and not spec.norm_weight_offset:
        return t * (4 + 4 + x.d)  # fp32 copy + (pow | product) + cast back
    # fp32, or Gemma's (1 + w): two fp32 tensors at a time (copy + pow | copy + product | product + ·(1 + w))
    return t * (4 + 4)


def rope_tables_bytes(spec: ModelSpec, rows: int, d: float) -> float:
    """cos and sin (rows × rotated dims each), or the learned position embeddings (rows × h)."""
    if spec.learned_positions:
        return rows * spec.hidden_size * d
    pairs = 2 if spec.rope_per_layer_type else 1
    return pairs * 2 * rows * spec.rope_dim * d


def attention_masks(
    spec: ModelSpec, x: Shape, attention: str, full_positions: int, batch_broadcast: bool = False
) -> tuple[float, float]:
    """(masks alive for the whole forward, the per-call converted mask of a sliding SDPA layer).

    Eager: additive float masks (b, 1, s, k), the full causal one and, for models that build a
    mapping and have sliding layers, the sliding one. SDPA: the full causal mask is skipped (is_causal)
    but a sliding mask is materialised (bool, batch-broadcast) once kv_length ≥ window (masking_utils
    `_ignore_causal_mask_sdpa`), and torch's SDPA converts a bool mask into an additive one in the
    query dtype on every call (aten attention.cpp `convert_boolean_attn_mask`)."""
    window = spec.sliding_window if spec.num_sliding_layers else 0
    # in decode the sliding layers attend to window positions, in prefill to the prompt, not to a static
    # cache's full length (DynamicSlidingWindowLayer / StaticSlidingWindowLayer.get_mask_sizes)
    k_sliding = min(x.k, max(x.s, window)) if window else x.k
    two = bool(window) and not spec.one_mask_with_window
    if attention == "eager":
        if two:
            return x.b * x.s * (full_positions + k_sliding) * x.d, 0
        return x.b * x.s * full_positions * x.d, 0
    if window and k_sliding >= window:
        # batch_broadcast: no 2D padding mask reaches the model (generate drops an all-ones one,
        # generation/utils.py; a training step without a collator mask), so the mask functions never
        # read the batch index and sdpa_mask returns the (1, 1, s, k) bool mask expanded over the batch.
        # A compileable (static) cache has generate build the masks up front and `.contiguous()` them
        # (generation/utils.py prepare_inputs_for_generation): b·s·k. SDPA's conversion is always b·s·k
        rows = x.s if batch_broadcast else x.b * x.s
        return rows * k_sliding * 1, x.b * x.s * k_sliding * x.d
    return 0, 0


def unread_masks(spec: ModelSpec, x: Shape, attention: str, full_positions: int, batch_broadcast: bool) -> float:
    """A mask the model builds but no layer reads (sliding_mask_unread): alive through the model forward
    only, never a layer input (so never a checkpoint input). Eager: an additive b·s·k mask; SDPA: the
    bool mask (batch-broadcast without a padding mask, as in `attention_masks`)."""
    if not spec.sliding_mask_unread:
        return 0
    if attention == "eager":
        return x.b * x.s * full_positions * x.d
    return (x.s if batch_broadcast else x.b * x.s) * full_positions


def _moe_forward_transient(spec: ModelSpec, x: Shape) -> float:
    """transformers 5 runs routed experts batched (`experts_implementation` defaults to "grouped_mm",
    modeling_utils.get_correct_experts_implementation, on every device; its fallback allocates the same
    outputs): integrations/moe.py grouped_mm_experts_forward materialises all S = tokens × k routed rows
    at once. Two high points: `act(gate) * up` (gathered input S·h, gate_up S·2I, act(gate) S·I,
    product S·I) and `weighted_out[inv_perm]` (gathered input, kept to the end, down output, weighted
    output, its un-permuted copy: 4·S·h), the larger when I < 3h/4."""
    if spec.moe_all_experts:
        return _all_experts_forward_transient(spec, x)
    tok = x.tokens
    k = spec.experts_per_token
    e_int = spec.expert_intermediate_size
    rows = tok * k
    w = 4 if spec.router_weights_fp32 else x.d  # routing weights' dtype
    weighted = max(w, x.d)  # the weighted down output and its un-permuted copy
    # router logits (kept by `_, w, idx = self.gate(...)`), top-k weights (w) + indices int64; in the
    # experts: sorted ids and perm (int64), the sorted sample weights (w) and the histc input (fp32 on
    # CPU, int32 on CUDA: 4 B either way); inv_perm (int64) only from the un-permute on
    routing = tok * spec.num_experts * x.d + tok * k * (w + 8) + rows * (8 + 8 + w + 4)
    grouped = rows * max((x.h + 4 * e_int) * x.d, x.h * (2 * x.d + 2 * weighted) + 8)
    if spec.moe_clamped_gate:
        # gpt-oss (integrations/moe.py:480, :508 bias gathers `gate_up_proj_bias[expert_ids_g]`; modeling_gpt_oss.py
        # `_apply_gate`): at `(up + 1) * glu` the gathered input (h), the gate_up bias rows and output (2I each), the
        # clamped gate and up, glu, up + 1 and the product (I each); at the down projection its bias rows and output
        # (h each) beside the gated rows (I) and the gathered input
        grouped = rows * max((x.h + 9 * e_int) * x.d, (3 * x.h + e_int) * x.d, x.h * (2 * x.d + 2 * weighted) + 8)
    if not spec.shared_expert_intermediate_size:
        return routing + grouped
    # Qwen2MoeSparseMoeBlock: the shared expert runs first; its output (tok·h) is held during the experts
    shared = 3 * tok * spec.shared_expert_intermediate_size * x.d
    return max(shared, tok * x.h * x.d + routing + grouped)


def _all_experts_forward_transient(spec: ModelSpec, x: Shape) -> float:
    """Llama 4's MoE (modeling_llama4.py Llama4TextMoe.forward, Llama4TextExperts.forward): the router's logits,
    scattered scores and their sigmoid (tok × E), then `routed_in = hidden.repeat(E, 1) * scores` (E·tok rows of h,
    two alive at the multiply), kept to the end of the forward; in the experts `gate_up = bmm(...)` (E·tok × 2I),
    act(gate) and up·act(gate) (E·tok × I each), then the down bmm's output (E·tok × h) while gate_up and the
    product are alive; then the shared expert runs beside routed_in and the routed output."""
    tok, e, e_int = x.tokens, spec.num_experts, spec.expert_intermediate_size
    rows = e * tok
    router = tok * e * (3 * x.d + 4) + tok * spec.experts_per_token * (x.d + 8)
    routed_in = rows * x.h * x.d
    experts = routed_in + rows * max((2 * e_int + 2 * e_int) * x.d, (2 * e_int + e_int + x.h) * x.d)
    shared = 2 * routed_in + 3 * tok * spec.shared_expert_intermediate_size * x.d
    return router + max(2 * routed_in, experts, shared)


def _mlp_forward_transient(spec: ModelSpec, x: Shape) -> float:
    if spec.is_moe:
        return _moe_forward_transient(spec, x)
    ti = x.tokens * x.inter * x.d
    if spec.mlp == "gated" and spec.fused_gate_up:
        # fused gate_up: gate and up are views of one tok·2I output, alive whole through up * act(gate)
        return 4 * ti
    if spec.mlp == "gated":
        return 3 * ti  # act(gate), up, act*up
    if spec.activation in PYTHON_GELU:
        return 4 * ti  # fc1 output + the python gelu's temporaries
    return 2 * ti  # fc1 output + activation


def attention_scores_bytes(x: Shape, dtype_bytes: float) -> float:
    return x.b * x.heads * x.s * x.k * dtype_bytes


def _attention_forward_transient(
    spec: ModelSpec, x: Shape, attention: str, gqa_copies: bool, mask_copy: float = 0
) -> float:
    """Transient of one attention block with a KV cache (excluding the cache it reads).

    The k/v projections live only until the cache update: DynamicLayer.update concatenates them into
    new cache tensors and StaticLayer.update copies them in, and the attention locals are rebound to
    the cache tensors (cache_utils), so from then on only the roped q is alive besides the cache, and
    with a fused projection (fused_qkv) its whole output. `mask_copy`: the converted sliding mask
    alive during an SDPA call."""
    tok = x.tokens
    qkv = tok * (x.q + 2 * x.kv) * x.d
    rope = 2 * tok * x.q * x.d  # q·cos, rotate_half(q)·sin before the sum
    if spec.rope_fp32_interleaved:
        # modeling_cohere.py apply_rotary_pos_emb: fp32 copies of q and k (both alive to the end), then per tensor
        # t·cos, the stacked halves of rotate_half (after the negated half) and rotate_half(t)·sin before the sum;
        # roping k, the roped q (fp32) is alive too
        rope = 4 * tok * max(4 * x.q + x.kv, 2 * x.q + 4 * x.kv)
    if x.k == x.s:
        # prefill from an empty cache: while q and k are roped this layer's cache is not written yet, though the
        # KV component holds it; its k and v are the projection outputs counted here
        rope -= tok * 2 * x.kv * x.d
    q = tok * x.q * x.d  # roped q, held by the attention forward until it returns
    fused = spec.fused_qkv
    held = (qkv if fused else 0) + (q if (spec.learned_positions == 0 or not fused) else 0)
    out = tok * x.q * x.d
    o_proj = held + out + tok * x.h * x.d  # o_proj output while q and its input are alive
    rep = 2 * x.b * x.heads * x.k * spec.head_dim * x.d if (gqa_copies and x.kv < x.q) else 0
    # one KV head on this device (MQA): repeat_kv's expand(...).reshape(...) merges the size-1 head
    # dim with the stride-0 repeat dim, a view (modeling_llama.py repeat_kv); torch.matmul then
    # copies the expanded k (QK^T) and v (P·V) only for the duration of its bmm
    mqa_view = bool(rep) and x.kv == spec.head_dim
    if attention == "eager":
        # eager_attention_forward: QK^T then ·scale (both alive; soft-capping's /cap, tanh, ·cap and
        # + mask also two at a time), then softmax(dtype=float32) over the masked scores: its fp32
        # copy of a half input (softmax_copy) and the fp32 output; the output is not allocated yet
        upcast = 4 if (x.d < 4 and x.softmax_copy) else 0
        score_peak = attention_scores_bytes(x, max(2 * x.d, x.d + 4 + upcast))
        probs = attention_scores_bytes(x, x.d)
        pv = probs + 2 * out  # P·V output + its transpose(1, 2).contiguous() copy
        if mqa_view:
            one = rep / 2  # the matmul's contiguous copy of the expanded k or v
            inner = max(score_peak, one + attention_scores_bytes(x, x.d), pv, probs + one + out)
            return max(qkv + rope, held + inner, o_proj + probs)
        return max(qkv + rope, held + rep + max(score_peak, pv), o_proj + probs)
    # SDPA (CPU flash kernel, CUDA flash/efficient) writes its output in q's memory layout: for a
    # Llama-style roped q ([b, s, H, hd] underneath) the transpose(1, 2).contiguous() in
    # sdpa_attention_forward is free; for a q roped by torch.cat (rope_by_cat) it is a real copy
    lse = x.b * x.heads * x.s * 4
    copy = out if spec.rope_by_cat else 0
    core = held + rep + out + lse + max(mask_copy, copy)
    return max(qkv + rope, core, o_proj)


def view_shape(x: Shape, spec: ModelSpec) -> Shape:
    """`x` with the widths of a view's layer (`layer_views.views`)."""
    q, kv, heads, inter = view_widths(spec, x.tensor)
    if q == x.q and kv == x.kv and heads == x.heads and inter == x.inter:
        return x
    # positional construction: `dataclasses.replace` is several times slower (the estimate's hot path)
    return Shape(x.b, x.s, x.k, x.h, q, kv, heads, inter, x.vocab, x.d, x.softmax_copy, x.cuda, x.tensor)


def _gqa_copies(spec: ModelSpec, attention: str) -> bool:
    """Whether k and v are repeated to the query heads before attention: eager, or SDPA beyond its
    `enable_gqa` head sizes (the callers' `gqa_sdpa` rule: head_dim ≤ 256)."""
    return attention == "eager" or spec.head_dim > 256


def layer_forward_peak(
    spec: ModelSpec,
    x: Shape,
    attention: str,
    gqa_copies: bool,
    mask_copy: float,
    start: int,
    stop: int,
    unwritten: Callable[[int], float] | None = None,
    first_holds_embedding: bool = False,
) -> float:
    """The largest `inference_forward_transient` over the kinds of layer in [start, stop), each at its last layer.
    `unwritten(i)`: what the caller's other components hold for the layers from i on that does not exist yet while
    layer i − 1 runs (a dynamic cache filled layer by layer in prefill). With `first_holds_embedding`, a kind that
    is only the model's first layer reads the embedding output itself as its input: one hidden tensor less."""
    if not spec.layer_runs:
        return inference_forward_transient(spec, x, attention, gqa_copies, mask_copy)
    peaks = []
    for v in views(spec, start, stop):
        vx = view_shape(x, v.spec)
        peak = inference_forward_transient(v.spec, vx, attention, _gqa_copies(v.spec, attention), mask_copy)
        if unwritten is not None:
            peak -= unwritten(v.last)
        if first_holds_embedding and v.last == 1:
            peak -= vx.tokens * vx.h * vx.d
        peaks.append(peak)
    return max(peaks)


PerLayer = Callable[[ModelSpec, Shape, bool], float]  # (view spec, view shape, gqa_copies) → bytes


def layer_kinds(
    spec: ModelSpec, x: Shape, attention: str, start: int, stop: int
) -> list[tuple[int, ModelSpec, Shape, bool, int]]:
    """(layers, view spec, view shape, gqa_copies, first layer) for each kind of layer in [start, stop): what a
    per-layer formula is evaluated on (`layers_saved`, `layers_max`, or several at once by a caller)."""
    if not spec.layer_runs:
        return [(stop - start, spec, x, _gqa_copies(spec, attention), start)]
    return [
        (v.count, v.spec, view_shape(x, v.spec), _gqa_copies(v.spec, attention), v.first)
        for v in views(spec, start, stop)
    ]


def _per_view(
    spec: ModelSpec, x: Shape, attention: str, start: int, stop: int, per_layer: PerLayer
) -> list[tuple[int, float]]:
    """(layers, `per_layer(view spec, view shape, gqa_copies)`) for each kind of layer in [start, stop)."""
    kinds = layer_kinds(spec, x, attention, start, stop)
    return [(count, per_layer(view, vx, gqa)) for count, view, vx, gqa, _ in kinds]


def layers_saved(spec: ModelSpec, x: Shape, attention: str, start: int, stop: int, per_layer: PerLayer) -> float:
    """Σ over the layers in [start, stop) of `per_layer(view spec, view shape, gqa_copies)`."""
    return sum(count * value for count, value in _per_view(spec, x, attention, start, stop, per_layer))


def layers_max(spec: ModelSpec, x: Shape, attention: str, start: int, stop: int, per_layer: PerLayer) -> float:
    """max over the kinds of layer in [start, stop) of `per_layer(view spec, view shape, gqa_copies)`."""
    return max((value for _, value in _per_view(spec, x, attention, start, stop, per_layer)), default=0.0)


def _mixer_kind(spec: ModelSpec) -> str:
    """The kind of token mixer of a view (`layer_views`); a flat spec's layers are attention layers."""
    return spec.runs[0].mixer.kind if len(spec.layer_runs) == 1 else "full"


def _mlp_kind(spec: ModelSpec) -> str:
    return spec.runs[0].mlp.kind if len(spec.layer_runs) == 1 else "dense"


def inference_forward_transient(
    spec: ModelSpec, x: Shape, attention: str, gqa_copies: bool, mask_copy: float = 0
) -> float:
    """Peak bytes alive inside one decoder layer's forward, beyond weights, the KV cache and the
    model-level tensors. Alive throughout: the embedding output (the model forward's `inputs_embeds`),
    the layer input (held by the decoder loop; it is also the attention's residual) and the normed
    input; the MLP additionally sees the post-attention residual.

    A view's layer (`layer_views`) may have no mixer (Nemotron-NAS, Nemotron-H's MLP blocks) or no MLP
    (Nemotron-H's mixer blocks), and a cross-attention layer runs only with image states: without them
    `MllamaTextModel.forward` skips it (modeling_mllama.py: `if idx in self.cross_attention_layers and
    cross_attention_states is None: continue`), so it allocates nothing."""
    kind, mlp_kind = _mixer_kind(spec), _mlp_kind(spec)
    if kind == "cross":
        return 0.0
    tok = x.tokens
    hidden = tok * x.h * x.d
    # eager attention returns its probabilities; the decoder layer keeps them (`hidden, _ = attn(...)`)
    # until the layer returns, so they are still alive during the MLP
    kept_probs = attention_scores_bytes(x, x.d) if attention == "eager" and kind in ATTENTION_KINDS | {"mla"} else 0
    mlp_hidden = 4 * hidden  # embeds, layer input, residual, normed input
    if spec.mlp_input_freed:
        mlp_hidden -= hidden
    if spec.attn_output_kept:
        mlp_hidden += hidden
    parts = [3 * hidden + _norm_forward_transient(spec, x)]
    if kind != "none":
        parts.append(3 * hidden + _mixer_forward_transient(spec, x, attention, gqa_copies, mask_copy))
    if mlp_kind != "none":
        parts.append(mlp_hidden + _mlp_forward_transient(spec, x) + kept_probs)
    return max(parts)


def _mixer_forward_transient(spec: ModelSpec, x: Shape, attention: str, gqa_copies: bool, mask_copy: float) -> float:
    """The token mixer's transient: the attention operators, or a recurrent or latent mixer's own (`mixers`)."""
    mixer, side = spec.runs[0].mixer, spec.runs[0].side
    if len(spec.layer_runs) == 1 and mixer.kind in mixers.MODELLED:
        main = mixers.forward_transient(mixers.on_device(mixer, x.tensor), x.b, x.s, x.k, x.h, x.d, x.cuda, attention)
    else:
        main = _attention_forward_transient(spec, x, attention, gqa_copies, mask_copy)
    if side is None or len(spec.layer_runs) != 1:
        return main
    # Falcon-H1 (modeling_falcon_h1.py FalconH1DecoderLayer.forward): the Mamba2 mixer runs first; the attention then
    # runs beside its scaled output and the attention-scaled input (`mamba_out * ssm_out_multiplier`,
    # `hidden_states * attention_in_multiplier`), two hidden-sized tensors
    first = mixers.forward_transient(mixers.on_device(side, x.tensor), x.b, x.s, x.k, x.h, x.d, x.cuda)
    return max(first, main + 2 * x.tokens * x.h * x.d)


def training_forward_extra(spec: ModelSpec, x: Shape, attention: str = "sdpa") -> float:
    """A layer's training-forward peak beyond what it keeps, where a mixer module models one (`mixers`): the mixer's
    peak over its saved tensors, less the layer's MLP block, which has saved nothing yet at that instant."""
    mixer = spec.runs[0].mixer
    if len(spec.layer_runs) == 1 and mixer.kind in mixers.MODELLED:
        extra = mixers.forward_extra(mixers.on_device(mixer, x.tensor), x.b, x.s, x.h, x.d, x.cuda, attention)
        return max(0.0, extra - mlp_block_saved(spec, x)) if extra else 0.0
    return 0.0


def model_level_inference(
    spec: ModelSpec, x: Shape, attention: str, mask_positions: int, batch_broadcast: bool = False
) -> float:
    """Tensors alive for the whole forward: position embeddings (cos, sin), the attention masks and
    the token ids."""
    tok = x.tokens
    rope = rope_tables_bytes(spec, tok, x.d)
    masks, _ = attention_masks(spec, x, attention, mask_positions, batch_broadcast)
    masks += unread_masks(spec, x, attention, mask_positions, batch_broadcast)
    ids = tok * 8 * 2  # input_ids, position ids (int64)
    return rope + masks + ids


def sampling_scores(b: int, vocab: int, d: float) -> float:
    """Between two forwards: the last position's logits (d) and the fp32 scores the next token is
    chosen from (4 B each); a library's logits processors add to this (`profiles/`)."""
    return b * vocab * (d + 4)


# --- training ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Kept:
    """Which layer inputs autograd keeps for backward, by what is trained. A matmul saves its input only
    for its weight's gradient and a multiply its other operand only for that operand's gradient
    (pytorch tools/autograd/gen_variable_type.py `guard_for`: a saved input is guarded by
    `grad_fn->should_compute_output(...)`), so a frozen projection keeps no input and a frozen norm
    weight no normalized tensor; a LoRA adapter's A keeps the projection input and its B A's output
    (rank per token). Measured (torch 2.13 CPU, one bf16 LlamaDecoderLayer, 64 tokens): full minus
    frozen + LoRA on q/v = both norms' normalized tensors + the post-attention norm output + the
    down_proj input − the two A outputs, to the byte. bitsandbytes before 0.43.2 keeps every 4-bit
    linear's input (`components/training.py` BNB_KEEPS_INPUT_BEFORE)."""

    norm_weights: bool = True
    qkv_input: bool = True  # input norm output, read by q/k/v
    mlp_input: bool = True  # post-attention norm output, read by gate/up (fc1)
    down_input: bool = True  # the MLP product (activation output), read by down (fc2)
    o_input: bool = True  # the attention output as o_proj reads it (a copy in some implementations)
    adapter_outputs: int = 0  # per token: LoRA rank × adapted linears
    dropout_bytes: float = 0  # per token: LoRA dropouts' outputs and masks, or the adapters' input copies
    # (components/training.py `lora_input_bytes`)
    adapted: frozenset[str] = frozenset()  # the projections that carry a LoRA adapter
    adapter_d: float | None = None  # the adapters' dtype bytes where it is not the compute's (PEFT's fp32 adapters)


ALL_TRAINED = Kept()


def _rms_saved_per_element(spec: ModelSpec, d: float, output_saved: bool, weight_trained: bool = True) -> float:
    """Bytes an RMSNorm keeps for backward per element: the fp32 input (x.to(float32); x itself in
    fp32) and, for a trained weight, what the weight multiply saves: LlamaRMSNorm the normalized tensor
    cast back (d; in fp32 the normalized tensor), Gemma's ·(1 + w) the fp32 normalized tensor. The
    output (d) only when its consumer saves it (a trained projection does; a residual add or the
    rotary multiply by cos/sin does not)."""
    if not weight_trained:
        per = 4.0
    elif spec.norm_weight_offset or spec.norm_weight_fp32:
        per = 4.0 + 4
    else:
        per = 4 + (4 if d >= 4 else d)
    return per + (d if output_saved else 0)


def _rms_saved_per_norm(spec: ModelSpec, rows: int, width: int) -> float:
    """Beyond the per-element tensors: `torch.rsqrt(variance + eps)` saves its fp32 output, one value
    per normalized row (LlamaRMSNorm, Gemma3RMSNorm._norm); Gemma's `1.0 + self.weight.float()` is a
    new fp32 weight-sized tensor saved by the multiply."""
    if spec.norm_weight_fp32:  # Gemma4RMSNorm: pow(mean + eps, -0.5) keeps its input and the product its output
        return rows * 8
    return rows * 4 + (width * 4 if spec.norm_weight_offset else 0)


def _norm_saved(spec: ModelSpec, x: Shape, output_saved: bool = True, weight_trained: bool = True) -> float:
    t = x.tokens * x.h
    if spec.norm == "layer":
        # input, output; fp32 mean and rstd (native_layer_norm keeps its input for the input's gradient)
        return (2 if output_saved else 1) * t * x.d + 2 * x.tokens * 4
    per_element = _rms_saved_per_element(spec, x.d, output_saved, weight_trained)
    return t * per_element + _rms_saved_per_norm(spec, x.tokens, x.h)


def _layer_norms_saved(spec: ModelSpec, x: Shape, kept: Kept = ALL_TRAINED) -> float:
    trained = kept.norm_weights
    pre_attention = _norm_saved(spec, x, kept.qkv_input, trained)
    pre_mlp = _norm_saved(spec, x, kept.mlp_input, trained)
    if spec.norms_per_layer == 4:
        # Gemma 2/3 sandwich: the pre-norms feed projections, the post-norms a residual add
        saved = pre_attention + pre_mlp + 2 * _norm_saved(spec, x, output_saved=False, weight_trained=trained)
    else:
        saved = pre_attention + pre_mlp
    if spec.parallel_residual:
        # GPTNeoXLayer: input_layernorm and post_attention_layernorm read the same layer input
        saved -= x.tokens * x.h * x.d
    return saved


def dropout_mask_bytes(d: float, cuda: bool) -> float:
    """Bytes per element a dropout keeps for backward. On CUDA dropout is the fused `native_dropout`
    (aten/src/ATen/native/Dropout.cpp `is_fused_kernel_acceptable`), whose mask is bool, 1 B
    (cuda/Dropout.cu `native_dropout_cuda` → `dropout_cuda<bool>`); elsewhere it is `input * noise` with the
    noise in the input dtype, which MulBackward0 keeps (measured, torch 2.13 CPU, bf16 and fp32:
    tests/engine/test_dropout.py)."""
    return 1 if cuda else d


def sdpa_math_path(spec: ModelSpec, attention: str, cuda: bool) -> bool:
    """Whether training's SDPA runs torch's composite math attention: on the CPU with attention dropout
    (`dropout_p` > 0) torch 2.13 leaves `_scaled_dot_product_flash_attention_for_cpu` for
    `_scaled_dot_product_attention_math` (measured: tests/engine/test_dropout.py). CUDA's flash and
    memory-efficient kernels take `dropout_p` themselves and keep only a philox seed and offset
    (torch/_meta_registrations.py:6106-6163, :6495-6536), not a mask: read, not measured on a GPU."""
    return attention == "sdpa" and spec.attention_dropout > 0 and not cuda


def _sdpa_math_saved(x: Shape) -> float:
    """What `_scaled_dot_product_attention_math` with dropout keeps, in fp32 (a half-precision input is
    upcast first): three score-sized tensors (the probabilities, the dropout noise, the dropped
    probabilities), q and k scaled by √scale, and v as bmm reads it, each a new tensor: v [b, H, s, hd] is a
    transposed view, so bmm's reshape copies it (a fused projection's slice no longer keeps the whole
    output), and under GQA k and v are repeated to the query heads (`enable_gqa` inside, or `repeat_kv`
    before). The q, k, v it was given and a log-sum-exp are not kept. Measured on torch 2.13 CPU with
    transformers 5.24 (bf16, fp32; MHA, GQA, MQA, fused qkv, qk-norm): tests/engine/test_dropout.py."""
    kv_width = x.q if x.kv < x.q else x.kv
    return attention_scores_bytes(x, 3 * 4) + x.tokens * (x.q + 2 * kv_width) * 4


def _attention_saved(spec: ModelSpec, x: Shape, attention: str, gqa_copies: bool, norm_weights: bool = True) -> float:
    mixer, side = spec.runs[0].mixer, spec.runs[0].side
    if len(spec.layer_runs) == 1 and side is not None:  # Falcon-H1: the Mamba2 mixer beside the attention
        beside = mixers.saved(mixers.on_device(side, x.tensor), x.b, x.s, x.h, x.d, x.cuda)
        return beside + _attention_saved(
            replace(spec, layer_runs=(replace(spec.runs[0], side=None),)), x, attention, gqa_copies, norm_weights
        )
    if len(spec.layer_runs) == 1 and mixer.kind in mixers.MODELLED:
        return mixers.saved(mixers.on_device(mixer, x.tensor), x.b, x.s, x.h, x.d, x.cuda, attention)
    tok = x.tokens
    qk_norm = 0.0
    if spec.qk_norm:
        # q_norm/k_norm outputs feed the rotary multiply, which saves cos/sin, not them
        qk_norm = tok * (x.q + x.kv) * _rms_saved_per_element(spec, x.d, False, norm_weights)
        if spec.qk_norm_full:  # one row per token over all heads (Olmo2Attention, MiniMaxM2Attention)
            qk_norm += _rms_saved_per_norm(spec, tok, x.q) + _rms_saved_per_norm(spec, tok, x.kv)
        else:
            hd = spec.head_dim
            qk_norm += _rms_saved_per_norm(spec, tok * x.q // hd, hd) + _rms_saved_per_norm(spec, tok * x.kv // hd, hd)
    if spec.v_norm:  # a scale-free RMSNorm keeps only its fp32 input (x itself in fp32) and two values per row
        qk_norm += tok * x.kv * 4 + (tok * x.kv // spec.head_dim) * 8
    if attention == "eager":
        # matmul(P, v) reshapes v for bmm: a copy (also of a fused projection's strided slice), saved
        kv_width = x.q if x.kv < x.q else x.kv  # repeat_kv copies for GQA
        # fp32 softmax output (+ its cast back when the compute dtype is not fp32); soft-capping's
        # tanh saves its output (modeling_gemma2.py eager_attention_forward). With attention dropout the
        # dropout's mask and output (what matmul(P, v) then keeps) replace the cast-back copy
        # (GPT-2 and Llama 4 run the softmax in the compute dtype: its output, which matmul(P, v) also keeps, only)
        softmax = x.d if spec.softmax_in_compute_dtype else 4
        scores = attention_scores_bytes(x, softmax + x.d if x.d < softmax else softmax)
        if spec.attention_dropout:
            scores = attention_scores_bytes(x, softmax + dropout_mask_bytes(x.d, x.cuda) + x.d)
        if spec.attn_logit_softcapping:
            scores += attention_scores_bytes(x, x.d)
        return tok * (2 * x.q + 2 * kv_width) * x.d + scores + qk_norm
    out = tok * x.q * x.d
    if sdpa_math_path(spec, attention, x.cuda):
        # the math path's output is a new [b, H, s, hd] tensor that nothing keeps; o_proj keeps the copy
        # sdpa_attention_forward's transpose(1, 2).contiguous() makes
        return _sdpa_math_saved(x) + out + qk_norm
    repeated = gqa_copies and x.kv < x.q
    kv_width = x.q if repeated else x.kv
    lse = x.b * x.heads * x.s * 4
    if spec.fused_qkv and not repeated:
        # SDPA saves `value` as given: a slice of the fused projection output keeps all of it alive;
        # q and k are separate tensors when roped
        proj = tok * (x.q + 2 * x.kv) * x.d + (tok * (x.q + x.kv) * x.d if spec.learned_positions == 0 else 0)
    else:
        proj = tok * (x.q + 2 * kv_width) * x.d  # q (roped), k (roped), v
    # the attention output is saved by SDPA; o_proj saves its input, the same tensor when the
    # transpose(1, 2).contiguous() after SDPA is a view, a copy for a q roped by cat (rope_by_cat)
    if spec.rope_by_cat:
        out *= 2
    return proj + out + lse + qk_norm


def _mlp_saved(spec: ModelSpec, x: Shape, kept: Kept = ALL_TRAINED) -> float:
    tok = x.tokens
    if spec.is_moe and spec.moe_all_experts:
        return _all_experts_saved(spec, x)
    if spec.is_moe:
        k = spec.experts_per_token
        e_int = spec.expert_intermediate_size
        rows = tok * k
        w = 4 if spec.router_weights_fp32 else x.d
        # router: softmax(..., dtype=float32) saves its fp32 output (not the logits); topk its int64
        # indices; the top-k normalization `/= sum` its fp32 result and the sum; in
        # grouped_mm_experts_forward (integrations/moe.py) the three index ops save perm // k, perm and
        # inv_perm (int64) and the routing-weight multiply the sorted sample weights (w)
        routing = tok * spec.num_experts * 4 + tok * k * (8 + 4) + tok * 4 + rows * (3 * 8 + w)
        # routed rows: gathered input, gate_up, act(gate), act·up, down output
        routed = rows * (2 * x.h + 4 * e_int) * x.d
        if spec.moe_clamped_gate:
            # gpt-oss's `_apply_gate` (modeling_gpt_oss.py:82-88): the clamps keep gate_up (2I) through their views, and
            # the clamped gate, sigmoid output, up + 1, glu and their product (the down input) are kept (I each)
            # beside the gathered input and the down output (h each): measured, r14-gptoss fp32 (5.53 MB a layer)
            routed = rows * (2 * x.h + 7 * e_int) * x.d
        shared = 0.0
        if spec.moe_beside_dense:
            return routed + routing + _beside_dense_saved(spec, x)
        if spec.shared_expert_intermediate_size:
            # Qwen2MoeSparseMoeBlock: the shared expert is a gated MLP on every token (gate, act, up,
            # act·up saved); sigmoid(shared_expert_gate(x)) * shared_output saves the sigmoid output
            # (tok × 1) and the shared output (tok·h)
            shared = 4 * tok * spec.shared_expert_intermediate_size * x.d + tok * (x.h + 1) * x.d
        return routed + routing + shared
    ti = tok * x.inter * x.d
    down_input = ti if kept.down_input else 0  # the down_proj (fc2) input, kept for its weight's gradient
    if spec.mlp == "gated":
        return 3 * ti + down_input  # gate (silu input), act, up (the product's operands)
    if spec.activation in PYTHON_GELU:
        return 4 * ti + down_input  # x, tanh, 0.5x, 1+tanh
    if spec.activation == "relu":
        return ti  # relu keeps its output, which is also fc2's input
    return ti + down_input  # fc1 output (the activation's input)


def post_norm_backward_transient(spec: ModelSpec, x: Shape) -> float:
    """A sandwich-norm layer's first backward node (Gemma 2/3/4: the post-feedforward norm at the layer's end), over
    the whole (recomputed) layer, none of whose gradients exist yet. The norm computes in fp32 whatever the compute
    dtype (`hidden_states.float()`), and its backward peaks at the variance path's PowBackward0 with five fp32
    tensors of the layer's width alive (the gradient through `x · rsqrt` waiting in autograd's input buffer,
    MeanBackward1's expanded gradient, PowBackward0's `x^1` and its two products), after the weight multiply's
    backward has freed the normed tensor it saved (counted in the layer's saved set): 16 B an element over the saved
    tensors and the incoming gradient, in bf16 and fp32 alike (torch 2.13 CPU, Gemma2/3/4RMSNorm, 420 × 256:
    `tests/engine/test_training_mechanisms.py` measures it). Five such blocks were alive at r14-gemma4's measured
    peak, layer 0's recomputed post-feedforward norm. 0 for a layer whose norms come first only."""
    if spec.norms_per_layer != 4 or _mlp_kind(spec) == "none":
        return 0.0
    return x.tokens * x.h * 4 * 4


def stored_kv_retained(spec: ModelSpec, x: Shape) -> float:
    """Gemma 4 under full checkpointing: a recomputed layer stores its k and v in `shared_kv_states`, an input of every
    checkpointed layer, so they stay alive with their autograd history until the next recomputed layer of the same
    type replaces them: the attention-input norm's saved tensors and its output (what k_proj and v_proj keep), the k and
    v norms' saved tensors, and k and v (measured at r14-gemma4's first layer: layer 1's, 2.8 MB in bf16, alive
    through layer 0's backward). 0 for other families."""
    if not spec.kv_stored or _mixer_kind(spec) not in ATTENTION_KINDS:
        return 0.0
    tok, kv = x.tokens, x.kv
    rows = tok * kv // spec.head_dim
    norms = tok * kv * _rms_saved_per_element(spec, x.d, False) + _rms_saved_per_norm(spec, rows, spec.head_dim)
    v_norm = tok * kv * 4 + rows * 8 if spec.v_norm else 0.0
    return _norm_saved(spec, x, output_saved=True) + norms + v_norm + 2 * tok * kv * x.d


def _beside_dense_saved(spec: ModelSpec, x: Shape) -> float:
    """Gemma 4's MoE layer beyond its routed experts (modeling_gemma4.py:1391-1403): the dense gated MLP beside them
    (gate, act, up and act·up kept: 4 × tok × I), post_feedforward_layernorm_1 on its output and
    post_feedforward_layernorm_2 on the experts' (8 B an element each: `_norm_saved`), pre_feedforward_layernorm_2 on
    the residual (its fp32 input, a copy unless fp32, and its fp32 normed tensor) and the router: its scale-free norm's
    fp32 input copy, the normed tensor (d) the scale multiply keeps and the scaled tensor (d) the projection keeps.
    Measured per layer with saved-tensor hooks (round 14: fp32 and bf16)."""
    tok, t = x.tokens, x.tokens * x.h
    copy = 4 if x.d < 4 else 0  # `.float()` of a half tensor is a copy; of an fp32 one, the tensor itself
    dense = 4 * tok * spec.shared_expert_intermediate_size * x.d
    post_norms = 2 * _norm_saved(spec, x, output_saved=False)
    pre_norm_2 = t * (copy + 4) + tok * 8
    router = t * (copy + 2 * x.d) + tok * 8
    return dense + post_norms + pre_norm_2 + router


def mlp_output_input_saved(spec: ModelSpec, x: Shape, kept: Kept = ALL_TRAINED) -> float:
    """The input of a layer's MLP output projection(s) as saved for backward (dense `down_proj`, the routed rows'
    and the shared expert's down projections): freed by the MLP's first backward node, before the rest of the MLP's
    backward peaks (measured: round 13's recomputed first layers, bf16 with full checkpointing)."""
    if _mlp_kind(spec) == "none" or _mixer_kind(spec) == "cross":
        return 0.0
    tok = x.tokens
    if spec.is_moe and spec.moe_all_experts:
        return spec.num_experts * tok * spec.expert_intermediate_size * x.d
    if spec.is_moe:
        shared = tok * spec.shared_expert_intermediate_size * x.d
        return tok * spec.experts_per_token * spec.expert_intermediate_size * x.d + shared
    if spec.mlp != "gated" and spec.activation == "relu":
        return 0.0  # relu's output is fc2's input, still read by relu's backward
    return tok * x.inter * x.d if kept.down_input else 0.0


def _all_experts_saved(spec: ModelSpec, x: Shape) -> float:
    """What Llama 4's MoE keeps for backward (`_all_experts_forward_transient`): the router's top-k indices (int64) and
    sigmoid output (fp32, tok × E); the scaling multiply both operands (routed_in, E·tok × h, and the scores column,
    a copy, E·tok); the first bmm its input (the scaled rows); act(gate) its input, a view keeping gate_up (E·tok × 2I)
    alive, and its output; the down bmm the product (E·tok × I); the shared expert as a dense gated MLP (4 · tok ×
    I_shared: gate, act, up and the down input)."""
    tok, e, e_int = x.tokens, spec.num_experts, spec.expert_intermediate_size
    rows = e * tok
    router = tok * spec.experts_per_token * 8 + tok * e * 4
    experts = rows * (2 * x.h + 4 * e_int + 1) * x.d
    return router + experts + 4 * tok * spec.shared_expert_intermediate_size * x.d


def training_saved_per_layer(
    spec: ModelSpec, x: Shape, attention: str, gqa_copies: bool, mode: str, sp_t: int = 1, kept: Kept = ALL_TRAINED
) -> float:
    """Bytes one decoder layer keeps for backward, per micro-batch.

    mode none: everything autograd saves; selective: recompute the attention core (keeps norms,
    projections and MLP); full: only the layer input (HF gradient checkpointing).
    `sp_t` > 1 shards the norm/residual regions across the tensor group (sequence parallel).
    `kept`: which inputs frozen layers no longer keep (LoRA, QLoRA). With `hidden_dropout` each of the two
    residual branches' dropouts keeps its mask (`dropout_mask_bytes`); its output only meets the residual
    add, which keeps nothing.
    """
    kind, mlp_kind = _mixer_kind(spec), _mlp_kind(spec)
    if kind == "cross":
        return 0.0  # skipped without image states (`inference_forward_transient`): nothing saved
    hidden = x.tokens * x.h * x.d
    if mode == "full":
        return hidden / sp_t
    if mode == "selective_op":
        return hidden / sp_t + op_selective_saved(spec, x)
    norms = _layer_norms_saved(spec, x, kept) / sp_t
    attn = _attention_saved(spec, x, attention, gqa_copies, kept.norm_weights)
    if mode == "selective":
        attn = x.tokens * (x.q + 2 * x.kv) * x.d  # projections only; scores/outputs recomputed
    mlp = _mlp_saved(spec, x, kept)
    if kind == "none":  # attention-free layer: neither the attention nor its norm
        attn, norms = 0.0, norms - _norm_saved(spec, x, kept.qkv_input, kept.norm_weights) / sp_t
    if mlp_kind == "none":  # a mixer block without an MLP: neither the MLP nor its norm
        mlp, norms = 0.0, norms - _norm_saved(spec, x, kept.mlp_input, kept.norm_weights) / sp_t
    adapters = x.tokens * (kept.adapter_outputs * (kept.adapter_d or x.d) + kept.dropout_bytes)
    residual_dropouts = 2 * x.tokens * x.h * dropout_mask_bytes(x.d, x.cuda) / sp_t if spec.hidden_dropout else 0
    return norms + attn + mlp + adapters + residual_dropouts


def context_parallel_attention(x: Shape, context: int) -> tuple[float, float]:
    """What one layer's attention adds under context parallelism (`x`: this device's share of the sequence), in its
    forward and in its backward: PyTorch's context-parallel SDPA (torch 2.13
    distributed/tensor/experimental/_context_parallel/_attention.py) concatenates the local keys and values
    (`torch.cat([key.flatten(), value.flatten()])`, :437) and, with torchtitan's default rotate method "allgather"
    (config/job_config.py:381 at v0.2.0), all-gathers them once (`_AllGatherRotater`, :273-300): the whole sequence's
    keys and values of this device's heads; its merger accumulates the output and log-sum-exp in fp32
    (`_SDPAMerger`, :148-149). The backward all-gathers the keys and values again and accumulates their gradients in
    fp32 (`zeros_like(key, dtype=accum_dtype)`, :514-515), passing each on around the ring (a second such buffer)."""
    local_kv = 2 * x.tokens * x.kv
    gathered = context * local_kv * x.d
    forward = gathered + local_kv * x.d + x.tokens * x.q * 4 + x.b * x.heads * x.s * 4
    backward = gathered + local_kv * x.d + 2 * local_kv * 4
    return forward, backward


def op_selective_saved(spec: ModelSpec, x: Shape) -> float:
    """What torchtitan's per-op selective checkpointing keeps of one layer beyond its input (the checkpoint's, counted
    by the caller): the outputs of every other matmul in call order (``frameworks.saved_matmul_widths``: q, k, v and
    o, a fused qkv as one; then the MLP's gate, up and down, fc1 and fc2, a fused gate_up as one), and the attention
    kernel's output and logsumexp (fp32 per head and position). Norms, the activation function, rope and the
    elementwise products are recomputed. Routed experts run as grouped matmuls, which are not in the save list: an
    MoE layer keeps its attention's and its shared expert's. Read from torchtitan 0.2.0
    (distributed/activation_checkpoint.py:104-115, models/llama3/infra/parallelize.py:33-44); for Llama 3.1 8B that
    is q, v, gate and down."""
    tok = x.tokens
    widths: list[int] = []
    attention = 0.0
    if _mixer_kind(spec) in ATTENTION_KINDS:
        widths += [x.q + 2 * x.kv] if spec.fused_qkv else [x.q, x.kv, x.kv]
        widths.append(x.h)
        attention = tok * x.q * x.d + x.b * x.heads * x.s * 4
    if _mlp_kind(spec) != "none":
        inter = spec.shared_expert_intermediate_size // x.tensor if spec.is_moe else x.inter
        if inter and spec.mlp == "gated":
            widths += [2 * inter] if spec.fused_gate_up else [inter, inter]
            widths.append(x.h)
        elif inter:
            widths += [inter, x.h]
    return tok * sum(frameworks.saved_matmul_widths(widths)) * x.d + attention


def compiled_saved_per_layer(spec: ModelSpec, x: Shape, kept: Kept = ALL_TRAINED) -> float:
    """Bytes one decoder layer keeps for backward under torch.compile (SDPA, RMSNorm, dense gated MLP).
    AOTAutograd's min-cut partition (torch 2.13 torch/_functorch/partitioners.py:3725
    `min_cut_rematerialization_partition`) recomputes pointwise ops in backward and saves what they
    cannot be rebuilt from: each norm's input (dtype d: no fp32 copies) and its rsqrt per row (fp32),
    SDPA's roped q, k, v, output and logsumexp, and the gate and up outputs; a norm's output and the
    down input only where a trained weight reads them (full fine-tuning: all; LoRA: the adapted
    projections', with each adapter's rank-wide A output); no SiLU intermediates, no rope or fp32 norm
    copies. Read from the forward graph's saved outputs (TORCH_LOGS=aot_graphs) of transformers 5.24
    Llama and measured to the byte on torch 2.13 CPU (2 layers, h 256, 256 tokens: full fine-tuning
    fp32 8,174,720 B saved, bf16 4,224,000 B held after forward; torchtune-style LoRA, bf16, q/v
    3,141,632 B, all linears 4,149,248 B held; benchmarks/gpu_published/HOLDOUT.md)."""
    tok = x.tokens
    hidden = tok * x.h * x.d
    norms = 2 * (hidden + tok * 4) + hidden * (kept.qkv_input + kept.mlp_input)
    attention = tok * (2 * x.q + 2 * x.kv) * x.d + x.b * x.heads * x.s * 4
    adapters = tok * kept.adapter_outputs * (kept.adapter_d or x.d)
    return norms + attention + adapters + (2 + kept.down_input) * tok * x.inter * x.d


def compiled_first_layer_unsaved(x: Shape) -> float:
    """With a frozen embedding no gradient flows into the first layer's input, so the compiled first
    layer keeps neither its input nor its input norm's rsqrt (measured with LoRA, see above)."""
    return x.tokens * (x.h * x.d + 4)


def compile_modelled(spec: ModelSpec, attention: str, method: str, kept: Kept = ALL_TRAINED) -> bool:
    """Whether `compiled_saved_per_layer` covers the layer: the structures it was measured on (full
    fine-tuning; LoRA without dropout on bf16 base weights; no config dropout)."""
    return (
        method in ("full", "lora")
        and not kept.dropout_bytes
        and not (spec.attention_dropout or spec.hidden_dropout or spec.embedding_dropout)
        and attention != "eager"
        and spec.norm == "rms"
        and spec.mlp == "gated"
        and not spec.is_moe
        and spec.norms_per_layer == 2
        and not (spec.qk_norm or spec.fused_qkv or spec.fused_gate_up or spec.parallel_residual)
    )


def training_backward_transient(spec: ModelSpec, x: Shape) -> float:
    """Gradients flowing through one layer's MLP in backward (grad of act*up, act, up, gate)."""
    tok = x.tokens
    routed = spec.num_experts if spec.moe_all_experts else spec.experts_per_token
    width = x.inter if not spec.is_moe else spec.expert_intermediate_size * routed
    mats = 3 if spec.mlp == "gated" else 2
    mlp = mats * tok * width * x.d + 2 * tok * x.h * x.d if _mlp_kind(spec) != "none" else 0.0
    mixer = 0.0
    for m in (spec.runs[0].mixer, spec.runs[0].side) if len(spec.layer_runs) == 1 else ():
        if m is not None and m.kind in mixers.MODELLED:
            mixer = max(mixer, mixers.backward_transient(mixers.on_device(m, x.tensor), x.b, x.s, x.h, x.d, x.cuda))
    return max(mlp, mixer)


def attention_backward_transient(spec: ModelSpec, x: Shape, attention: str) -> float:
    """Gradients alive at an eager attention's softmax backward (`aten::_softmax_backward_data`), beyond the layer's
    saved tensors: the incoming gradient of the probabilities in fp32 (the matmul's gradient, or with a half
    precision compute dtype `ToCopyBackward0`'s fp32 copy of it: eager_attention_forward runs softmax with
    dtype=float32 and casts back) and the softmax backward's fp32 output, two score-sized tensors, over the
    gradients of the layer output and its residual. SDPA's backward is one fused kernel over q/k/v-sized tensors.
    Measured at the recomputed first layer of full-checkpointing runs (round 7: OPT bf16, GPT-NeoX fp32, 64 heads
    of 8 dims, where b·heads·s² dominates a layer)."""
    if attention != "eager" or _mixer_kind(spec) not in ATTENTION_KINDS:
        return 0.0
    hidden = 2 * x.tokens * x.h * x.d
    if spec.softmax_in_compute_dtype:  # GPT-2: both gradients in the compute dtype, no cast
        return attention_scores_bytes(x, 2 * x.d) + hidden
    # the probabilities' cast back to a half dtype, saved by P·V's matmul, is freed once that matmul's backward ran
    cast_back = x.d if x.d < 4 else 0
    return attention_scores_bytes(x, 4 + 4 - cast_back) + hidden


def mlp_block_saved(spec: ModelSpec, x: Shape, kept: Kept = ALL_TRAINED) -> float:
    """What a layer's MLP and its norm keep for backward: freed once the MLP's backward has run, before the
    attention's (`attention_backward_transient`)."""
    if _mlp_kind(spec) == "none" or _mixer_kind(spec) == "cross":
        return 0.0
    return _mlp_saved(spec, x, kept) + _norm_saved(spec, x, kept.mlp_input, kept.norm_weights)


def _softcap_saved(spec: ModelSpec, x: Shape) -> float:
    """Gemma-2 final_logit_softcapping (logits / cap → tanh → · cap, Gemma2ForCausalLM.forward): tanh
    saves its output, one more tokens × V tensor (d) from the head into backward."""
    return x.tokens * x.vocab * x.d if spec.final_logit_softcapping else 0


def loss_peak(x: Shape, spec: ModelSpec | None = None, chunks: int = 1) -> float:
    """Logits and cross-entropy (HF ForCausalLMLoss: logits.float(), log_softmax, nll), or torchtune's
    CEWithChunkedOutputLoss over `chunks` chunks of positions (torchtune@30b8519
    torchtune/modules/transformer.py:463-466 applies the output projection chunk by chunk and
    modules/loss/ce_chunked_output_loss.py:78-81 upcasts and computes the cross-entropy one chunk at a
    time, as transformers does for the whole).

    Forward: `loss_forward`. Backward start: every chunk's fp32 log_softmax output (saved), and one
    chunk's nll gradient and log_softmax gradient (fp32) → the larger of the two. With soft-capping, its
    saved tanh output on top of both."""
    tv = x.tokens * x.vocab
    cap = _softcap_saved(spec, x) if spec else 0
    bwd = tv * (4 + 8 / chunks)
    return max(loss_forward(x, None, chunks), bwd) + cap


def loss_forward(x: Shape, spec: ModelSpec | None = None, chunks: int = 1) -> float:
    """Loss forward: the logits (d, every chunk: the projection runs before the loss), the fp32
    log_softmax outputs (every chunk's is saved for backward), and one chunk's fp32 upcast (when d < 4;
    `.float()` of fp32 logits is the tensor itself) (+ soft-cap tanh). Eager operators: under
    torch.compile of the per-chunk cross-entropy: `compiled_chunked_loss`."""
    tv = x.tokens * x.vocab
    cap = _softcap_saved(spec, x) if spec else 0
    upcast = 4 if x.d < 4 else 0
    return tv * (x.d + 4 + upcast / chunks) + cap


def loss_saved(x: Shape, spec: ModelSpec | None = None) -> float:
    """What stays between the loss forward and backward: the fp32 log_softmax output (+ soft-cap tanh)."""
    return x.tokens * x.vocab * 4 + (_softcap_saved(spec, x) if spec else 0)


def compiled_chunked_loss(x: Shape, spec: ModelSpec | None, chunks: int) -> tuple[float, float, float]:
    """(forward, backward-start peak, saved through the layers' backward) of torchtune's chunked
    cross-entropy with its per-chunk
    `F.cross_entropy(logits.float(), ...)` under torch.compile (torchtune@30b8519
    training/_compile.py:68-71 compiles `compute_cross_entropy` of `CEWithChunkedOutputLoss`).

    Read from the forward graph's outputs (TORCH_LOGS=aot_graphs, torch 2.13 CPU, bf16 [256, 32000]
    chunks): it saves its bf16 input chunk, the labels and two fp32 values per row (`amax`, the log of
    the sum of exponentials); no fp32 upcast or log_softmax output exists, in forward or backward, whose
    fused kernel writes the chunk's gradient in the logits dtype. Measured (profiler allocation replay,
    [2048, 32000] bf16 in 8 chunks): held after forward 16,388 B compiled (8 B per row + a 0-d sum)
    against 262,144,036 B eager. The logits (d, every chunk) stay as the graph's saved inputs (the
    recipe drops its own reference, recipes/lora_finetune_single_device.py:652 `del logits`); each
    chunk's backward writes its gradient and frees its saved set: measured with chunks computed from
    leaves, backward's peak over the forward's end is one chunk's gradient (16,385,028 B) and nothing
    of the loss remains at its end (benchmarks/gpu_published/HOLDOUT.md)."""
    tv = x.tokens * x.vocab
    cap = _softcap_saved(spec, x) if spec else 0
    forward = tv * x.d + x.tokens * 8 + cap
    return forward, forward + tv * x.d / chunks, 0.0
