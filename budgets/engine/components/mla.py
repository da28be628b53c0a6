"""DeepSeek multi-head latent attention (MLA) as transformers 5.24 runs it on the CPU with SDPA or eager attention
(torch 2.13): the activation bytes of one attention call, and what its DynamicCache holds.

Sources (transformers 5.24.0, torch 2.13.0):
- `DeepseekV3Attention.forward` (transformers/models/deepseek_v3/modeling_deepseek_v3.py:427-483, `expand_kv`
  :407-424, interleaved rope :310-347, RMSNorm :47-52 with its fp32 upcast) and `DeepseekV32Attention.forward`
  (models/deepseek_v32/modeling_deepseek_v32.py:404-479) with the lightning indexer `DeepseekV32Indexer.forward`
  (:180-242, decorated `@torch.no_grad()`: nothing of it is saved for backward), its half-split rope
  `apply_rotary_pos_emb` (:122-144) and LayerNorm `k_norm`.
- SDPA: transformers/integrations/sdpa_attention.py `sdpa_attention_forward` (no padding of v; `is_causal` only for
  q_len > 1 without a mask); torch's CPU backend choice aten/src/ATen/native/transformers/sdp_utils_cpp.cpp
  `check_head_dim_size_cpp`: the CPU flash kernel needs q, k and v of one head size, so MLA (qk head = nope + rope
  ≠ v head) always takes `_scaled_dot_product_attention_math` (attention.cpp), which upcasts bf16/fp16 q, k, v to
  fp32 (`allowFP16BF16ReductionMathSDP` off by default), scales q and k by sqrt(scale) into copies, builds the
  causal mask itself when `is_causal` (bool L × S → fp32 additive), materialises fp32 scores and `_safe_softmax`
  (softmax, an isneginf bool map, a per-row bool), casts the probabilities back (`attn.to(origin_dtype)`, the second
  output, dropped), copies v contiguous for the matmul and casts the fp32 output back.
- Eager: `eager_attention_forward` (modeling_deepseek_v3.py:237-259; GLM-4.7-Flash's Glm4MoeLiteAttention,
  modeling_glm4_moe_lite.py:110-132 and :222-350, is the same code): compute-dtype scores, `* scaling`,
  `+ attention_mask`, softmax in fp32 (on the CPU a converted fp32 copy, then `_softmax`) cast back, a contiguous
  copy of the strided v for the second matmul; the call returns the probabilities, which stay alive through o_proj.
- Only the flash-attention-2 integration pads v to the qk head size (integrations/flash_attention.py:63-65, and
  crops after); SDPA and eager do not.
- Cache: `cache.update(kv_nope, k_rot)` runs on the compressed latent (modeling_deepseek_v3.py:458-460): DynamicLayer
  keeps the normed latent [b, 1, k, kv_lora_rank] as "keys" and the roped k_rot [b, 1, k, rope] as "values"
  (cache_utils.py:136-137, grown by torch.cat), and `expand_kv` re-runs kv_b_proj over the whole cache on every call.
  V3.2's `DynamicIndexedLayer.update_indexer` (cache_utils.py:337-350) adds the indexer key [b, k, index_head_dim].

Every size below is bytes; `d` the compute dtype's bytes. The functions replay, in order, the allocations and frees
the real call makes (`_Trace`), so the peak is where it falls (softmax, the indexer's broadcast, decode's fp32 k/v
copies). mkldnn's per-matmul bf16 scratch (a few hundred KB, freed inside the matmul, never at the peak measured) is
left out.

CUDA: torch's sdp_utils.cpp `check_head_dim_size_flash` refuses unequal q/k/v head sizes, but
`check_head_dim_size_mem_efficient` accepts v ≠ qk when both are multiples of the GEMM alignment (8 for 16-bit on
sm80+), so on CUDA SDPA runs the memory-efficient kernel (no score matrix, no fp32 copies): `cuda=True` models that
path as the output plus its fp32 logsumexp. The indexer's broadcast matmul is the same on CUDA (plain torch ops).
"""

from __future__ import annotations

from budgets.engine.models.layers import Mixer

FP32 = 4
BOOL = 1
INT64 = 8
INT32 = 4


