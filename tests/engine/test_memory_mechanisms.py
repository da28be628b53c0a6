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
    ids = tok * 16
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
