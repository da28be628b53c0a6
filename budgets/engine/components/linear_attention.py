"""Activation memory of the linear-attention mixers (Gated DeltaNet, Kimi Delta Attention) on transformers
5.24's PyTorch path: what a run without flash-linear-attention / causal-conv1d takes (the CPU benchmark, and a
GPU user without those packages: `use_kernel_func_from_hub_with_fallback` falls back to these functions).

Sources (transformers 5.24.0): models/qwen3_next/modeling_qwen3_next.py `Qwen3NextGatedDeltaNet.forward`
:660-769, `torch_chunk_gated_delta_rule` :371-510, `torch_recurrent_gated_delta_rule` :513-580,
`causal_conv1d_fn` :340-361, `causal_conv1d_update` :320-337, `Qwen3NextRMSNormGated` :59-75; Qwen3.5
(models/qwen3_5/modeling_qwen3_5.py `Qwen3_5GatedDeltaNet`, the same functions) projects q/k/v, z, b and a
separately (`Mixer.split_proj`), so it makes none of Qwen3-Next's reshape copies of the fused qkvz output;
models/kimi_linear/modeling_kimi_linear.py `KimiLinearDeltaAttention.forward` :612-716 with
`chunk_kimi_delta_attention` :468-568 and `recurrent_kimi_delta_attention` :414-465.

Each function replays the module's allocations in program order on a tape (`_Tape`: alloc, free, transient
spikes) and returns the tape's peak above the level at entry. Every step names the source line it comes from.
What the CPU allocator adds (depthwise conv1d copies its input twice and writes its output twice) is the CPU
path; with flash-linear-attention's Triton kernels (chunk_gated_delta_rule / chunk_kda) none of the fp32
b × heads × chunks × 64 × 64 tensors exist — not modelled here.

Cache states (cache_utils.py LinearAttentionLayer.lazy_initialization :1211-1242, allocated by the first
prefill and left alive, `forward_leaves`): conv state b × conv_dim × kernel in the compute dtype (the whole
kernel, not kernel − 1 as vLLM), recurrent state b × heads × d_k × d_v in fp32 (zeros_like of the fp32 state the
scan returns; KDA casts it `.to(torch.float32)`).
"""

from __future__ import annotations

from ..models.layers import Mixer

F32 = 4


class _Tape:
    """Live bytes above the entry level, and their peak."""

    __slots__ = ("live", "peak")

    def __init__(self) -> None:
        self.live = 0.0
        self.peak = 0.0

    def alloc(self, *nbytes: float) -> None:
        for n in nbytes:
            self.live += n
            self.peak = max(self.peak, self.live)

    def free(self, *nbytes: float) -> None:
        for n in nbytes:
            self.live -= n

    def spike(self, nbytes: float) -> None:
        """A temporary allocated and freed at once (on top of what is live)."""
        self.peak = max(self.peak, self.live + nbytes)


def _conv_cpu(t: _Tape, b: int, width: int, length: int, out_len: int, kernel: int, d: float) -> None:
    """F.conv1d depthwise on the CPU (modeling_qwen3_next.py:352 / modeling_kimi_linear.py:392, and the decode
    update :331): two input-sized copies, the weight copy, the output written twice, then `ACT2FN[silu]`."""
    x, w, o = b * width * length * d, width * kernel * d, b * width * out_len * d
    t.alloc(x, x, w, o)
    t.free(w, x)
    t.spike(o)
    t.free(x)


# ------------------------------------------------------------------------------------------------------------
# Gated DeltaNet
# ------------------------------------------------------------------------------------------------------------