class _Trace:
    """Live bytes of one call, replayed allocation by allocation."""

    def __init__(self, keep: frozenset[str] = frozenset()) -> None:
        self.keep = keep  # names autograd saves (training): never freed
        self.live: dict[str, float] = {}
        self.now = 0.0
        self.peak = 0.0

    def alloc(self, name: str, nbytes: float) -> None:
        if nbytes <= 0:
            return
        assert name not in self.live, name
        self.live[name] = nbytes
        self.now += nbytes
        self.peak = max(self.peak, self.now)

    def release(self, nbytes: float) -> None:
        """Free bytes that were live at entry (the cache tensors torch.cat replaces)."""
        self.now -= nbytes

    def free(self, *names: str) -> None:
        for name in names:
            if name not in self.keep:
                self.now -= self.live.pop(name, 0.0)


def math_path(mixer: Mixer, cuda: bool = False) -> bool:
    """Whether SDPA takes torch's math path: always on the CPU unless q/k and v share a head size (then the CPU
    flash kernel runs); on CUDA only when even the memory-efficient kernel is refused (head sizes not multiples of
    8)."""
    if cuda:
        return mixer.head_dim % 8 != 0 or mixer.value_dim % 8 != 0
    return mixer.head_dim != mixer.value_dim


def _rms_norm(t: _Trace, rows: int, width: int, d: int, out: str, p: str) -> None:
    """DeepseekV3RMSNorm.forward (modeling_deepseek_v3.py:47-52) on `rows` × `width`; leaves `out` (rows × width ×
    d); `p` names its temporaries."""
    up = d != FP32  # hidden_states.to(torch.float32): a copy unless already fp32
    t.alloc(f"{p}.up", rows * width * FP32 if up else 0)
    t.alloc(f"{p}.pow", rows * width * FP32)
    t.alloc(f"{p}.var", rows * FP32)
    t.free(f"{p}.pow")
    t.alloc(f"{p}.add", rows * FP32)  # variance + eps
    t.alloc(f"{p}.rsqrt", rows * FP32)
    t.free(f"{p}.add")
    t.alloc(f"{p}.mul", rows * width * FP32)
    t.free(f"{p}.rsqrt", f"{p}.up")
    t.alloc(f"{p}.down", rows * width * d if up else 0)  # .to(input_dtype)
    t.alloc(out, rows * width * d)  # self.weight * ...
    t.free(f"{p}.down", f"{p}.mul", f"{p}.var")


def _rope_interleave(t: _Trace, elems: int, d: int, out: str) -> None:
    """apply_rotary_pos_emb_interleave (modeling_deepseek_v3.py:338-347) for one of q / k of `elems` rope elements:
    four half-size products, a sub and an add, then the cat."""
    half = elems // 2 * d
    t.alloc("rope.a1", half)
    t.alloc("rope.a2", half)
    t.alloc("rope.lo", half)
    t.free("rope.a1", "rope.a2")
    t.alloc("rope.b1", half)
    t.alloc("rope.b2", half)
    t.alloc("rope.hi", half)
    t.free("rope.b1", "rope.b2")
    t.alloc(out, elems * d)
    t.free("rope.lo", "rope.hi")


def _rope_half(t: _Trace, elems: int, d: int, out: str) -> None:
    """apply_rotary_pos_emb (modeling_deepseek_v32.py:141-144, rotate_half :114-118) for one of q / k."""
    full = elems * d
    t.alloc("rope.xcos", full)
    t.alloc("rope.neg", full / 2)
    t.alloc("rope.rot", full)
    t.free("rope.neg")
    t.alloc("rope.rsin", full)
    t.free("rope.rot")
    t.alloc(out, full)
    t.free("rope.rsin", "rope.xcos")


