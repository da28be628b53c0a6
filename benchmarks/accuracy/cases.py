"""Accuracy cases: vramplan workloads (WORKLOAD.md contract, v1) measured on CPU.

Each case is nothing but a workload dict. The harness (``measure.py``) derives the run from it,
and the engine estimates the same dict, so both sides see exactly one description. Models are
small but realistically shaped Hugging Face configs built with random weights; all dropouts are 0
so training is deterministic. See README.md for the exact semantics of a run.
"""

from __future__ import annotations

import copy

# --- model configs (content of a config.json; dropouts 0) ----------------------------------------

LLAMA_GQA = {  # Llama-3-style: GQA 8q/2kv, gated MLP, untied head
    "model_type": "llama",
    "num_hidden_layers": 6,
    "hidden_size": 512,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "intermediate_size": 1408,
    "vocab_size": 16000,
    "max_position_embeddings": 2048,
    "tie_word_embeddings": False,
    "attention_dropout": 0.0,
    "attention_bias": False,
    "mlp_bias": False,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-5,
}

LLAMA_MHA_TIED = {  # Llama-2/TinyLlama-style MHA with a tied head, large vocab
    "model_type": "llama",
    "num_hidden_layers": 4,
    "hidden_size": 384,
    "num_attention_heads": 6,
    "num_key_value_heads": 6,
    "head_dim": 64,
    "intermediate_size": 1024,
    "vocab_size": 32000,
    "max_position_embeddings": 2048,
    "tie_word_embeddings": True,
    "attention_dropout": 0.0,
    "hidden_act": "silu",
}

MISTRAL = {
    "model_type": "mistral",
    "num_hidden_layers": 4,
    "hidden_size": 512,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "intermediate_size": 1536,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "attention_dropout": 0.0,
    "hidden_act": "silu",
}

QWEN2 = {  # Qwen2.5-small-style: qkv biases, GQA 8q/1kv, tied head
    "model_type": "qwen2",
    "num_hidden_layers": 6,
    "hidden_size": 512,
    "num_attention_heads": 8,
    "num_key_value_heads": 1,
    "intermediate_size": 1280,
    "vocab_size": 24000,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": True,
    "use_sliding_window": False,
    "attention_dropout": 0.0,
    "hidden_act": "silu",
}

MIXTRAL = {  # sparse MoE, 8 experts, top-2
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
    "max_position_embeddings": 4096,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "attention_dropout": 0.0,
    "router_jitter_noise": 0.0,
    "output_router_logits": False,
    "hidden_act": "silu",
}

QWEN2_MOE = {  # fine-grained MoE with a shared expert
    "model_type": "qwen2_moe",
    "num_hidden_layers": 4,
    "hidden_size": 384,
    "num_attention_heads": 6,
    "num_key_value_heads": 2,
    "intermediate_size": 1024,
    "moe_intermediate_size": 256,
    "shared_expert_intermediate_size": 1024,
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
    "norm_topk_prob": False,
    "vocab_size": 16000,
    "max_position_embeddings": 4096,
    "use_sliding_window": False,
    "tie_word_embeddings": False,
    "attention_dropout": 0.0,
    "output_router_logits": False,
    "hidden_act": "silu",
}

GPT2 = {  # learned positions, standard GELU MLP (4x), LayerNorm, Conv1D, tied head
    "model_type": "gpt2",
    "n_layer": 6,
    "n_embd": 512,
    "n_head": 8,
    "n_inner": None,
    "n_positions": 1024,
    "vocab_size": 16000,
    "resid_pdrop": 0.0,
    "embd_pdrop": 0.0,
    "attn_pdrop": 0.0,
    "activation_function": "gelu_new",
    "tie_word_embeddings": True,
}

OPT = {  # OPT-style: ReLU MLP, LayerNorm, learned positions (+2 offset), tied head
    "model_type": "opt",
    "num_hidden_layers": 6,
    "hidden_size": 512,
    "num_attention_heads": 8,
    "ffn_dim": 2048,
    "word_embed_proj_dim": 512,
    "vocab_size": 16000,
    "max_position_embeddings": 2048,
    "do_layer_norm_before": True,
    "dropout": 0.0,
    "attention_dropout": 0.0,
    "activation_dropout": 0.0,
    "layerdrop": 0.0,
    "enable_bias": True,
    "tie_word_embeddings": True,
}


# --- workload builders ----------------------------------------------------------------------------


def _precision(p: str, training: bool) -> dict:
    d = {"weights": p, "compute": p, "kv_cache": p}
    if training:
        d = {"weights": p, "compute": p, "gradients": p, "master_weights": None}
    return d


def infer(name, cfg, *, precision, sessions, input_tokens, output_tokens, layout, attention):
    return {
        "schema_version": 1,
        "name": name,
        "task": "inference",
        "model": {"hf_config": copy.deepcopy(cfg)},
        "precision": _precision(precision, False),
        "inference": {
            "max_input_tokens": input_tokens,
            "max_output_tokens": output_tokens,
            "concurrent_sessions": sessions,
            "engine": "transformers",
            "kv_cache_layout": layout,
        },
        "runtime": {"device": "cpu", "attention": attention},
    }


