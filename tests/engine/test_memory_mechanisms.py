"""Mechanisms of the activation model, each checked on a small CPU workload (exact tensor view)."""

from __future__ import annotations

from budgets.engine import Workload, estimate

LLAMA = {
    "model_type": "llama",
    "num_hidden_layers": 4,
    "hidden_size": 384,
    "num_attention_heads": 6,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "intermediate_size": 1024,
    "vocab_size": 32000,
    "tie_word_embeddings": False,
}
MIXTRAL = {
    "model_type": "mixtral",
    "num_hidden_layers": 4,
    "hidden_size": 384,
    "num_attention_heads": 6,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "intermediate_size": 768,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "vocab_size": 16000,
}


def _gen(cfg, *, b, s, n, layout="dynamic", engine="transformers", attention="sdpa", precision="fp32"):
    return Workload.model_validate(
        {
            "task": "inference",
            "model": {"hf_config": dict(cfg)},
            "precision": {"weights": precision, "compute": precision, "kv_cache": precision},
            "inference": {
                "max_input_tokens": s,
                "max_output_tokens": n,
                "concurrent_sessions": b,
                "engine": engine,
                "kv_cache_layout": layout,
            },
            "runtime": {"device": "cpu", "attention": attention},
        }
    )


def _phase(pd, name):
    return next(p for p in pd.phases if p.name == name)


def test_moe_prefill_materialises_all_routed_rows():
    # grouped_mm experts: gathered input, gate_up, act(gate) and act*up for tokens × k rows at once
    b, s = 8, 256
    pd = estimate(_gen(MIXTRAL, b=b, s=s, n=4)).per_device
    rows = b * s * 2
    grouped = rows * (384 + 4 * 768) * 4
    assert _phase(pd, "prefill").bytes - pd.component("weights").bytes > grouped


def test_generate_sampling_instant_holds_fp32_score_copies():
    # many sessions × a large vocabulary: the peak is between forwards, in the logits processors
    b, s, n = 32, 64, 192
    w = _gen(LLAMA, b=b, s=s, n=n, precision="bf16")
    pd = estimate(w).per_device
    assert pd.peak_phase == "sample"
    sample = _phase(pd, "sample")
    weights = pd.component("weights").bytes
    kv_final = 2 * 4 * 2 * 64 * 2 * b * (s + n - 1)
    logits = b * 32000 * (2 + 5 * 4)  # bf16 logits + five fp32 [b, V] buffers
    assert sample.bytes >= weights + kv_final + logits
    assert sample.low < sample.bytes < sample.high  # without the processors: one fp32 copy


def test_static_cache_holds_one_position_less_than_the_longest_request():
    b, s, n = 2, 100, 20
    per_pos = 2 * 4 * 2 * 64 * 4 * b
    kv = estimate(_gen(LLAMA, b=b, s=s, n=n, layout="contiguous")).per_device.component("kv_cache")
    assert kv.bytes == per_pos * (s + n - 1)
    generic = estimate(_gen(LLAMA, b=b, s=s, n=n, layout="contiguous", engine="generic")).per_device
    assert generic.component("kv_cache").bytes == per_pos * (s + n)


def test_eager_scores_peak_without_the_attention_output():
    # at QK^T·scale: roped q, repeat_kv K/V, two fp32 score tensors and three hidden-sized tensors
    b, s, n = 8, 512, 8
    pd = estimate(_gen(LLAMA, b=b, s=s, n=n, layout="contiguous", attention="eager")).per_device
    k = s + n - 1
    tok = b * s
    scores = 2 * b * 6 * s * k * 4
    q = tok * 384 * 4
    rep = 2 * b * 6 * k * 64 * 4
    hidden = 3 * tok * 384 * 4
    mask = b * s * k * 4
    rope = 2 * tok * 64 * 4
    ids = tok * 32  # input_ids, position_ids, attention_mask, generate's input_ids clone (int64)
    expected = scores + q + rep + hidden + mask + rope + ids
    prefill = _phase(pd, "prefill").bytes - pd.component("weights").bytes - pd.component("kv_cache").bytes
    assert prefill == expected