def _indexer(t: _Trace, m: Mixer, b: int, s: int, k: int, h: int, d: int, topk: int) -> None:
    """DeepseekV32Indexer.forward (modeling_deepseek_v32.py:180-242); leaves the int32 top-k indices "idx.topk"
    and, with a cache, grows the indexer key cache ("cache.index")."""
    n, hi, di, r = b * s, m.index_heads, m.index_dim, m.rope_dim
    t.alloc("idx.q", n * hi * di * d)  # wq_b(q_resid)
    t.alloc("idx.wk", n * di * d)  # wk(hidden_states)
    t.alloc("idx.k", n * di * d)  # k_norm (LayerNorm; its mean/rstd are freed at once)
    t.alloc("idx.ln_stats", 2 * n * d)
    t.free("idx.ln_stats", "idx.wk")
    _rope_half(t, n * hi * r, d, "idx.q_rot")
    _rope_half(t, n * r, d, "idx.k_rot")
    t.alloc("idx.q_cat", n * hi * di * d)  # torch.cat([q_rot, q_pass])
    t.alloc("idx.k_cat", n * di * d)
    t.alloc("cache.index", b * k * di * d)  # update_indexer: torch.cat([cached, k]), the old one freed
    t.release(b * (k - s) * di * d)
    t.free("idx.k_cat")
    up = d != FP32
    t.alloc("idx.qf", n * hi * di * FP32 if up else 0)  # q.float()
    t.alloc("idx.kf", b * k * di * FP32 if up else 0)  # k.transpose(-1, -2).float()
    # [b, s, hi, di] @ [b, 1, di, k]: matmul expands k over the s queries and, unless that expand is a view
    # (b = 1 or s = 1), copies it contiguous for bmm (the 67 MB of the round-10 prefill)
    t.alloc("idx.k_bcast", b * s * di * k * FP32 if b > 1 and s > 1 else 0)
    t.alloc("idx.scores", b * s * hi * k * FP32)
    t.free("idx.k_bcast", "idx.qf", "idx.kf")
    t.alloc("idx.scaled", b * s * hi * k * FP32)  # * softmax_scale
    t.free("idx.scores")
    t.alloc("idx.relu", b * s * hi * k * FP32)
    t.free("idx.scaled")
    t.alloc("idx.x32", n * h * FP32 if up else 0)  # hidden_states.to(weights_proj.weight.dtype) (kept fp32)
    t.alloc("idx.w", n * hi * FP32)
    t.free("idx.x32")
    t.alloc("idx.w2", n * hi * FP32)  # * n_heads ** -0.5
    t.free("idx.w")
    t.alloc("idx.index_scores", b * s * k * FP32)  # weights @ scores
    t.alloc("idx.not_mask", b * s * k * BOOL)  # ~attention_mask (bool)
    t.alloc("idx.masked", b * s * k * FP32)  # masked_fill
    t.free("idx.not_mask", "idx.index_scores")
    kk = min(topk, k)
    t.alloc("idx.topv", b * s * kk * FP32)
    t.alloc("idx.topi", b * s * kk * INT64)
    t.free("idx.topv")
    t.alloc("idx.topk", b * s * kk * INT32)  # .to(torch.int32)
    t.free("idx.topi")
    for name in [x for x in t.live if x.startswith("idx.") and x != "idx.topk"]:
        t.free(name)


def _sdpa_math(t: _Trace, m: Mixer, b: int, s: int, k: int, d: int, mask: str) -> None:
    """torch 2.13 `_scaled_dot_product_attention_math` via `scaled_dot_product_attention`; leaves "sdpa.out"
    (b × heads × s × v, compute dtype). `mask`: "causal" (is_causal, built inside), "bool" (an explicit [b, 1, s, k]
    bool mask, converted to an additive one in the compute dtype first) or "" (none)."""
    hq, qk, v = m.heads, m.head_dim, m.value_dim
    up = d != FP32
    if mask == "bool":  # convert_boolean_attn_mask: where(mask, 0, -inf) in query's (origin) dtype
        t.alloc("sdpa.mask", b * s * k * d)
    t.alloc("sdpa.qf", b * hq * s * qk * FP32 if up else 0)
    t.alloc("sdpa.kf", b * hq * k * qk * FP32 if up else 0)
    t.alloc("sdpa.vf", b * hq * k * v * FP32 if up else 0)
    t.alloc("sdpa.qs", b * hq * s * qk * FP32)  # query_acc * sqrt(scale)
    if mask == "causal":  # ones(L, S).tril() → where(mask, 0, -inf) in fp32
        t.alloc("sdpa.ones", s * k * BOOL)
        t.alloc("sdpa.tril", s * k * BOOL)
        t.free("sdpa.ones")
        t.alloc("sdpa.causal", s * k * FP32)
        t.free("sdpa.tril")
    t.alloc("sdpa.ks", b * hq * k * qk * FP32)  # key.transpose(-2, -1) * sqrt(scale)
    t.alloc("sdpa.scores", b * hq * s * k * FP32)
    t.free("sdpa.ks")
    if mask == "bool" and up:  # attn.add_(mask): the compute-dtype mask cast to fp32 for the in-place add
        t.alloc("sdpa.mask32", b * s * k * FP32)
        t.free("sdpa.mask32")
    t.alloc("sdpa.softmax", b * hq * s * k * FP32)  # _safe_softmax
    t.alloc("sdpa.neginf", b * hq * s * k * BOOL)
    t.alloc("sdpa.allmasked", b * hq * s * BOOL)
    t.free("sdpa.allmasked", "sdpa.neginf", "sdpa.scores")
    t.alloc("sdpa.probs", b * hq * s * k * d if up else 0)  # attn.to(origin_dtype), the dropped second output
    t.alloc("sdpa.v_contig", b * hq * k * v * FP32)  # matmul copies the strided v contiguous
    t.alloc("sdpa.out32", b * hq * s * v * FP32)
    t.free("sdpa.v_contig")
    if up:
        t.alloc("sdpa.out", b * hq * s * v * d)
        t.free("sdpa.out32")
    else:
        t.live["sdpa.out"] = t.live.pop("sdpa.out32")
    for name in [x for x in t.live if x.startswith("sdpa.") and x != "sdpa.out"]:
        t.free(name)


