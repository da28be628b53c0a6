"""Activations and intermediates, operator by operator, as the Hugging Face implementations run them.

Shapes: b sequences, s positions computed now, k positions attended to, h hidden, q = heads × head_dim
and kv = kv_heads × head_dim (per device under tensor parallelism), I the MLP width, V the vocabulary,
d the compute dtype's bytes. Every function returns bytes.

Cross-check: for a GPT-style layer with dropout these reduce to Korthikanti et al. (arXiv:2205.05198,
Table 2) `sbh(34 + 5as/h)`; the real HF operators differ (gated MLPs keep four b·s·I tensors, RMSNorm
upcasts to fp32, no dropout masks when dropout is 0, SDPA keeps only the log-sum-exp).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..models import ModelSpec

# activation functions whose HF implementation is a chain of elementwise python ops
PYTHON_GELU = ("gelu_new", "gelu_fast", "gelu_pytorch_tanh_python")


@dataclass(frozen=True, slots=True)
class Shape:
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

    @property
    def tokens(self) -> int:
        return self.b * self.s


def _norm_forward_transient(spec: ModelSpec, x: Shape) -> float:
    """RMSNorm upcasts to fp32: copy, pow, product (LlamaRMSNorm); LayerNorm is one kernel."""
    t = x.tokens * x.h
    if spec.norm == "layer":
        return t * x.d
    if x.d < 4:
        return t * (4 + 4 + x.d)  # fp32 copy + (pow | product) + cast back
    return t * (4 + 4)


# decoder layers that keep a tensor past the point a Llama-style layer frees it
ATTN_OUTPUT_KEPT = ("gpt2",)  # GPT2Block binds `attn_output` to a local that lives through the MLP
MLP_INPUT_FREED = ("opt",)  # OPTDecoderLayer runs fc1 inline and rebinds: the normed input dies at fc1


def _moe_forward_transient(spec: ModelSpec, x: Shape) -> float:
    """transformers 5 runs routed experts batched (`experts_implementation` defaults to "grouped_mm",
    modeling_utils.get_correct_experts_implementation, on every device; its fallback allocates the same
    outputs): integrations/moe.py grouped_mm_experts_forward materialises all S = tokens × k routed rows
    at once. Peak at `act(gate) * up`: gathered input (S·h), gate_up (S·2I), act(gate) (S·I), product (S·I)."""
    tok = x.tokens
    k = spec.experts_per_token
    e_int = spec.expert_intermediate_size
    rows = tok * k
    # router logits (kept by `_, w, idx = self.gate(...)`), top-k weights fp32 + indices int64; in the
    # experts: sorted ids and perm (int64), sample weights and the histc input (fp32)
    routing = tok * spec.num_experts * x.d + tok * k * (4 + 8) + rows * (8 + 8 + 4 + 4)
    grouped = rows * (x.h + 4 * e_int) * x.d
    if not spec.shared_expert_intermediate_size:
        return routing + grouped
    # Qwen2MoeSparseMoeBlock: the shared expert runs first; its output (tok·h) is held during the experts
    shared = 3 * tok * spec.shared_expert_intermediate_size * x.d
    return max(shared, tok * x.h * x.d + routing + grouped)


def _mlp_forward_transient(spec: ModelSpec, x: Shape) -> float:
    if spec.is_moe:
        return _moe_forward_transient(spec, x)
    ti = x.tokens * x.inter * x.d
    if spec.mlp == "gated":
        return 3 * ti  # act(gate), up, act*up
    if spec.activation in PYTHON_GELU:
        return 4 * ti  # fc1 output + the python gelu's temporaries
    return 2 * ti  # fc1 output + activation


def attention_scores_bytes(x: Shape, dtype_bytes: float) -> float:
    return x.b * x.heads * x.s * x.k * dtype_bytes


def _attention_forward_transient(spec: ModelSpec, x: Shape, attention: str, gqa_copies: bool) -> float:
    """Transient of one attention block with a KV cache (excluding the cache it reads).

    The k/v projections live only until the cache update: DynamicLayer.update concatenates them into
    new cache tensors and StaticLayer.update copies them in, and the attention locals are rebound to
    the cache tensors (cache_utils), so from then on only the roped q is alive besides the cache."""
    tok = x.tokens
    qkv = tok * (x.q + 2 * x.kv) * x.d
    rope = 2 * tok * x.q * x.d  # q·cos, rotate_half(q)·sin before the sum
    q = tok * x.q * x.d  # roped q, held by the attention forward until it returns
    out = tok * x.q * x.d
    o_proj = q + out + tok * x.h * x.d  # o_proj output while q and its input are alive
    rep = 2 * x.b * x.heads * x.k * spec.head_dim * x.d if (gqa_copies and x.kv < x.q) else 0
    if attention == "eager":
        # eager_attention_forward: QK^T then ·scale (both alive), + mask, fp32 softmax, cast back;
        # the output is not allocated yet at the scores peak
        score_peak = attention_scores_bytes(x, (2 * x.d + 4) if x.d < 4 else 8)
        probs = attention_scores_bytes(x, x.d)
        pv = probs + 2 * out  # P·V output + its transpose(1, 2).contiguous() copy
        return max(qkv + rope, q + rep + max(score_peak, pv), o_proj + probs)
    # SDPA (CPU flash kernel, CUDA flash/efficient) writes its output as [b, s, H, hd]: the
    # transpose(1, 2).reshape in the attention forward is a view (aten/.../native/transformers/attention.cpp)
    lse = x.b * x.heads * x.s * 4
    return max(qkv + rope, q + rep + out + lse, o_proj)


def inference_forward_transient(spec: ModelSpec, x: Shape, attention: str, gqa_copies: bool) -> float:
    """Peak bytes alive inside one decoder layer's forward, beyond weights, the KV cache and the
    model-level tensors. Alive throughout: the embedding output (the model forward's `inputs_embeds`),
    the layer input (held by the decoder loop; it is also the attention's residual) and the normed
    input; the MLP additionally sees the post-attention residual."""
    tok = x.tokens
    hidden = tok * x.h * x.d
    # eager attention returns its probabilities; the decoder layer keeps them (`hidden, _ = attn(...)`)
    # until the layer returns, so they are still alive during the MLP
    kept_probs = attention_scores_bytes(x, x.d) if attention == "eager" else 0
    mlp_hidden = 4 * hidden  # embeds, layer input, residual, normed input
    if spec.model_type in MLP_INPUT_FREED:
        mlp_hidden -= hidden
    if spec.model_type in ATTN_OUTPUT_KEPT:
        mlp_hidden += hidden
    return max(
        3 * hidden + _norm_forward_transient(spec, x),
        3 * hidden + _attention_forward_transient(spec, x, attention, gqa_copies),
        mlp_hidden + _mlp_forward_transient(spec, x) + kept_probs,
    )


def model_level_inference(spec: ModelSpec, x: Shape, attention: str, mask_positions: int) -> float:
    """Tensors alive for the whole forward: position embeddings (cos, sin), the attention mask and
    the token ids."""
    tok = x.tokens
    rope = 2 * tok * spec.head_dim * x.d if spec.learned_positions == 0 else tok * x.h * x.d
    if attention == "eager":
        mask = x.b * x.s * mask_positions * x.d  # additive float mask (b, 1, s, k)
    else:
        mask = 0
    ids = tok * 8 * 2  # input_ids, position ids (int64)
    return rope + mask + ids


def previous_step_scores(b: int, vocab: int) -> float:
    """transformers generate during a decode forward: the previous step's `next_token_logits` (fp32
    copy) and `next_token_scores` (processors' fp32 output) are rebound only after the forward; its
    logits are gone (`del outputs`, generation/utils.py `_sample`)."""
    return b * vocab * (4 + 4)


# MinLengthLogitsProcessor and MinNewTokensLengthLogitsProcessor (generation/logits_process.py), added
# when generate is forced to its full length (min_new_tokens = max_new_tokens, so min_length is set
# too): each makes a `clone` and a `torch.where` of the fp32 [b, V] scores
EOS_SUPPRESSING_PROCESSORS = 2


def logits_sample(b: int, vocab: int, d: float, processors: int = EOS_SUPPRESSING_PROCESSORS) -> float:
    """Between two forwards, at the last processor's `where` (generation/utils.py `_sample`): the
    logits (d), the new fp32 `next_token_logits`, the previous step's `next_token_scores`, the
    earlier processors' outputs and the last one's clone and where (4 B each). Without processors
    the scores are `next_token_logits` itself."""
    fp32 = 1 + (1 + processors + 1 if processors else 0)
    eos_mask = vocab * (8 + 1) if processors else 0  # the processor's arange(V) (int64) and isin mask
    return b * vocab * (d + 4 * fp32) + eos_mask


# --- training ----------------------------------------------------------------------------------


def _norm_saved(spec: ModelSpec, x: Shape) -> float:
    t = x.tokens * x.h
    if spec.norm == "layer":
        return 2 * t * x.d + 2 * x.tokens * 4  # input, output; fp32 mean and rstd
    if x.d < 4:
        return t * (4 + 2 * x.d)  # fp32 upcast, normalized cast back, weight × normalized
    return 3 * t * 4  # input, normalized, weight × normalized


def _attention_saved(spec: ModelSpec, x: Shape, attention: str, gqa_copies: bool) -> float:
    tok = x.tokens
    qk_norm = 0.0
    if spec.qk_norm:
        per = (4 + 2 * x.d) if x.d < 4 else 12
        qk_norm = tok * (x.q + x.kv) * per
    if attention == "eager":
        kv_width = x.q if x.kv < x.q else x.kv  # repeat_kv copies for GQA
        # fp32 softmax output (+ its cast back when the compute dtype is not fp32)
        scores = attention_scores_bytes(x, 4 + x.d if x.d < 4 else 4)
        return tok * (2 * x.q + 2 * kv_width) * x.d + scores + qk_norm
    kv_width = x.q if (gqa_copies and x.kv < x.q) else x.kv
    lse = x.b * x.heads * x.s * 4
    # q (roped), k (roped), v, attention output, log-sum-exp. SDPA (CPU flash kernel, CUDA
    # flash/efficient) lays its output out as [b, s, H, hd], so the attention forward's
    # transpose(1, 2).reshape is a view and o_proj saves the SDPA output itself (no copy)
    return tok * (2 * x.q + 2 * kv_width) * x.d + lse + qk_norm


def _mlp_saved(spec: ModelSpec, x: Shape) -> float:
    tok = x.tokens
    if spec.is_moe:
        k = spec.experts_per_token
        e_int = spec.expert_intermediate_size
        routing = tok * spec.num_experts * (x.d + 4)
        return tok * k * (2 * x.h + 4 * e_int) * x.d + routing
    ti = tok * x.inter * x.d
    if spec.mlp == "gated":
        return 4 * ti  # gate (silu input), act, up, act*up (down_proj input)
    if spec.activation in PYTHON_GELU:
        return 5 * ti  # x, tanh, 0.5x, 1+tanh, output
    if spec.activation == "relu":
        return ti  # relu keeps its output, which is also fc2's input
    return 2 * ti


def training_saved_per_layer(
    spec: ModelSpec, x: Shape, attention: str, gqa_copies: bool, mode: str, sp_t: int = 1
) -> float:
    """Bytes one decoder layer keeps for backward, per micro-batch.

    mode none: everything autograd saves; selective: recompute the attention core (keeps norms,
    projections and MLP); full: only the layer input (HF gradient checkpointing).
    `sp_t` > 1 shards the norm/residual regions across the tensor group (sequence parallel).
    """
    hidden = x.tokens * x.h * x.d
    if mode == "full":
        return hidden / sp_t
    norms = spec.norms_per_layer * _norm_saved(spec, x) / sp_t
    attn = _attention_saved(spec, x, attention, gqa_copies)
    if mode == "selective":
        attn = x.tokens * (x.q + 2 * x.kv) * x.d  # projections only; scores/outputs recomputed
    return norms + attn + _mlp_saved(spec, x)


def training_layer_recompute(spec: ModelSpec, x: Shape, attention: str, gqa_copies: bool) -> float:
    """With full checkpointing, backward recomputes one layer: its saved tensors come back."""
    return training_saved_per_layer(spec, x, attention, gqa_copies, "none")


def training_backward_transient(spec: ModelSpec, x: Shape) -> float:
    """Gradients flowing through one layer's MLP in backward (grad of act*up, act, up, gate)."""
    tok = x.tokens
    width = x.inter if not spec.is_moe else spec.expert_intermediate_size * spec.experts_per_token
    mats = 3 if spec.mlp == "gated" else 2
    return mats * tok * width * x.d + 2 * tok * x.h * x.d


def loss_peak(x: Shape) -> float:
    """Logits and cross-entropy (HF ForCausalLMLoss: logits.float(), log_softmax, nll).

    Forward: logits (d) + fp32 upcast + log_softmax output. Backward start: log_softmax output, the
    nll gradient and the log_softmax gradient, all fp32 → the larger of the two."""
    tv = x.tokens * x.vocab
    fwd = tv * (x.d + 4 + 4) if x.d < 4 else tv * 8
    bwd = tv * 12
    return max(fwd, bwd)


def loss_forward(x: Shape) -> float:
    """Loss forward only: logits (d) + fp32 upcast (when d < 4) + log_softmax output."""
    tv = x.tokens * x.vocab
    return tv * (x.d + 4 + 4) if x.d < 4 else tv * 8


def loss_saved(x: Shape) -> float:
    """What stays between the loss forward and backward: the fp32 log_softmax output."""
    return x.tokens * x.vocab * 4