def test_tiny_training_range_is_not_a_point():
    w = Workload.model_validate(
        {
            "task": "training",
            "model": {"hf_config": dict(LLAMA)},
            "precision": {"weights": "fp32", "compute": "fp32", "gradients": "fp32", "master_weights": None},
            "training": {
                "micro_batch_size": 1,
                "sequence_length": 64,
                "optimizer": "adamw",
                "activation_checkpointing": "none",
                "method": "full",
            },
            "runtime": {"device": "cpu", "attention": "sdpa"},
        }
    )
    pd = estimate(w).per_device
    assert pd.peak_phase == "optimizer_step"
    assert pd.total_low_bytes < pd.total_bytes < pd.total_high_bytes
    assert "foreach" in pd.component("workspace").note


# --- mechanisms found by the round-1 hold-out runs ------------------------------------------------

PHI3 = {
    "model_type": "phi3",
    "num_hidden_layers": 4,
    "hidden_size": 384,
    "num_attention_heads": 6,
    "num_key_value_heads": 6,
    "intermediate_size": 1024,
    "vocab_size": 32000,
    "sliding_window": None,
}
GEMMA2 = {
    "model_type": "gemma2",
    "num_hidden_layers": 4,
    "hidden_size": 384,
    "num_attention_heads": 6,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "intermediate_size": 1024,
    "vocab_size": 32000,
    "sliding_window": 64,
    "layer_types": ["sliding_attention", "full_attention"] * 2,
}
GPT_NEOX = {
    "model_type": "gpt_neox",
    "num_hidden_layers": 4,
    "hidden_size": 384,
    "num_attention_heads": 6,
    "intermediate_size": 1536,
    "vocab_size": 16000,
}


def _train(cfg, *, b, s, attention="sdpa", precision="fp32", ckpt="none"):
    return Workload.model_validate(
        {
            "task": "training",
            "model": {"hf_config": dict(cfg)},
            "precision": {"weights": precision, "compute": precision, "gradients": precision, "master_weights": None},
            "training": {
                "micro_batch_size": b,
                "sequence_length": s,
                "optimizer": "sgd",
                "activation_checkpointing": ckpt,
                "method": "full",
            },
            "runtime": {"device": "cpu", "attention": attention},
        }
    )


def _prefill_activations(pd):
    return _phase(pd, "prefill").bytes - pd.component("weights").bytes - pd.component("kv_cache").bytes


def test_bf16_eager_softmax_copies_the_scores_to_fp32():
    # softmax(x, dtype=float32) of a bf16 x: masked scores (2 B) + fp32 copy (4) + fp32 output (4)
    b, s, n = 8, 512, 8
    pd = estimate(_gen(LLAMA, b=b, s=s, n=n, layout="contiguous", attention="eager", precision="bf16")).per_device
    k = s + n - 1
    tok = b * s
    expected = (
        b * 6 * s * k * (2 + 4 + 4)  # scores
        + tok * 384 * 2  # roped q
        + 2 * b * 6 * k * 64 * 2  # repeat_kv K and V
        + 3 * tok * 384 * 2  # embeds, layer input, normed input
        + b * s * k * 2  # additive mask
        + 2 * tok * 64 * 2  # cos, sin
        + tok * 32  # input_ids, position_ids, attention_mask, input_ids clone (int64)
    )
    assert _prefill_activations(pd) == expected


def test_fused_qkv_output_stays_alive_through_the_attention():
    # Phi3Attention binds `qkv = self.qkv_proj(x)`; a Llama layer keeps only the roped q
    b, s = 8, 512
    llama_mha = {**LLAMA, "num_key_value_heads": 6}
    phi3 = estimate(_gen(PHI3, b=b, s=s, n=8, attention="eager")).per_device
    llama = estimate(_gen(llama_mha, b=b, s=s, n=8, attention="eager")).per_device
    assert phi3.component("weights").bytes == llama.component("weights").bytes
    assert _prefill_activations(phi3) - _prefill_activations(llama) == b * s * 3 * 384 * 4


def test_moe_unpermute_instant_dominates_narrow_experts():
    # expert width 96 < 3/4 · 384: gathered input, down output, weighted output, un-permuted copy
    cfg = {
        **MIXTRAL,
        "model_type": "qwen3_moe",
        "num_experts": 16,
        "num_experts_per_tok": 4,
        "moe_intermediate_size": 96,
        "head_dim": 64,
    }
    b, s = 8, 256
    pd = estimate(_gen(cfg, b=b, s=s, n=4)).per_device
    rows = b * s * 4
    assert _prefill_activations(pd) > rows * 4 * 384 * 4 > rows * (384 + 4 * 96) * 4