def _eager(t: _Trace, m: Mixer, b: int, s: int, k: int, d: int) -> None:
    """transformers' `eager_attention_forward` (modeling_deepseek_v3.py:237-259, the same in
    modeling_glm4_moe_lite.py:110-132); leaves "attn_out" ([b, s, heads, v], compute dtype) and the probabilities
    "eager.probs" it returns (the forward and the decoder layer hold them: `attn_output, attn_weights = ...`,
    `hidden_states, _ = self.self_attn(...)`). `repeat_kv` is a no-op: MLA builds k and v per query head
    (`expand_kv`, num_key_value_groups = 1). The mask is always a materialised additive one under eager (built by
    `create_causal_mask` outside the call, not counted here)."""
    hq, v = m.heads, m.value_dim
    up = d != FP32
    sc = b * hq * s * k
    t.alloc("eager.qk", sc * d)  # matmul(query, key_states.transpose(2, 3)): bmm on views, no copy
    t.alloc("eager.scaled", sc * d)  # * scaling
    t.free("eager.qk")
    t.alloc("eager.masked", sc * d)  # + attention_mask
    t.free("eager.scaled")
    # softmax(..., dtype=torch.float32): on the CPU `input.toType(float)` (a copy unless fp32), then _softmax
    t.alloc("eager.scores32", sc * FP32 if up else 0)
    t.alloc("eager.softmax", sc * FP32)
    t.free("eager.scores32")
    if up:
        t.alloc("eager.probs", sc * d)  # .to(query.dtype); the fp32 softmax and the masked scores then go
        t.free("eager.softmax")
    else:  # fp32: .to is a no-op, the probabilities are the softmax output
        t.live["eager.probs"] = t.live.pop("eager.softmax")
    t.free("eager.masked")
    # dropout (p = 0.0) returns its input; matmul(attn_weights, value_states): v is a strided slice of kv_b whose
    # (b, heads) do not fold into one batch dimension, so matmul copies it contiguous
    t.alloc("eager.v", b * hq * k * v * d)
    t.alloc("eager.out", b * hq * s * v * d)
    t.free("eager.v")
    t.alloc("attn_out", b * s * hq * v * d)  # transpose(1, 2).contiguous()
    t.free("eager.out")


def _fused(t: _Trace, m: Mixer, b: int, s: int, d: int) -> None:
    """A fused SDPA kernel (CPU flash with equal head sizes; CUDA memory-efficient): the output and an fp32
    logsumexp, no score matrix."""
    t.alloc("sdpa.out", b * m.heads * s * m.value_dim * d)
    t.alloc("sdpa.lse", b * m.heads * s * FP32)
    t.free("sdpa.lse")