def train(name, cfg, *, precision, micro_batch, seq, optimizer, ckpt, attention):
    return {
        "schema_version": 1,
        "name": name,
        "task": "training",
        "model": {"hf_config": copy.deepcopy(cfg)},
        "precision": _precision(precision, True),
        "training": {
            "micro_batch_size": micro_batch,
            "sequence_length": seq,
            "optimizer": optimizer,
            "activation_checkpointing": ckpt,
            "method": "full",
        },
        "runtime": {"device": "cpu", "attention": attention},
    }


CASES: list[dict] = [
    # ---- inference (HF generate, greedy, fixed output length) ----
    infer(
        "llama-gqa-gen-dynamic-fp32-sdpa",
        LLAMA_GQA,
        precision="fp32",
        sessions=8,
        input_tokens=384,
        output_tokens=48,
        layout="dynamic",
        attention="sdpa",
    ),
    infer(
        "llama-gqa-gen-static-fp32-eager",
        LLAMA_GQA,
        precision="fp32",
        sessions=8,
        input_tokens=256,
        output_tokens=128,
        layout="contiguous",
        attention="eager",
    ),
    infer(
        "llama-mha-tied-gen-dynamic-bf16-sdpa",
        LLAMA_MHA_TIED,
        precision="bf16",
        sessions=32,
        input_tokens=64,
        output_tokens=192,
        layout="dynamic",
        attention="sdpa",
    ),
    infer(
        "mistral-gen-static-bf16-sdpa",
        MISTRAL,
        precision="bf16",
        sessions=8,
        input_tokens=448,
        output_tokens=32,
        layout="contiguous",
        attention="sdpa",
    ),
    infer(
        "qwen2-tied-gen-static-fp32-sdpa",
        QWEN2,
        precision="fp32",
        sessions=8,
        input_tokens=256,
        output_tokens=32,
        layout="contiguous",
        attention="sdpa",
    ),
    infer(
        "mixtral-moe-gen-dynamic-fp32-sdpa",
        MIXTRAL,
        precision="fp32",
        sessions=8,
        input_tokens=256,
        output_tokens=64,
        layout="dynamic",
        attention="sdpa",
    ),
    infer(
        "gpt2-gen-dynamic-fp32-eager",
        GPT2,
        precision="fp32",
        sessions=8,
        input_tokens=256,
        output_tokens=48,
        layout="dynamic",
        attention="eager",
    ),
    infer(
        "opt-gen-dynamic-bf16-sdpa",
        OPT,
        precision="bf16",
        sessions=8,
        input_tokens=320,
        output_tokens=32,
        layout="dynamic",
        attention="sdpa",
    ),
    # ---- training (full fine-tuning, one micro-batch per step, torch foreach optimizers) ----
    train(
        "llama-gqa-train-adamw-fp32-sdpa",
        LLAMA_GQA,
        precision="fp32",
        micro_batch=4,
        seq=256,
        optimizer="adamw",
        ckpt="none",
        attention="sdpa",
    ),
    train(
        "llama-gqa-train-adamw-fp32-eager-ckpt",
        LLAMA_GQA,
        precision="fp32",
        micro_batch=4,
        seq=384,
        optimizer="adamw",
        ckpt="full",
        attention="eager",
    ),
    train(  # tiny batch: activations small, the peak moves to the end of backward / optimizer step
        "llama-gqa-train-adamw-fp32-sdpa-tinybatch",
        LLAMA_GQA,
        precision="fp32",
        micro_batch=1,
        seq=64,
        optimizer="adamw",
        ckpt="none",
        attention="sdpa",
    ),
    train(
        "llama-mha-tied-train-sgd-bf16-sdpa",
        LLAMA_MHA_TIED,
        precision="bf16",
        micro_batch=8,
        seq=256,
        optimizer="sgd",
        ckpt="none",
        attention="sdpa",
    ),
    train(
        "qwen2-tied-train-sgdm-fp32-eager",
        QWEN2,
        precision="fp32",
        micro_batch=4,
        seq=256,
        optimizer="sgd_momentum",
        ckpt="none",
        attention="eager",
    ),
    train(
        "mixtral-moe-train-adamw-bf16-sdpa",
        MIXTRAL,
        precision="bf16",
        micro_batch=4,
        seq=256,
        optimizer="adamw",
        ckpt="none",
        attention="sdpa",
    ),
    train(
        "qwen2moe-train-sgdm-fp32-sdpa-ckpt",
        QWEN2_MOE,
        precision="fp32",
        micro_batch=4,
        seq=256,
        optimizer="sgd_momentum",
        ckpt="full",
        attention="sdpa",
    ),
    train(
        "gpt2-train-adamw-fp32-eager",
        GPT2,
        precision="fp32",
        micro_batch=4,
        seq=256,
        optimizer="adamw",
        ckpt="none",
        attention="eager",
    ),
    train(
        "opt-train-adamw-bf16-sdpa-ckpt",
        OPT,
        precision="bf16",
        micro_batch=8,
        seq=256,
        optimizer="adamw",
        ckpt="full",
        attention="sdpa",
    ),
]

_BY_ID = {c["name"]: c for c in CASES}
assert len(_BY_ID) == len(CASES), "case names must be unique"


def case_ids() -> list[str]:
    return [c["name"] for c in CASES]


def case_by_id(case_id: str) -> dict:
    try:
        return copy.deepcopy(_BY_ID[case_id])
    except KeyError:
        raise SystemExit(f"unknown case {case_id!r}; known: {', '.join(case_ids())}") from None