def test_final_logit_softcapping_keeps_the_tanh_output_into_backward():
    b, s = 2, 256
    capped = estimate(_train(GEMMA2, b=b, s=s, attention="eager", ckpt="full")).per_device
    plain = estimate(_train({**GEMMA2, "final_logit_softcapping": None}, b=b, s=s, attention="eager", ckpt="full"))
    assert capped.peak_phase == "backward" and plain.per_device.peak_phase == "backward"
    assert capped.total_bytes - plain.per_device.total_bytes == b * s * 32000 * 4


def test_sliding_layers_hold_the_whole_prompt_after_a_dynamic_prefill():
    # DynamicSlidingWindowLayer.update keeps a view of the full concatenation until the next step
    b, s = 2, 512
    pd = estimate(_gen(GEMMA2, b=b, s=s, n=2, attention="eager")).per_device
    assert pd.component("kv_cache").bytes == 4 * 2 * 2 * 64 * 4 * b * s


def test_gemma2_builds_two_eager_masks_and_gemma3_sdpa_a_sliding_one():
    from budgets.engine.components import activations as act
    from budgets.engine.models import from_hf_config

    x = act.Shape(b=2, s=256, k=256, h=384, q=384, kv=128, heads=6, inter=1024, vocab=32000, d=2)
    gemma2 = from_hf_config(GEMMA2)
    assert act.attention_masks(gemma2, x, "eager", 256) == (2 * 2 * 256 * 256 * 2, 0)
    gemma3 = from_hf_config({**GEMMA2, "model_type": "gemma3_text"})
    # SDPA skips the full causal mask; the sliding one is a bool mask, converted per call
    assert act.attention_masks(gemma3, x, "sdpa", 256) == (2 * 256 * 256, 2 * 256 * 256 * 2)
    short = act.Shape(b=2, s=32, k=32, h=384, q=384, kv=128, heads=6, inter=1024, vocab=32000, d=2)
    assert act.attention_masks(gemma3, short, "sdpa", 32) == (0, 0)
    mistral = from_hf_config({**LLAMA, "model_type": "mistral", "sliding_window": 4096})
    assert act.attention_masks(mistral, x, "eager", 256) == (2 * 256 * 256 * 2, 0)


def test_gpt_neox_saves_the_fused_qkv_the_output_copy_and_one_shared_norm_input():
    from budgets.engine.components import activations as act
    from budgets.engine.models import from_hf_config

    spec = from_hf_config(GPT_NEOX)
    assert spec.parallel_residual and spec.rotary_dim == 16  # partial_rotary_factor 0.25 of 64
    tok, h, d = 4 * 128, 384, 4
    x = act.Shape(b=4, s=128, k=128, h=h, q=h, kv=h, heads=6, inter=1536, vocab=16000, d=d)
    norms = 3 * tok * h * d + 2 * 2 * tok * 4  # two outputs, one shared input; mean/rstd
    attn = (3 + 2 + 2) * tok * h * d + 4 * 6 * 128 * 4  # fused qkv, roped q/k, output + copy; lse
    mlp = 2 * tok * 1536 * d
    assert act.training_saved_per_layer(spec, x, "sdpa", False, "none") == norms + attn + mlp


def test_norm_and_qk_norm_saved_bytes():
    from budgets.engine.components import activations as act
    from budgets.engine.models import from_hf_config

    gemma = from_hf_config(GEMMA2)
    llama = from_hf_config(LLAMA)
    # Gemma: fp32 copy + fp32 normalized (+ output); Llama: fp32 copy + cast back (+ output)
    assert act._rms_saved_per_element(gemma, 2, True) == 10
    assert act._rms_saved_per_element(llama, 2, True) == 8
    assert act._rms_saved_per_element(llama, 4, False) == 8
    qwen3 = from_hf_config({**LLAMA, "model_type": "qwen3"})
    x = act.Shape(b=1, s=64, k=64, h=384, q=384, kv=128, heads=6, inter=1024, vocab=32000, d=4)
    with_norm = act._attention_saved(qwen3, x, "sdpa", False)
    without = act._attention_saved(llama, x, "sdpa", False)
    # the q/k norm outputs are not saved; each norm's rsqrt keeps one fp32 value per head row
    assert with_norm - without == 64 * (384 + 128) * 8 + 64 * (6 + 2) * 4
    # every RMSNorm keeps rsqrt(variance + eps) (fp32, one per token); Gemma also its fp32 (1 + w)
    assert act._norm_saved(llama, x) == 64 * 384 * 12 + 64 * 4
    assert act._norm_saved(gemma, x) == 64 * 384 * 12 + 64 * 4 + 384 * 4