def _saved_names(m: Mixer, d: int, attention: str = "sdpa") -> frozenset[str]:
    """What autograd keeps from the forward (training): per RMSNorm the fp32 input of pow/mul (bf16: the upcast
    copy; fp32: the norm's input itself, for kv_a_layernorm the whole kv_a_proj output it is a slice of), rsqrt, the
    operand of `weight *` (bf16: the down-cast; fp32: the product) and the normed output (the next linear's input);
    the math SDPA's scaled q and k, fp32 probabilities and contiguous fp32 v (the two matmuls); o_proj's input. The
    rope products save only the non-grad cos/sin, the cat/split/copy_ nothing; the indexer runs under no_grad.
    Eager: the two matmuls keep query, key (the transpose is a view), the compute-dtype probabilities and the
    contiguous v copy; the softmax its fp32 output (the cast and `* scaling` / `+ mask` nothing)."""
    fp32 = d == FP32
    names = {"kvn.rsqrt", "kv_nope", "attn_out"}
    if attention == "eager":
        names |= {"query", "key", "eager.softmax", "eager.probs", "eager.v"}
    else:
        names |= {"sdpa.qs", "sdpa.ks", "sdpa.softmax", "sdpa.v_contig"}
    names |= {"ckv", "kvn.mul"} if fp32 else {"kvn.up", "kvn.down"}
    if m.q_rank:
        names |= {"qn.rsqrt", "q_resid"} | ({"q_a", "qn.mul"} if fp32 else {"qn.up", "qn.down"})
    return frozenset(names)


def _forward(
    m: Mixer,
    b: int,
    s: int,
    k: int,
    h: int,
    d: int,
    topk: int,
    cuda: bool,
    cache: bool,
    train: bool = False,
    attention: str = "sdpa",
) -> tuple[_Trace, float]:
    t = _Trace(_saved_names(m, d, attention) if train else frozenset())
    n, hq, qk, lat, r = b * s, m.heads, m.head_dim, m.latent_dim, m.rope_dim
    nope, v = qk - r, m.value_dim
    v32 = m.index_dim > 0
    if m.q_rank:
        t.alloc("q_a", n * m.q_rank * d)
        _rms_norm(t, n, m.q_rank, d, "q_resid", "qn")
        t.free("q_a")
        t.alloc("q", n * hq * qk * d)  # q_b_proj
        if not v32:  # V3.2 keeps q_resid for the indexer
            t.free("q_resid")
    else:
        t.alloc("q", n * hq * qk * d)  # q_proj
    t.alloc("ckv", n * (lat + r) * d)  # kv_a_proj_with_mqa
    _rms_norm(t, n, lat, d, "kv_nope", "kvn")  # kv_a_layernorm on the latent slice
    _rope_interleave(t, n * hq * r, d, "q_rot")
    _rope_interleave(t, n * r, d, "k_rot")
    if cache:  # DynamicLayer.update: torch.cat onto the cached latent and rope key, the old ones freed
        t.alloc("cache.keys", b * k * lat * d)
        t.release(b * (k - s) * lat * d)
        t.alloc("cache.values", b * k * r * d)
        t.release(b * (k - s) * r * d)
        t.free("kv_nope", "k_rot")
    t.alloc("query", n * hq * qk * d)  # torch.cat((q_pass, q_rot))
    t.alloc("kv_b", b * k * hq * (nope + v) * d)  # kv_b_proj over every cached position
    t.alloc("key", b * hq * k * qk * d)  # new_empty + the two copy_
    mask = ""
    if v32:
        _indexer(t, m, b, s, k, h, d, topk)
        t.alloc("index.ones", b * s * k * BOOL)  # new_ones(...).scatter(-1, topk_indices.long(), False)
        t.alloc("index.long", b * s * min(topk, k) * INT64)
        t.alloc("index.mask", b * s * k * BOOL)
        t.free("index.ones", "index.long")
        t.alloc("index.not", b * s * k * BOOL)  # attention_mask & ~index_mask
        t.alloc("attn_mask", b * s * k * BOOL)
        t.free("index.not")
        mask = "bool"
    elif s > 1:
        mask = "causal"  # no padding: create_causal_mask returns None, SDPA gets is_causal=True
    if attention == "eager":
        _eager(t, m, b, s, k, d)
    else:
        if math_path(m, cuda):
            _sdpa_math(t, m, b, s, k, d, mask)
        else:
            _fused(t, m, b, s, d)
        t.alloc("attn_out", n * hq * v * d)  # sdpa_attention_forward: transpose(1, 2).contiguous()
        t.free("sdpa.out")
    t.alloc("out", n * h * d)  # o_proj (under eager beside the probabilities the call returns)
    growth = b * s * (lat + r + m.index_dim) * d if cache else 0.0
    return t, growth