def _gdn_projections(t: _Tape, m: Mixer, tok: int, d: float) -> tuple[float, float]:
    """in_proj(s) up to the conv input; returns (bytes freed after the conv, bytes the forward keeps to its end)."""
    nv, nk, dk, dv = m.heads, m.kv_heads or m.heads, m.head_dim, m.value_dim
    key, value, r = nk * dk, nv * dv, max(1, nv // max(1, nk))
    cd = 2 * key + value
    if m.split_proj:  # Qwen3.5: in_proj_qkv (the conv input itself), in_proj_z, in_proj_b, in_proj_a
        t.alloc(tok * cd * d, tok * value * d, tok * nv * d, tok * nv * d)
        return tok * cd * d, tok * (value + 2 * nv) * d
    # Qwen3-Next: qkvz and ba stay referenced (projected_states_*) to the end of forward
    kept = tok * (2 * key + 2 * value) * d + tok * 2 * nv * d
    t.alloc(kept)
    after_conv = 0.0
    if r > 1 and nk > 1:  # fix_query_key_value_ordering :652-655 reshape copies of value, z, b, a
        t.alloc(tok * value * d, tok * value * d, tok * nv * d, tok * nv * d)
        kept += tok * value * d + 2 * tok * nv * d
        after_conv += tok * value * d
    if nk > 1:  # :681 q, k (and v unless copied above) .reshape(b, s, -1) of strided views copy
        copies = 2 * tok * key * d + (tok * value * d if r == 1 else 0)
        t.alloc(copies)
        after_conv += copies
    t.alloc(tok * cd * d)  # :683 torch.cat((query, key, value))
    return after_conv + tok * cd * d, kept


def _gdn_gates(t: _Tape, tok: int, nv: int, d: float) -> None:
    """beta = b.sigmoid(), g = -A_log.exp() * softplus(a.float() + dt_bias) (:729-731); beta (d) and g (fp32)
    stay alive."""
    t.alloc(tok * nv * d)
    a32 = tok * nv * F32 if d != F32 else 0
    t.alloc(a32, tok * nv * F32, tok * nv * F32)  # a.float(), + dt_bias, softplus
    t.free(tok * nv * F32)
    t.alloc(tok * nv * F32)  # the product: g
    t.free(tok * nv * F32, a32)


def _l2norm(t: _Tape, rows: int, width: int) -> None:
    """l2norm (:364-367): x*x, its sum, rsqrt; leaves x * inv_norm (rows × width fp32)."""
    t.spike(rows * width * F32 + rows * F32)
    t.spike(2 * rows * F32)
    t.alloc(rows * F32, rows * width * F32)
    t.free(rows * F32)


def _gdn_chunk(t: _Tape, m: Mixer, b: int, s: int, d: float) -> tuple[float, float]:
    """torch_chunk_gated_delta_rule (:371-510) from an empty state; returns (bytes of its output, of its state)."""
    nv, nk, dk, dv, c = m.heads, m.kv_heads or m.heads, m.head_dim, m.value_dim, m.chunk or 64
    r = max(1, nv // max(1, nk))
    tok = b * s
    sp = -(-s // c) * c
    p = b * nv * sp  # padded positions × heads
    rep = tok * nv * dk * d if r > 1 else 0
    t.alloc(rep, rep)  # :405-406 repeat_interleave of q and k
    up = d != F32  # :409-412 .to(float32): a copy unless already fp32 (then an alias)
    q32 = tok * nv * dk * F32 if up else 0
    v32 = tok * nv * dv * F32 if up else 0
    b32 = tok * nv * F32 if up else 0
    t.alloc(q32, q32, v32, b32)
    if up:
        t.free(rep, rep)
    _l2norm(t, tok * nv, dk)  # :415
    t.free(q32 if up else rep)
    _l2norm(t, tok * nv, dk)  # :416
    t.free(q32 if up else rep)
    t.alloc(tok * nv * dk * F32)  # :419 query * scaling
    t.free(tok * nv * dk * F32)
    t.alloc(p * dk * F32, p * dk * F32, p * dv * F32)  # :423 F.pad (a copy even without padding)
    t.free(tok * nv * dk * F32, tok * nv * dk * F32, v32)
    t.alloc(p * F32, p * F32)  # :424 beta, decay padded
    t.free(b32)
    t.alloc(p * dv * F32, p * dk * F32)  # :431-432 v_beta, k_beta
    t.spike(c * c)
    t.alloc(c * c)  # :441 strictly_upper_mask (bool)
    t.alloc(p * F32)  # :445 cum_decay
    mat = p * c * F32  # b × heads × chunks × 64 × 64 fp32
    t.alloc(mat, mat)  # :449-450 pairwise difference, masked_fill
    t.free(mat)
    t.alloc(mat)  # :451 exp
    t.free(mat)
    for _ in range(2):  # :454-455 ut_system, intra_chunk_attn: matmul then * pairwise_decay
        t.alloc(mat, mat)
        t.free(mat)
    t.alloc(p * F32, p * dk * F32)  # :456 decayed_k_beta
    t.free(p * F32)
    t.alloc(p * dv * F32, p * dk * F32)  # :465-466 solve_triangular: new_values, k_cumdecay
    state = b * nv * dk * dv * F32
    t.alloc(state, p * dv * F32)  # :476 zeros state, :479 core_attn_out
    t.alloc(p * F32, p * dk * F32)  # :482 query * cum_decay.exp()
    t.free(p * F32, p * dk * F32)
    t.alloc(p * F32, p * F32)  # :483 key * (cum_decay[-1] - cum_decay).exp()
    t.free(p * F32)
    t.alloc(p * dk * F32)
    t.free(p * F32, p * dk * F32)
    t.alloc(b * nv * (sp // c) * F32)  # :484 chunk_decay
    blk = b * nv * c * dv * F32  # one chunk's (b, heads, 64, dv)
    t.spike(max(4 * blk, 2 * blk + 2 * state))  # :487-494 the scan: v_new, inter, product, sum / state update
    t.alloc(2 * blk)  # v_new, inter_chunk_attn stay referenced after the loop
    t.alloc(p * dv * F32)  # :499 reshape: a copy (zeros_like kept solve_triangular's column-major strides)
    t.free(p * dv * F32)
    out = tok * nv * dv * d if up else p * dv * F32  # :502 .to(initial_dtype): an alias in fp32
    if up:
        t.alloc(out)
        t.free(p * dv * F32)
    # return: everything local goes except the output and the final state
    t.free(
        2 * p * dk * F32,  # query, key (decayed)
        p * dv * F32,  # value (padded)
        2 * p * F32,  # beta, decay
        p * dv * F32 + p * dk * F32,  # v_beta, k_beta
        c * c,
        p * F32,  # cum_decay
        3 * mat,  # pairwise_decay, ut_system, intra_chunk_attn
        p * dk * F32,  # decayed_k_beta
        p * dv * F32 + p * dk * F32,  # new_values, k_cumdecay
        b * nv * (sp // c) * F32,
        2 * blk,
    )
    return out, state


def _gated_rmsnorm(t: _Tape, elems: int, rows: int, d: float) -> float:
    """Qwen3NextRMSNormGated (:66-75) over (tokens × heads, dv): fp32 copy, pow, normed, cast, · weight, gate
    silu in fp32, the product (bf16 · fp32 promotes, and the CPU kernel first upcasts the bf16 operand);
    returns its output's bytes."""
    e4, ed = elems * F32, elems * d
    if d != F32:
        t.alloc(e4)  # .to(float32)
        t.spike(e4 + rows * F32)  # pow, mean
        t.alloc(rows * F32, e4)  # rsqrt, normed
        t.free(rows * F32, e4)
        t.alloc(ed, ed)  # .to(input_dtype), weight *
        t.free(ed, e4)
        t.alloc(e4, e4)  # gate.to(float32), silu
        t.free(e4)
        t.spike(2 * e4)  # the product and the upcast operand
        t.alloc(e4)
        t.free(e4, ed)
        t.alloc(ed)  # .to(input_dtype)
        t.free(e4)
        return ed
    t.spike(e4 + rows * F32)
    t.alloc(rows * F32, e4)  # normed
    t.free(rows * F32)
    t.alloc(e4)  # weight * (the cast is an alias)
    t.free(e4)
    t.alloc(e4, e4)  # silu(gate), product
    t.free(2 * e4)
    return e4


def _gdn_prefill(m: Mixer, b: int, s: int, h: int, d: float) -> _Tape:
    t = _Tape()
    nv, dk, dv, k = m.heads, m.head_dim, m.value_dim, m.kernel
    tok, cd, value = b * s, 2 * (m.kv_heads or m.heads) * dk + nv * dv, nv * dv
    after_conv, kept = _gdn_projections(t, m, tok, d)
    t.alloc(b * cd * k * d)  # cache conv state (cache_utils.py:1224)
    _conv_cpu(t, b, cd, s, s + k - 1, k, d)
    t.alloc(tok * cd * d)  # silu
    t.free(b * cd * (s + k - 1) * d, after_conv)
    _gdn_gates(t, tok, nv, d)
    out, state = _gdn_chunk(t, m, b, s, d)
    t.alloc(state)  # cache recurrent state (cache_utils.py:1237 zeros_like)
    core = out
    if d == F32:  # core_attn_out.reshape(-1, dv) of the strided fp32 alias copies (:759)
        t.alloc(tok * value * F32)
        t.free(out)
        core = tok * value * F32
    z_copy = 0.0  # z.reshape(-1, dv) is a view (copied before if strided)
    normed = _gated_rmsnorm(t, tok * value, tok * nv, d)
    t.free(core, z_copy)
    t.alloc(tok * h * d)  # out_proj
    t.free(normed, state, tok * cd * d, kept, tok * nv * d + tok * nv * F32)
    return t


def _gdn_decode(m: Mixer, b: int, h: int, d: float) -> _Tape:
    """One token with a filled cache: causal_conv1d_update and torch_recurrent_gated_delta_rule."""
    t = _Tape()
    nv, nk, dk, dv, k = m.heads, m.kv_heads or m.heads, m.head_dim, m.value_dim, m.kernel
    cd, value = 2 * nk * dk + nv * dv, nv * dv
    r = max(1, nv // max(1, nk))
    after_conv, _kept = _gdn_projections(t, m, b, d)
    t.alloc(b * cd * (k + 1) * d)  # :330 torch.cat([conv_state, hidden_states])
    _conv_cpu(t, b, cd, k + 1, 2, k, d)
    t.alloc(b * cd * d)  # silu
    t.free(b * cd * 2 * d, b * cd * (k + 1) * d, after_conv)
    _gdn_gates(t, b, nv, d)
    rep = b * nv * dk * d if r > 1 else 0
    t.alloc(rep, rep)
    up = d != F32
    q32, v32, b32 = (b * nv * dk * F32, b * nv * dv * F32, b * nv * F32) if up else (0, 0, 0)
    t.alloc(q32, q32, v32, b32, b32)  # :541-544, decay is already fp32 but (b, 1, nv) → a copy
    if up:
        t.free(rep, rep)
    _l2norm(t, b * nv, dk)
    t.free(q32 if up else rep)
    _l2norm(t, b * nv, dk)
    t.free(q32 if up else rep)
    t.alloc(b * nv * dk * F32)  # query / sqrt(dk)
    t.free(b * nv * dk * F32)
    state = b * nv * dk * dv * F32
    t.alloc(b * nv * dv * F32)  # core_attn_out
    # :565-575 decay (a new state), kv_mem product, k ⊗ delta, the sum: three states at once
    t.alloc(state)
    t.spike(state)
    t.alloc(state, state)
    t.free(state, state)
    t.spike(state)  # state * q
    t.alloc(value * b * d if up else 0)
    t.alloc(value * b * d)
    return t


def _kda_prefill(m: Mixer, b: int, s: int, h: int, d: float) -> _Tape:
    """KimiLinearDeltaAttention.forward (:612-716) with chunk_kimi_delta_attention (:468-568)."""
    t = _Tape()
    nh, dk, k, c = m.heads, m.head_dim, m.kernel, m.chunk or 64
    w, tok = nh * dk, b * s
    sp = -(-s // c) * c
    p = b * nh * sp
    t.alloc(3 * tok * w * d, 3 * tok * w * d)  # :626-633 q/k/v_proj, torch.cat
    t.free(3 * tok * w * d)
    t.alloc(b * 3 * w * k * d)  # cache conv state
    _conv_cpu(t, b, 3 * w, s, s + k - 1, k, d)
    t.alloc(3 * tok * w * d)  # silu
    t.free(b * 3 * w * (s + k - 1) * d, 3 * tok * w * d)
    # :332-344 KimiLinearForgetGate: f_a, f_b, fp32 g (+ dt_bias), softplus by where(g > 20, g, log(1 + exp(g)))
    tw4 = tok * w * F32
    up = d != F32
    t.alloc(tok * dk * d, tok * w * d)
    t.free(tok * dk * d)
    t.alloc(tw4 if up else 0, tw4, tok * w, tw4, tw4)  # .float(), + dt_bias, g > 20, exp, 1 + exp
    t.free(tw4)
    t.alloc(tw4)  # log
    t.free(tw4)
    t.alloc(tw4)  # where
    t.free(tok * w, tw4)
    t.alloc(tw4)  # -decay_rate * g_softplus: g
    t.free(tw4, tok * w * d, tw4, tw4 if up else 0)
    t.alloc(tok * nh * d, tok * nh * d)  # b_proj, sigmoid
    t.free(tok * nh * d)
    # :482-484 transpose(1, 2).contiguous().to(float32) of q, k, v, beta, g
    for _ in range(3):
        if up:
            t.spike(tok * w * d + tw4)
        t.alloc(tw4)
    t.alloc(tok * nh * F32, tw4)
    for _ in range(2):  # :488-489 l2norm (sqrt, /)
        t.spike(tw4 + tok * nh * F32)
        t.alloc(tok * nh * F32, tw4)
        t.free(tok * nh * F32, tw4)
    pd = p * dk * F32
    t.alloc(pd, pd)  # :499 F.pad(query) * scale
    t.free(pd, tw4)
    for _ in range(3):  # key, value, g padded
        t.alloc(pd)
        t.free(tw4)
    t.alloc(p * F32)  # beta padded
    t.free(tok * nh * F32)
    t.alloc(pd, pd)  # :505-506 v_beta, k_beta
    t.alloc(pd)  # :516 g.cumsum
    t.free(pd)
    t.spike(2 * c * c)
    t.alloc(2 * c * c)  # masks
    m3 = p * c * dk * F32  # b × heads × chunks × 64 × 64 × d_k
    t.alloc(m3, m3)  # :519 decay_mask: difference, masked_fill, exp
    t.free(m3)
    t.alloc(m3)
    t.free(m3)
    t.alloc(m3, m3)  # :520 k_beta ⊗ key, · decay_mask: three such tensors live
    t.free(m3)
    a = p * c * F32
    t.alloc(a)  # .sum(-1)
    t.free(m3)
    t.alloc(a)  # masked_fill, neg
    t.free(a)
    t.alloc(a)
    t.free(a)
    t.alloc(c * c * F32, a)  # :526 eye, attn + eye
    t.free(c * c * F32, a)
    t.alloc(pd)  # :527 value = attn @ v_beta
    t.alloc(pd, pd, pd)  # :528 g.exp(), k_beta * ·, attn @ ·
    t.free(pd, pd)
    state = b * nh * dk * dk * F32
    t.alloc(state, pd)  # zeros state, core_attn_out
    t.spike(2 * m3 // max(1, sp // c) + 4 * b * nh * c * dk * F32)  # :542 attn_intra per chunk, q·exp(g)
    return t


def _kda_decode(m: Mixer, b: int, h: int, d: float) -> _Tape:
    """One token: causal_conv1d_update and recurrent_kimi_delta_attention (:414-465)."""
    t = _Tape()
    nh, dk, k = m.heads, m.head_dim, m.kernel
    w = nh * dk
    up = d != F32
    t.alloc(3 * b * w * d, 3 * b * w * d)
    t.free(3 * b * w * d)
    t.alloc(b * 3 * w * (k + 1) * d)
    _conv_cpu(t, b, 3 * w, k + 1, 2, k, d)
    t.alloc(3 * b * w * d)
    t.free(b * 3 * w * 2 * d, b * 3 * w * (k + 1) * d)
    t.alloc(b * w * F32, b * nh * d)  # g, beta
    q = b * w * F32
    t.alloc(*((q, q, q, q, b * nh * F32) if up else ()))
    for _ in range(2):
        t.spike(q + b * nh * F32)
        t.alloc(b * nh * F32, q)
        t.free(b * nh * F32, q if up else 0)
    t.alloc(q)  # query * scale
    t.alloc(q)  # core_attn_out
    state = b * nh * dk * dk * F32
    t.alloc(state)  # state * g_i
    t.spike(state)  # kv_mem product
    t.alloc(state, state)  # k ⊗ delta, the sum
    t.free(state, state)
    t.spike(state)
    return t


def forward_transient(mixer: Mixer, b: int, s: int, h: int, d: float) -> float:
    """Inference prefill of s tokens per sequence into an empty cache: peak bytes above the entry level."""
    if mixer.variant == "kda":
        return _kda_prefill(mixer, b, s, h, d).peak
    return _gdn_prefill(mixer, b, s, h, d).peak


def forward_leaves(mixer: Mixer, b: int, d: float) -> float:
    """What the prefill leaves alive besides its output: the cache's conv state (compute dtype, the whole kernel)
    and recurrent state (fp32), cache_utils.py:1211-1242."""
    nv, nk, dk, dv = mixer.heads, mixer.kv_heads or mixer.heads, mixer.head_dim, mixer.value_dim
    conv = 3 * nv * dk if mixer.variant == "kda" else 2 * nk * dk + nv * dv
    return b * conv * mixer.kernel * d + b * nv * dk * dv * F32


def decode_transient(mixer: Mixer, b: int, h: int, d: float) -> float:
    """One new token per sequence with a filled cache: peak bytes above the entry level."""
    if mixer.variant == "kda":
        return _kda_decode(mixer, b, h, d).peak
    return _gdn_decode(mixer, b, h, d).peak


# ------------------------------------------------------------------------------------------------------------
# Training: what autograd keeps (saved) and the backward's peak
# ------------------------------------------------------------------------------------------------------------

# Live after the training forward besides the saved tensors in every measured shape: one 8-byte block (a 0-dim
# int64/fp64 tensor the autograd graph holds; not traced to a source line).
_GRAPH_SCALAR = 8


def _gdn_saved(m: Mixer, b: int, s: int, d: float) -> float:
    """The storages the Gated DeltaNet graph keeps (Qwen3NextGatedDeltaNet.forward :660-769 with
    torch_chunk_gated_delta_rule :371-510 in training: no cache, so the final-state update of the last chunk is
    dropped from the graph). A view keeps its whole base storage; an op saves only what its gradients need."""
    nv, nk, dk, dv, k, c = m.heads, m.kv_heads or m.heads, m.head_dim, m.value_dim, m.kernel, m.chunk or 64
    r = max(1, nv // max(1, nk))
    tok, key, value = b * s, nk * dk, nv * dv
    cd = 2 * key + value
    n = -(-s // c)
    p = b * nv * n * c  # padded positions × heads
    total = tok * cd * d  # :350 F.conv1d saves its input (the cat / in_proj_qkv output)
    total += b * cd * (s + k - 1) * d  # :358 silu saves its input, the whole conv output the [:, :, :s] slice views
    total += tok * nv * d  # :725 b.sigmoid() saves its result
    total += 2 * nv * F32 + 2 * tok * nv * F32  # :727 A_log.exp() and its neg; a.float() + dt_bias (softplus), softplus
    # :366 l2norm of q and k: x * x and x * inv_norm save x (the fp32 copy; in fp32 without repeat_interleave the
    # conv's silu output the views share), rsqrt saves its result
    total += 2 * tok * nv * F32
    total += 2 * tok * nv * dk * F32 if d != F32 or r > 1 else tok * cd * F32
    total += p * dv * F32 + p * F32  # :435 v_beta = value * beta: padded value, padded beta
    total += p * dk * F32  # :436 k_beta = key * beta: padded key
    total += c * c  # :455 masked_fill saves its bool mask
    total += p * c * F32  # :456 exp saves its result: pairwise_decay
    total += p * dk * F32 + p * c * F32  # :459 k_beta @ key.T saves k_beta; · pairwise_decay saves the matmul output
    total += p * dk * F32 + p * c * F32  # :460 query @ key.T saves the padded query; the same for its output
    total += p * F32  # :461 cum_decay.exp()
    total += p * c * F32 + p * dv * F32 + p * dk * F32  # :470-471 solve_triangular saves A and its results
    total += p * F32  # :488 query * cum_decay.exp(): the exp
    total += p * c * F32  # :498 intra_chunk_attn[:, :, i] @ v_new keeps the whole intra_chunk_attn
    state = b * nv * dk * dv * F32
    total += n * state + n * b * nv * c * dv * F32  # :496-500 every chunk's state and v_new (the matmuls)
    if n > 1:  # the state the first chunk reads is zeros without grad; the last chunk's update is dropped
        total += p * dk * F32  # :497 query[:, :, i] @ state (i ≥ 1) keeps the decayed query
        total += p * dk * F32 + p * F32  # :500 key[:, :, i].T @ v_new keeps the decayed key; :489 its exp
        total += b * nv * n * F32  # :490 chunk_decay
    # Qwen3NextRMSNormGated :66-75 over (tokens × heads, dv)
    total += tok * value * F32 + tok * nv * F32  # pow saves the fp32 copy; rsqrt its result
    total += tok * value * d  # weight * saves hidden_states.to(input_dtype)
    if d != F32:
        gate = tok * value * F32  # gate.to(float32), saved by silu
    elif not m.split_proj and r == 1:  # fp32: an alias of z, a view of the whole in_proj_qkvz output
        gate = tok * (2 * key + 2 * value) * F32
    else:
        gate = tok * value * F32  # in_proj_z's output / z.reshape's copy
    total += gate + tok * value * F32 + tok * value * d  # silu's input; the product saves silu(gate), its other side
    total += tok * value * d  # :768 out_proj saves its input
    return total + _GRAPH_SCALAR


def _kda_saved(m: Mixer, b: int, s: int, d: float) -> float:
    """The storages the KDA graph keeps (KimiLinearDeltaAttention.forward :612-716, chunk_kimi_delta_attention
    :468-568; the last chunk's state update is dropped)."""
    nh, dk, k, c = m.heads, m.head_dim, m.kernel, m.chunk or 64
    w, tok = nh * dk, b * s
    n = -(-s // c)
    p = b * nh * n * c
    blk = b * nh * c * dk * F32  # one chunk's (b, heads, 64, d_k) fp32
    total = tok * 3 * w * d  # :390 F.conv1d saves its input (the torch.cat of q/k/v_proj)
    total += b * 3 * w * (s + k - 1) * d  # :398 silu saves its input, the whole conv output
    total += tok * dk * d  # :335 f_b_proj saves f_a_proj's output
    total += 2 * nh * F32  # :338 exp(A_log), :344 its neg
    total += (
        3 * tok * w * F32 + tok * w
    )  # :342 exp's result, log's input (1 + exp), where's bool condition; :344 g_softplus
    total += tok * nh * d  # :680 sigmoid's result
    total += 2 * (tok * w * F32 + tok * nh * F32)  # :409 l2norm of q, k: x (the fp32 copy) and sqrt's result
    total += p * dk * F32 + p * F32  # :505 padded value and beta
    total += p * dk * F32  # :506 padded key
    m3 = p * c * dk * F32
    total += c * c + m3  # :519 masked_fill's mask; exp saves its result, decay_mask
    total += p * dk * F32 + m3 + c * c  # :520 k_beta, the k_beta ⊗ key product, masked_fill's mask
    total += b * nh * n * F32 * sum(i + i * i for i in range(1, c))  # :522-524 row and sub clones, saved by the mul
    total += p * c * F32 + p * dk * F32  # :527 attn @ v_beta saves attn + eye and v_beta
    total += 2 * p * dk * F32  # :528 g.exp() and k_beta * g.exp() (saved by the matmul)
    total += p * dk * F32 + c * c  # :545 q_i keeps the whole scaled query; :547 masked_fill's mask
    state = b * nh * dk * dk * F32
    # each chunk: g_i.exp(), the state it reads, the q ⊗ k ⊗ decay product, attn_intra, v_new
    total += n * (blk + state + b * nh * c * c * dk * F32 + b * nh * c * c * F32 + blk)
    if n > 1:
        total += (n - 1) * blk  # :545 (q_i * g_i.exp()) saved by the matmul with a state that has grad
        total += p * dk * F32  # :549 k_cumdecay[:, :, i] @ state (i ≥ 1) keeps the whole k_cumdecay
        total += (n - 1) * (b * nh * dk * F32 + 2 * blk)  # :554-555 the exps and k_i · exp (all but the last chunk)
    # KimiLinearRMSNormGated :83-94 over (tokens, heads, d_k)
    total += tok * w * F32 + tok * nh * F32  # pow saves the fp32 copy; rsqrt its result
    total += tok * w * F32 + (dk * F32 if d != F32 else 0)  # weight.to(float32) * hidden_states: both sides
    total += 2 * tok * w * F32  # · sigmoid(gate): the normed states and the sigmoid's result
    total += tok * dk * d  # :712 g_b_proj saves g_a_proj's output
    total += tok * w * d  # :714 o_proj saves its input
    return total + _GRAPH_SCALAR


def saved(mixer: Mixer, b: int, s: int, h: int, d: float) -> float:
    """Training (train mode, grad enabled, no cache): bytes the mixer's forward leaves alive for backward, its
    output excluded (measured by benchmarks/mixers/linear_attention.py, `saved`)."""
    if mixer.variant == "kda":
        return _kda_saved(mixer, b, s, d)
    return _gdn_saved(mixer, b, s, d)


def _gdn_backward(m: Mixer, b: int, s: int, d: float) -> float:
    """Peak of the Gated DeltaNet backward: the larger of the gated norm's backward and the chunk scan's."""
    nv, dk, dv, c = m.heads, m.head_dim, m.value_dim, m.chunk or 64
    tok, value = b * s, nv * dv
    n = -(-s // c)
    p = b * nv * n * c
    blk = b * nv * c * dv * F32
    e32, ed = tok * value * F32, tok * value * d
    # norm (:66-75): the product's two fp32 gradients and the grad of .to(input_dtype) (bf16: ToCopyBackward's fp32
    # copy; fp32: out_proj's grad), the out_proj input freed
    norm = 3 * e32 if d != F32 else 2 * e32
    # scan (:487-500, the last chunk processed first): SelectBackward0 builds full-size zero gradients of the indexed
    # query, key, k_cumdecay (p × dk), new_values (p × dv), intra_chunk_attn (p × 64) and chunk_decay; CopySlices
    # two p × dv buffers of core_attn_out's grad; ToCopyBackward0 the norm input's grad; four chunk blocks — while
    # the norm's saved tensors and the last chunk's v_new and state are gone
    new = (3 * p * dk + p * dv + p * c + b * nv * n + 2 * p * dv) * F32 + ed + 4 * blk
    freed = 3 * e32 + 3 * ed + tok * nv * F32 + 2 * blk
    if n == 1:  # one chunk: the scan's gradients stay below the norm's (qwen35-s40)
        return norm
    return max(norm, new - freed)


def _kda_backward(m: Mixer, b: int, s: int, d: float) -> float:
    """Peak of the KDA backward: in the chunk loop (:540-556), the decay_mask[:, :, i] SelectBackward0 gradients
    (full b × heads × chunks × 64 × 64 × d_k fp32 zeros: the accumulated one and the next) dominate."""
    nh, dk, c = m.heads, m.head_dim, m.chunk or 64
    w, tok = nh * dk, b * s
    n = -(-s // c)
    p = b * nh * n * c
    blk = b * nh * c * dk * F32
    m3 = p * c * dk * F32
    norm_saved = 4 * tok * w * F32 + tok * w * d + tok * dk * d + tok * nh * F32 + (dk * F32 if d != F32 else 0)
    if n == 1:  # the chunk product's two gradients and decay_mask's, one saved product freed
        return 3 * m3 + 4 * blk - norm_saved
    # two decay_mask gradients (the chunk products' gradients and the two freed products cancel), the select
    # gradients of query, key, value, g, k_cumdecay, core_attn_out's CopySlices buffer, o_proj's input grad,
    # five chunk blocks; the norm's saved tensors and nine chunk blocks of the last chunks freed
    new = 2 * m3 + 6 * p * dk * F32 + tok * w * d + 5 * blk
    return new - norm_saved - 9 * blk - b * nh * dk * F32


def backward_transient(mixer: Mixer, b: int, s: int, h: int, d: float) -> float:
    """Training: peak during the mixer's backward above the live level at its start (saved + output grad +
    input), parameter gradients excluded, the input's gradient counted."""
    if mixer.variant == "kda":
        return _kda_backward(mixer, b, s, d)
    return _gdn_backward(mixer, b, s, d)