def test_softcapping_flags_follow_the_config():
    from budgets.engine.models import from_hf_config

    assert from_hf_config(GEMMA2).final_logit_softcapping
    assert from_hf_config(GEMMA2).attn_logit_softcapping
    off = from_hf_config({**GEMMA2, "final_logit_softcapping": None, "attn_logit_softcapping": None})
    assert not off.final_logit_softcapping and not off.attn_logit_softcapping
    assert not from_hf_config({**GEMMA2, "model_type": "gemma3_text"}).final_logit_softcapping
    assert not from_hf_config({**LLAMA, "final_logit_softcapping": 30.0}).final_logit_softcapping


# --- mechanisms found by the round-2 hold-out runs ------------------------------------------------


def test_mqa_repeat_kv_is_a_view_in_eager_inference():
    # one KV head: repeat_kv's expand + reshape is a view, so no K/V copies beside the scores
    b, s, n = 8, 512, 8
    mqa = {**LLAMA, "num_key_value_heads": 1}
    pd = estimate(_gen(mqa, b=b, s=s, n=n, layout="contiguous", attention="eager", precision="bf16")).per_device
    k = s + n - 1
    tok = b * s
    expected = (
        b * 6 * s * k * (2 + 4 + 4)  # masked scores, fp32 copy, fp32 softmax output
        + tok * 384 * 2  # roped q
        + 3 * tok * 384 * 2  # embeds, layer input, normed input
        + b * s * k * 2  # additive mask
        + 2 * tok * 64 * 2  # cos, sin
        + tok * 32  # input_ids, position_ids, attention_mask, input_ids clone (int64)
    )
    assert _prefill_activations(pd) == expected
    # two KV heads: repeat_kv copies K and V (test_bf16_eager_softmax_copies_the_scores_to_fp32)
    gqa = estimate(_gen(LLAMA, b=b, s=s, n=n, layout="contiguous", attention="eager", precision="bf16"))
    assert _prefill_activations(gqa.per_device) - expected == 2 * b * 6 * k * 64 * 2


def test_untied_embedding_gradient_arrives_after_the_first_layer_backward():
    # 1 × 48 plain SGD: the peak is EmbeddingBackward0 (all gradients + the embedding output's
    # gradient), not the first layer's backward transient on top of all gradients
    b, s = 1, 48
    pd = estimate(_train(LLAMA, b=b, s=s)).per_device
    assert pd.peak_phase == "backward_end"
    weights = pd.component("weights").bytes
    grads = pd.component("gradients").bytes
    assert weights == grads
    batch = 2 * b * s * 8  # input_ids and labels
    assert _phase(pd, "backward_end").bytes == weights + grads + b * s * 384 * 4 + batch
    first = _phase(pd, "backward_first_layer")
    assert first.bytes < weights + grads - 32000 * 384 * 4 + 1536 * b * s * 4 * 8


def test_moe_training_saves_the_shared_expert_and_the_routing_indices():
    from budgets.engine.components import activations as act
    from budgets.engine.models import from_hf_config

    cfg = {
        **MIXTRAL,
        "model_type": "qwen2_moe",
        "num_experts": 12,
        "num_experts_per_tok": 3,
        "moe_intermediate_size": 160,
        "shared_expert_intermediate_size": 640,
    }
    spec = from_hf_config(cfg)
    tok, h, d = 2 * 320, 384, 2
    x = act.Shape(b=2, s=320, k=320, h=h, q=h, kv=128, heads=6, inter=768, vocab=16000, d=d)
    rows = tok * 3
    routed = rows * (2 * h + 4 * 160) * d
    # fp32 router softmax, top-k indices, the normalized fp32 top-k and its sum; perm // k, perm,
    # inv_perm and the sorted sample weights (cast to d by the Qwen router)
    routing = tok * 12 * 4 + tok * 3 * (8 + 4) + tok * 4 + rows * (3 * 8 + d)
    shared = 4 * tok * 640 * d + tok * (h + 1) * d  # gate, act, up, act·up; gated output, sigmoid
    assert act._mlp_saved(spec, x) == routed + routing + shared
    no_shared = from_hf_config({**cfg, "shared_expert_intermediate_size": 0})
    assert act._mlp_saved(no_shared, x) == routed + routing