def forward_transient(
    mixer: Mixer,
    b: int,
    s: int,
    k: int,
    h: int,
    d: int,
    topk: int = 2048,
    cuda: bool = False,
    cache: bool = True,
    attention: str = "sdpa",
) -> float:
    """Inference (no_grad, eval), one attention call as generate makes it with its DynamicCache: the peak bytes above
    the live bytes at entry, the cache growth excluded (the engine counts the cache: b × k ×
    `Mixer.kv_elements_per_token()` × d after the call: the latent, the roped key and V3.2's indexer key,
    the same elements as vLLM's MLA spec). Prefill: s = k = prompt; decode: s = 1, k = cache
    length after the update. `topk`: V3.2's index_topk. The o_proj output (b × s × h × d) is part of it when the
    peak falls after it (decode only, if ever). `attention`: "sdpa" (the math path or a fused kernel, `math_path`) or
    "eager" (`_eager`, the same on the CPU and CUDA: plain matmuls and softmax)."""
    t, growth = _forward(mixer, b, s, k, h, d, topk, cuda, cache, attention=attention)
    return t.peak - growth


def saved(
    mixer: Mixer, b: int, s: int, h: int, d: int, topk: int = 2048, cuda: bool = False, attention: str = "sdpa"
) -> float:
    """Training (train mode, grad on, no cache): the bytes the attention forward leaves for backward (`_saved_names`).
    bf16, q LoRA r, latent L, math path: 2 × (n × (4 + 2d) × w + 4n) for w in (r, L), + 4 × b × heads × s × (2 qk +
    s + v) + n × heads × v × d, with n = b × s. Eager: the same norm and output terms, + b × heads × s × ((2 qk + v) ×
    d + 4s + s × d) for bf16 (fp32: the probabilities are the softmax, the SDPA figure)."""
    if attention != "eager" and not math_path(mixer, cuda):
        return _fused_saved(mixer, b, s, d)
    t, _ = _forward(mixer, b, s, s, h, d, topk, cuda, cache=False, train=True, attention=attention)
    return sum(v for name, v in t.live.items() if name in t.keep)


def _fused_saved(mixer: Mixer, b: int, s: int, d: int) -> float:
    """MLA under a fused SDPA kernel (the CPU flash kernel when q/k and v share a head size; CUDA's memory-efficient
    kernel, which takes v ≠ q/k head sizes): the kernel keeps q and the per-head k (heads × qk head size), v and the
    output (heads × v head size) and an fp32 log-sum-exp per head and query; the q and latent RMSNorms keep what
    `saved` counts for them on the math path; o_proj reads the output. Not measured: the CPU flash kernel's buffers
    depend on the thread count, and there is no GPU here; the budget's range carries it."""
    n = b * s
    heads, qk, v = mixer.heads, mixer.head_dim, mixer.value_dim
    attention = n * heads * (2 * qk + 2 * v) * d + b * heads * s * FP32
    norms = sum(2 * (n * (FP32 + 2 * d) * w + FP32 * n) for w in (mixer.q_rank, mixer.latent_dim) if w)
    return attention + norms


def train_forward_transient(
    mixer: Mixer, b: int, s: int, h: int, d: int, topk: int = 2048, cuda: bool = False, attention: str = "sdpa"
) -> float:
    """Training: the peak during the attention forward above its entry (saved tensors, the transients of the moment
    and, at the end, the output). V3.2's indexer broadcast makes this the layer's peak (no_grad, so not saved). Under a
    fused kernel: what it keeps (`_fused_saved`), no transient beyond it modelled."""
    if attention != "eager" and not math_path(mixer, cuda):
        return _fused_saved(mixer, b, s, d)
    t, _ = _forward(mixer, b, s, s, h, d, topk, cuda, cache=False, train=True, attention=attention)
    return t.peak