def test_generate_prefill_holds_four_int64_id_tensors():
    # input_ids and attention_mask from the caller, position_ids and prepare_inputs_for_generation's clone
    b, s = 4, 256
    pd = estimate(_gen(LLAMA, b=b, s=s, n=4)).per_device
    from budgets.engine.components import activations as act
    from budgets.engine.models import from_hf_config

    x = act.Shape(b=b, s=s, k=s, h=384, q=384, kv=128, heads=6, inter=1024, vocab=32000, d=4)
    spec = from_hf_config(LLAMA)
    layer = act.inference_forward_transient(spec, x, "sdpa", gqa_copies=False)
    rope = 2 * b * s * 64 * 4
    kv_prefill = 2 * 4 * 2 * 64 * 4 * b * s  # K and V, 4 layers, 2 heads of 64, fp32
    prefill = _phase(pd, "prefill").bytes - pd.component("weights").bytes - kv_prefill
    assert prefill == rope + 4 * b * s * 8 + layer


def test_sliding_sdpa_mask_is_batch_broadcast_without_a_padding_mask():
    from budgets.engine.components import activations as act
    from budgets.engine.models import from_hf_config

    gemma3 = from_hf_config({**GEMMA2, "model_type": "gemma3_text"})
    x = act.Shape(b=4, s=256, k=256, h=384, q=384, kv=128, heads=6, inter=1024, vocab=32000, d=4)
    # dynamic-cache generate and a mask-free training step: (1, 1, s, k) bool expanded over the batch;
    # SDPA's additive conversion is still materialised per sequence
    assert act.attention_masks(gemma3, x, "sdpa", 256, batch_broadcast=True) == (256 * 256, 4 * 256 * 256 * 4)
    # static cache: generate builds the masks up front and makes them contiguous
    assert act.attention_masks(gemma3, x, "sdpa", 256) == (4 * 256 * 256, 4 * 256 * 256 * 4)
    # a static cache of 275 slots: the sliding layers' prefill mask spans the prompt only
    static_x = act.Shape(b=4, s=256, k=275, h=384, q=384, kv=128, heads=6, inter=1024, vocab=32000, d=4)
    assert act.attention_masks(gemma3, static_x, "sdpa", 275) == (4 * 256 * 256, 4 * 256 * 256 * 4)
    mistral = {**LLAMA, "model_type": "mistral", "sliding_window": 64}
    dyn = estimate(_gen(mistral, b=4, s=256, n=2)).per_device
    static = estimate(_gen(mistral, b=4, s=256, n=2, layout="contiguous")).per_device
    assert _prefill_activations(dyn) < _prefill_activations(static)


def test_qwen2_moe_builds_an_unread_sliding_mask():
    from budgets.engine.components import activations as act
    from budgets.engine.models import from_hf_config

    cfg = {**MIXTRAL, "model_type": "qwen2_moe", "num_experts": 8, "moe_intermediate_size": 192}
    x = act.Shape(b=4, s=128, k=128, h=384, q=384, kv=128, heads=6, inter=768, vocab=16000, d=4)
    qwen2_moe = from_hf_config(cfg)
    assert act.unread_masks(qwen2_moe, x, "sdpa", 128, batch_broadcast=True) == 128 * 128
    assert act.unread_masks(qwen2_moe, x, "eager", 128, batch_broadcast=True) == 4 * 128 * 128 * 4
    assert act.unread_masks(from_hf_config({**cfg, "model_type": "qwen3_moe"}), x, "sdpa", 128, True) == 0


def test_moe_inference_routing_buffers():
    from budgets.engine.components import activations as act
    from budgets.engine.models import from_hf_config

    cfg = {**MIXTRAL, "model_type": "qwen3_moe", "num_experts": 16, "num_experts_per_tok": 4}
    cfg["moe_intermediate_size"] = 96
    spec = from_hf_config(cfg)
    tok, d = 8 * 256, 2
    rows = tok * 4
    x = act.Shape(b=8, s=256, k=256, h=384, q=512, kv=128, heads=8, inter=768, vocab=16000, d=d)
    # router logits, top-k weights (d) and indices; sorted ids, perm, inv_perm, sorted weights, histc input
    routing = tok * 16 * d + tok * 4 * (d + 8) + rows * (3 * 8 + d + 4)
    assert act._moe_forward_transient(spec, x) == routing + rows * 4 * 384 * d


def test_mixtral_routing_weights_stay_fp32_and_promote_the_weighted_output():
    from budgets.engine.components import activations as act
    from budgets.engine.models import from_hf_config

    x = act.Shape(b=8, s=256, k=256, h=384, q=384, kv=128, heads=6, inter=96, vocab=16000, d=2)
    tok, rows = 8 * 256, 8 * 256 * 2
    narrow = {**MIXTRAL, "intermediate_size": 96}  # the un-permute instant dominates
    mixtral = from_hf_config(narrow)
    routing = tok * 8 * 2 + tok * 2 * (4 + 8) + rows * (3 * 8 + 4 + 4)  # with inv_perm
    # gathered input and down output (bf16), weighted output and its un-permuted copy (fp32)
    assert act._moe_forward_transient(mixtral, x) == routing + rows * 384 * (2 * 2 + 2 * 4)
    qwen = from_hf_config({**narrow, "model_type": "qwen3_moe", "num_experts": 8, "moe_intermediate_size": 96})
    routing_qwen = tok * 8 * 2 + tok * 2 * (2 + 8) + rows * (3 * 8 + 2 + 4)
    assert act._moe_forward_transient(qwen, x) == routing_qwen + rows * 384 * 4 * 2


def test_generate_ids_at_the_sampling_instant():
    # caller's input_ids + attention_mask, prefill position_ids (b·s each); input_ids grown to s + n,
    # position_ids to s + n − 1 (int64)
    from budgets.engine.components import activations as act

    b, s, n = 32, 64, 192
    pd = estimate(_gen(LLAMA, b=b, s=s, n=n, precision="bf16")).per_device
    kv_final = 2 * 4 * 2 * 64 * 2 * b * (s + n - 1)
    sample = _phase(pd, "sample").bytes - pd.component("weights").bytes - kv_final
    assert sample == act.logits_sample(b, 32000, 2) + b * (3 * s + 2 * (s + n) - 1) * 8


def test_tied_weight_holds_three_vocab_tensors_at_its_gradient_sum():
    # round 4 (measured at EmbeddingBackward0's aten::add): the head's gradient (held for the shared
    # leaf), the embedding's dense gradient and their sum; the embedding output's gradient is freed
    b, s = 1, 48
    tied = estimate(_train({**LLAMA, "tie_word_embeddings": True}, b=b, s=s)).per_device
    assert tied.peak_phase == "backward_end"
    weights = tied.component("weights").bytes
    # all gradients (the head's in them) + the embedding's dense gradient + the sum
    assert tied.component("gradients").bytes == weights + 2 * 32000 * 384 * 4
    batch = 2 * b * s * 8
    assert _phase(tied, "backward_end").bytes == 2 * weights + 2 * 32000 * 384 * 4 + batch


def test_adamw_step_scalars_widen_only_the_low_end_on_cpu():
    # one fp32 `step` per parameter tensor: the engine's tensor count is an upper bound (round 4:
    # fused experts and LayerNorm models measured fewer), so `low` counts none of them
    from budgets.engine.models import from_hf_config
    from budgets.engine.phases import param_tensors

    w = _train(LLAMA, b=1, s=48).model_dump()
    w["training"]["optimizer"] = "adamw"
    pd = estimate(Workload.model_validate(w)).per_device
    opt = pd.component("optimizer_state")
    steps = 4 * param_tensors(from_hf_config(LLAMA), 4)
    assert opt.bytes == opt.high == 2 * pd.component("weights").bytes + steps
    assert opt.low == opt.bytes - steps


def test_fused_gate_up_is_held_whole_through_the_multiply():
    # Phi3MLP: gate and up are chunks of one gate_up output (tok · 2I) alive through up * act(gate)
    import dataclasses

    from budgets.engine.components import activations as act
    from budgets.engine.models import from_hf_config

    phi3 = from_hf_config(PHI3)
    assert phi3.fused_gate_up and not from_hf_config(LLAMA).fused_gate_up
    x = act.Shape(b=2, s=64, k=64, h=384, q=384, kv=384, heads=6, inter=1024, vocab=32000, d=4)
    ti = 2 * 64 * 1024 * 4
    assert act._mlp_forward_transient(phi3, x) == 4 * ti
    assert act._mlp_forward_transient(dataclasses.replace(phi3, fused_gate_up=False), x) == 3 * ti
