"""Model specifications: the architecture numbers a memory budget needs, and exact parameter counts.

`from_hf_config` reads a Hugging Face `config.json` (as a dict) the way transformers 5.x does, with
the library's defaults for missing keys, so that `parameter_count(spec)` equals
`sum(p.numel() for p in model.parameters())` of the model built on the meta device (tied tensors
counted once; rotary `inv_freq`, causal-mask and `embed_scale` buffers are buffers, not parameters).
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

MlpKind = Literal["gated", "standard"]
NormKind = Literal["rms", "layer"]

SUPPORTED_MODEL_TYPES: tuple[str, ...] = (
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen2_moe",
    "qwen3",
    "qwen3_moe",
    "gemma",
    "gemma2",
    "gemma3_text",
    "gemma3",
    "phi3",
    "gpt2",
    "gpt_neox",
    "opt",
)


class UnsupportedModelError(ValueError):
    """A config whose model_type the engine cannot count exactly."""


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """Architecture numbers of a decoder-only transformer. Counts are plain integers (not bytes)."""

    model_type: str  # Hugging Face model_type, or "custom" for a directly given architecture
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int  # dense MLP width (per expert for MoE without moe_intermediate_size)
    vocab_size: int
    tie_word_embeddings: bool = False
    mlp: MlpKind = "gated"  # gated: gate/up/down (SwiGLU/GeGLU); standard: fc1/fc2
    activation: str = "silu"  # hidden_act, used for the activation-memory model
    norm: NormKind = "rms"  # rms: weight only; layer: weight + bias
    norms_per_layer: int = 2  # gemma2/gemma3 have 4 (pre/post attention and feed-forward)
    qk_norm: bool = False  # per-head RMSNorm on q and k (qwen3, gemma3)
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    final_norm: bool = True
    # mixture of experts; num_experts == 1 means dense
    num_experts: int = 1
    experts_per_token: int = 1
    moe_intermediate_size: int = 0  # per routed expert; 0 → intermediate_size
    shared_expert_intermediate_size: int = 0  # qwen2_moe shared expert (+ its sigmoid gate)
    num_dense_layers: int = 0  # MoE models whose first/marked layers use a dense MLP
    # embeddings
    learned_positions: int = 0  # rows of a learned position table (gpt2: n_positions; opt: max+2)
    embed_proj_dim: int = 0  # opt word_embed_proj_dim when it differs from hidden (project_in/out)
    # attention extent for the KV cache
    sliding_window: int = 0  # 0: all layers attend to the full context
    num_sliding_layers: int = 0  # layers that use the sliding window
    max_position_embeddings: int = 0
    lm_head_bias: bool = False
    # memory-relevant forward details (no effect on parameter counts)
    rotary_dim: int = 0  # rotated dims per head (partial rotary, gpt_neox/phi3); 0 → head_dim
    fused_gate_up: bool = False  # one gate_up projection, chunked into gate and up (Phi3MLP)
    parallel_residual: bool = False  # gpt_neox use_parallel_residual: both LayerNorms read the layer input
    final_logit_softcapping: bool = False  # gemma2: logits / cap → tanh → · cap before the loss
    attn_logit_softcapping: bool = False  # gemma2: the same on the eager attention scores
    # implementation features (set by the HF adapter, `_FAMILY_FEATURES`; off for an `architecture`)
    norm_weight_offset: bool = False  # RMSNorm multiplies by (1 + w) in fp32: fp32 temporaries and saved tensors
    rope_per_layer_type: bool = False  # sliding and full layers get their own (cos, sin): two rope tables
    one_mask_with_window: bool = False  # one mask carries the window: no second (full causal) mask
    sliding_mask_unread: bool = False  # a sliding mask is built though no layer slides: one more mask
    router_weights_fp32: bool = False  # top-k routing weights stay fp32: the weighted expert output is fp32
    fused_qkv: bool = False  # one q/k/v projection output, alive whole while any of q/k/v is
    rope_by_cat: bool = False  # rope ends in torch.cat: the attention output's transpose is a copy
    mlp_input_freed: bool = False  # the normed MLP input dies at the first MLP projection: one hidden less
    attn_output_kept: bool = False  # the attention output stays alive through the MLP: one hidden more
    parameter_breakdown_override: tuple[tuple[str, int], ...] = field(default=(), compare=False)

    # --- derived sizes -------------------------------------------------------------------------
    @property
    def q_dim(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def rope_dim(self) -> int:
        return self.rotary_dim or self.head_dim

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1

    @property
    def expert_intermediate_size(self) -> int:
        return self.moe_intermediate_size or self.intermediate_size

    @property
    def embed_dim(self) -> int:
        return self.embed_proj_dim or self.hidden_size

    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.num_dense_layers if self.is_moe else 0

    @property
    def mlp_matrices(self) -> int:
        return 3 if self.mlp == "gated" else 2


@dataclass(frozen=True, slots=True)
class ParameterCount:
    """Exact parameter counts (number of elements)."""

    total: int
    embedding: int  # input token table (+ learned positions, + opt projections)
    lm_head: int  # 0 when tied to the input embedding
    per_layer_attention: int
    per_layer_mlp_dense: int  # dense MLP of one layer (0 for an all-MoE model's MoE layers)
    per_layer_moe: int  # router + all experts + shared expert of one MoE layer
    per_layer_norms: int
    final_norm: int
    routed_expert: int  # parameters of one routed expert
    per_layer_linear: int  # matmul weights of one (average) layer, used for LoRA/quantization

    @property
    def layers_total(self) -> int:
        return self.total - self.embedding - self.lm_head - self.final_norm

    def as_dict(self) -> dict[str, int]:
        return {
            "total": self.total,
            "embedding": self.embedding,
            "lm_head": self.lm_head,
            "layers": self.layers_total,
            "final_norm": self.final_norm,
        }


def _norm_params(spec: ModelSpec, size: int) -> int:
    return size * (2 if spec.norm == "layer" else 1)


@lru_cache(maxsize=1024)
def parameter_count(spec: ModelSpec) -> ParameterCount:
    """Exact number of parameters, with a breakdown by part."""
    h = spec.hidden_size
    embedding = spec.vocab_size * spec.embed_dim + spec.learned_positions * h
    if spec.embed_proj_dim and spec.embed_proj_dim != h:
        embedding += 2 * h * spec.embed_proj_dim  # opt project_in + project_out (no bias)
    lm_head = 0 if spec.tie_word_embeddings else spec.vocab_size * spec.embed_dim
    if spec.lm_head_bias and not spec.tie_word_embeddings:
        lm_head += spec.vocab_size

    attention = h * (spec.q_dim + 2 * spec.kv_dim) + spec.q_dim * h
    if spec.qkv_bias:
        attention += spec.q_dim + 2 * spec.kv_dim
    if spec.o_bias:
        attention += h
    if spec.qk_norm:
        attention += 2 * spec.head_dim

    def mlp_params(width: int) -> int:
        n = spec.mlp_matrices * h * width
        if spec.mlp_bias:
            n += (2 * width if spec.mlp == "gated" else width) + h
        return n

    dense = mlp_params(spec.intermediate_size)
    moe = 0
    expert = 0
    if spec.is_moe:
        expert = mlp_params(spec.expert_intermediate_size)
        moe = h * spec.num_experts + spec.num_experts * expert
        if spec.shared_expert_intermediate_size:
            moe += mlp_params(spec.shared_expert_intermediate_size) + h  # shared expert + its gate
    norms = spec.norms_per_layer * _norm_params(spec, h)
    final = _norm_params(spec, h) if spec.final_norm else 0

    layers = spec.num_layers * (attention + norms)
    layers += spec.num_moe_layers * moe + (spec.num_layers - spec.num_moe_layers) * dense
    total = embedding + lm_head + layers + final
    avg_linear = attention - (2 * spec.head_dim if spec.qk_norm else 0)
    avg_linear += (spec.num_moe_layers * moe + (spec.num_layers - spec.num_moe_layers) * dense) // max(
        spec.num_layers, 1
    )
    return ParameterCount(
        total=total,
        embedding=embedding,
        lm_head=lm_head,
        per_layer_attention=attention,
        per_layer_mlp_dense=dense,
        per_layer_moe=moe,
        per_layer_norms=norms,
        final_norm=final,
        routed_expert=expert,
        per_layer_linear=avg_linear,
    )


# --- Hugging Face configs ----------------------------------------------------------------------


def _get(cfg: Mapping[str, Any], key: str, default: Any) -> Any:
    value = cfg.get(key, default)
    return default if value is None else value


def _int(cfg: Mapping[str, Any], key: str, default: Any = None) -> int:
    value = cfg.get(key, default)
    if value is None:
        raise UnsupportedModelError(f"hf_config is missing '{key}' (model_type {cfg.get('model_type')!r})")
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value or value < 0:
        raise UnsupportedModelError(f"hf_config '{key}' must be a non-negative integer, got {value!r}")
    return int(value)


# transformers 5.x config defaults per model_type (used when a key is absent)
_DEFAULTS: dict[str, dict[str, Any]] = {
    "llama": {
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
        "max_position_embeddings": 2048,
    },
    "mistral": {
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
        "max_position_embeddings": 4096 * 32,
    },
    "mixtral": {
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
        "max_position_embeddings": 4096 * 32,
    },
    "qwen2": {
        "vocab_size": 151936,
        "hidden_size": 4096,
        "intermediate_size": 22016,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
        "max_position_embeddings": 32768,
    },
    "qwen2_moe": {
        "vocab_size": 151936,
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "moe_intermediate_size": 1408,
        "shared_expert_intermediate_size": 5632,
        "num_experts": 60,
        "num_experts_per_tok": 4,
        "decoder_sparse_step": 1,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
        "max_position_embeddings": 32768,
    },
    "qwen3": {
        "vocab_size": 151936,
        "hidden_size": 4096,
        "intermediate_size": 22016,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "head_dim": 128,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
        "max_position_embeddings": 32768,
    },
    "qwen3_moe": {
        "vocab_size": 151936,
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "num_hidden_layers": 24,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "moe_intermediate_size": 768,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "decoder_sparse_step": 1,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
        "max_position_embeddings": 32768,
    },
    "gemma": {
        "vocab_size": 256000,
        "hidden_size": 3072,
        "intermediate_size": 24576,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "head_dim": 256,
        "tie_word_embeddings": True,
        "hidden_activation": "gelu_pytorch_tanh",
        "max_position_embeddings": 8192,
    },
    "gemma2": {
        "vocab_size": 256000,
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "num_hidden_layers": 26,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "tie_word_embeddings": True,
        "hidden_activation": "gelu_pytorch_tanh",
        "max_position_embeddings": 8192,
        "sliding_window": 4096,
    },
    "gemma3_text": {
        "vocab_size": 262208,
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "num_hidden_layers": 26,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "tie_word_embeddings": True,
        "hidden_activation": "gelu_pytorch_tanh",
        "max_position_embeddings": 131072,
        "sliding_window": 4096,
        "sliding_window_pattern": 6,
    },
    "phi3": {
        "vocab_size": 32064,
        "hidden_size": 3072,
        "intermediate_size": 8192,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
        "max_position_embeddings": 4096,
    },
    "gpt2": {
        "vocab_size": 50257,
        "n_embd": 768,
        "n_layer": 12,
        "n_head": 12,
        "n_positions": 1024,
        "activation_function": "gelu_new",
        "tie_word_embeddings": True,
    },
    "gpt_neox": {
        "vocab_size": 50432,
        "hidden_size": 6144,
        "num_hidden_layers": 44,
        "num_attention_heads": 64,
        "intermediate_size": 24576,
        "hidden_act": "gelu",
        "attention_bias": True,
        "tie_word_embeddings": False,
        "max_position_embeddings": 2048,
    },
    "opt": {
        "vocab_size": 50272,
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "ffn_dim": 3072,
        "num_attention_heads": 12,
        "max_position_embeddings": 2048,
        "enable_bias": True,
        "do_layer_norm_before": True,
        "activation_function": "relu",
        "tie_word_embeddings": True,
    },
}


def _with_defaults(cfg: Mapping[str, Any], model_type: str) -> dict[str, Any]:
    merged = dict(_DEFAULTS[model_type])
    merged.update({k: v for k, v in cfg.items() if v is not None})
    return merged


def _set_float(raw: Mapping[str, Any], key: str, default: float | None) -> bool:
    """Whether an optional float setting is on: an explicit null turns the library default off."""
    value = raw.get(key, default)
    return bool(value)


def _partial_rotary(cfg: Mapping[str, Any], default: float) -> float:
    """`partial_rotary_factor` as transformers 5 resolves it (rope_parameters, the flat key, gpt_neox rotary_pct)."""
    rope = cfg.get("rope_parameters")
    if isinstance(rope, Mapping) and rope.get("partial_rotary_factor") is not None:
        return float(rope["partial_rotary_factor"])
    for key in ("partial_rotary_factor", "rotary_pct"):
        if cfg.get(key) is not None:
            return float(cfg[key])
    return default


def _sliding(cfg: Mapping[str, Any], model_type: str, layers: int) -> tuple[int, int]:
    """(window, number of sliding-window layers) as transformers resolves them."""
    window = cfg.get("sliding_window") or 0
    if not window:
        return 0, 0
    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, list) and layer_types:
        return int(window), sum(1 for t in layer_types if t == "sliding_attention")
    if model_type in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe"):
        if not cfg.get("use_sliding_window", False):
            return 0, 0
        max_window_layers = int(cfg.get("max_window_layers", layers) or layers)
        return int(window), max(0, layers - max_window_layers)
    if model_type == "gemma2":
        return int(window), layers // 2 + layers % 2  # even layers (0, 2, ...) slide
    if model_type == "gemma3_text":
        pattern = int(cfg.get("sliding_window_pattern", 6) or 6)
        return int(window), sum(1 for i in range(layers) if (i + 1) % pattern != 0)
    if model_type in ("mistral", "mixtral", "phi3"):
        return int(window), layers
    return 0, 0


def from_hf_config(config: Mapping[str, Any]) -> ModelSpec:
    """Build a ModelSpec from the content of a Hugging Face config.json."""
    if not isinstance(config, Mapping):
        raise UnsupportedModelError("hf_config must be a JSON object (the content of config.json)")
    model_type = config.get("model_type")
    if model_type == "gemma3":
        text = config.get("text_config") or {}
        if not isinstance(text, Mapping):
            raise UnsupportedModelError("hf_config.text_config must be an object for model_type 'gemma3'")
        inner = dict(text)
        inner["model_type"] = "gemma3_text"
        return _build(inner, "gemma3_text", reported_type="gemma3")
    if model_type not in SUPPORTED_MODEL_TYPES:
        close = difflib.get_close_matches(str(model_type), SUPPORTED_MODEL_TYPES, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise UnsupportedModelError(
            f"unsupported model_type {model_type!r}{hint}; supported: {', '.join(SUPPORTED_MODEL_TYPES)}"
        )
    return _build(config, model_type, reported_type=model_type)


# Implementation features: what transformers' modeling_<type>.py does for each model_type, not a
# config key (the ModelSpec fields of the same names say what each means in memory). Absent: False.
_FAMILY_FEATURES: dict[str, frozenset[str]] = {
    # modeling_mistral.py MistralModel.forward: a single mask function that already carries the window
    "mistral": frozenset({"one_mask_with_window"}),
    # modeling_mixtral.py: one windowed mask (MixtralModel.forward); MixtralTopKRouter returns the
    # normalized fp32 top-k weights as they are, so grouped_mm_experts_forward's
    # `proj_out * sample_weights_g` promotes to fp32 (the Qwen MoE routers cast them to the logits' dtype)
    "mixtral": frozenset({"one_mask_with_window", "router_weights_fp32"}),
    # modeling_qwen2_moe.py Qwen2MoeModel.forward builds the sliding-window mask on every forward; with
    # use_sliding_window off the config sets sliding_window = 0 (configuration_qwen2_moe.py), so
    # masking_utils materialises it (kv_length ≥ 0 defeats the SDPA skip) although no layer reads it
    "qwen2_moe": frozenset({"sliding_mask_unread"}),
    # modeling_gemma.py / modeling_gemma2.py GemmaRMSNorm, Gemma2RMSNorm: normalize x.float(), multiply by
    # (1 + w) in fp32, then type_as(x) (LlamaRMSNorm casts back before the weight)
    "gemma": frozenset({"norm_weight_offset"}),
    "gemma2": frozenset({"norm_weight_offset"}),
    # modeling_gemma3.py: Gemma3RMSNorm as gemma2; Gemma3TextModel.forward builds one (cos, sin) pair per
    # layer type (`position_embeddings[layer_type]`)
    "gemma3_text": frozenset({"norm_weight_offset", "rope_per_layer_type"}),
    # modeling_phi3.py: one windowed mask (Phi3Model.forward); Phi3Attention binds the fused qkv_proj
    # output to `qkv` and slices q/k/v out of it as views; apply_rotary_pos_emb ends in
    # torch.cat([rotated, pass-through]), so the roped q/k are contiguous [b, H, s, hd]; Phi3MLP runs
    # gate_up_proj(x).chunk(2, dim=-1)
    "phi3": frozenset({"one_mask_with_window", "fused_qkv", "rope_by_cat", "fused_gate_up"}),
    # modeling_gpt_neox.py GPTNeoXAttention: fused `qkv` sliced into views; rope by torch.cat as phi3
    "gpt_neox": frozenset({"fused_qkv", "rope_by_cat"}),
    # modeling_gpt2.py: GPT2Attention keeps c_attn's output through the q view of `.split`; GPT2Block
    # binds `attn_output` to a local that lives through the MLP
    "gpt2": frozenset({"fused_qkv", "attn_output_kept"}),
    # modeling_opt.py OPTDecoderLayer runs fc1 inline and rebinds: the normed input dies at fc1
    "opt": frozenset({"mlp_input_freed"}),
}


def _features(model_type: str, layers: int = 0, sliding_layers: int = 0) -> dict[str, bool]:
    """The ModelSpec feature fields of a model_type (`_FAMILY_FEATURES`), resolved against its layers."""
    on = _FAMILY_FEATURES.get(model_type, frozenset())
    features = dict.fromkeys(on, True)
    if "sliding_mask_unread" in on:
        features["sliding_mask_unread"] = not sliding_layers  # with sliding layers the mask is read
    if "rope_per_layer_type" in on:
        features["rope_per_layer_type"] = 0 < sliding_layers < layers  # one layer type: one pair
    return features


def _build(raw: Mapping[str, Any], model_type: str, reported_type: str) -> ModelSpec:
    cfg = _with_defaults(raw, model_type)
    builder = _BUILDERS.get(model_type, _build_llama_family)
    return builder(raw, cfg, model_type, reported_type)


def _build_gpt2(raw: Mapping[str, Any], cfg: Mapping[str, Any], model_type: str, reported_type: str) -> ModelSpec:
    h = _int(cfg, "n_embd")
    heads = _int(cfg, "n_head")
    layers = _int(cfg, "n_layer")
    inner = cfg.get("n_inner") or 4 * h
    return ModelSpec(
        model_type=reported_type,
        num_layers=layers,
        hidden_size=h,
        num_attention_heads=heads,
        num_kv_heads=heads,
        head_dim=h // heads,
        intermediate_size=int(inner),
        vocab_size=_int(cfg, "vocab_size"),
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", True)),
        mlp="standard",
        activation=str(cfg.get("activation_function", "gelu_new")),
        norm="layer",
        qkv_bias=True,
        o_bias=True,
        mlp_bias=True,
        learned_positions=_int(cfg, "n_positions"),
        max_position_embeddings=_int(cfg, "n_positions"),
        **_features(model_type),
    )


def _build_opt(raw: Mapping[str, Any], cfg: Mapping[str, Any], model_type: str, reported_type: str) -> ModelSpec:
    h = _int(cfg, "hidden_size")
    heads = _int(cfg, "num_attention_heads")
    bias = bool(cfg.get("enable_bias", True))
    proj = int(cfg.get("word_embed_proj_dim") or h)
    final = bool(cfg.get("do_layer_norm_before", True)) and not cfg.get("_remove_final_layer_norm", False)
    max_pos = _int(cfg, "max_position_embeddings")
    return ModelSpec(
        model_type=reported_type,
        num_layers=_int(cfg, "num_hidden_layers"),
        hidden_size=h,
        num_attention_heads=heads,
        num_kv_heads=heads,
        head_dim=h // heads,
        intermediate_size=_int(cfg, "ffn_dim"),
        vocab_size=_int(cfg, "vocab_size"),
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", True)),
        mlp="standard",
        activation=str(cfg.get("activation_function", "relu")),
        norm="layer",
        qkv_bias=bias,
        o_bias=bias,
        mlp_bias=bias,
        final_norm=final,
        learned_positions=max_pos + 2,  # OPTLearnedPositionalEmbedding offset 2
        embed_proj_dim=proj if proj != h else 0,
        max_position_embeddings=max_pos,
        **_features(model_type),
    )


def _build_gpt_neox(raw: Mapping[str, Any], cfg: Mapping[str, Any], model_type: str, reported_type: str) -> ModelSpec:
    h = _int(cfg, "hidden_size")
    heads = _int(cfg, "num_attention_heads")
    bias = bool(cfg.get("attention_bias", True))
    return ModelSpec(
        model_type=reported_type,
        num_layers=_int(cfg, "num_hidden_layers"),
        hidden_size=h,
        num_attention_heads=heads,
        num_kv_heads=heads,
        head_dim=h // heads,
        intermediate_size=_int(cfg, "intermediate_size"),
        vocab_size=_int(cfg, "vocab_size"),
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        mlp="standard",
        activation=str(cfg.get("hidden_act", "gelu")),
        norm="layer",
        qkv_bias=bias,
        o_bias=bias,
        mlp_bias=True,
        max_position_embeddings=_int(cfg, "max_position_embeddings"),
        # configuration_gpt_neox.py: partial_rotary_factor (rotary_pct) defaults to 0.25
        rotary_dim=int((h // heads) * _partial_rotary(cfg, 0.25)),
        parallel_residual=bool(cfg.get("use_parallel_residual", True)),
        **_features(model_type),
    )


def _moe_fields(cfg: Mapping[str, Any], model_type: str, layers: int) -> dict[str, int]:
    """The mixture-of-experts fields of a llama-family config (dense: none set)."""
    experts = 1
    per_tok = 1
    moe_inter = 0
    shared = 0
    dense_layers = 0
    if model_type == "mixtral":
        experts = _int(cfg, "num_local_experts")
        per_tok = _int(cfg, "num_experts_per_tok")
    elif model_type in ("qwen2_moe", "qwen3_moe"):
        experts = _int(cfg, "num_experts")
        per_tok = _int(cfg, "num_experts_per_tok")
        moe_inter = _int(cfg, "moe_intermediate_size")
        if model_type == "qwen2_moe":
            shared = int(cfg.get("shared_expert_intermediate_size") or 0)
        step = int(cfg.get("decoder_sparse_step", 1) or 1)
        mlp_only = set(cfg.get("mlp_only_layers") or [])
        if experts > 0:
            dense_layers = sum(1 for i in range(layers) if i in mlp_only or (i + 1) % step != 0)
    return {
        "num_experts": max(experts, 1),
        "experts_per_token": max(per_tok, 1) if experts > 1 else 1,
        "moe_intermediate_size": moe_inter,
        "shared_expert_intermediate_size": shared,
        "num_dense_layers": dense_layers if experts > 1 else 0,
    }


def _build_llama_family(
    raw: Mapping[str, Any], cfg: Mapping[str, Any], model_type: str, reported_type: str
) -> ModelSpec:
    """llama, mistral, mixtral, qwen2(_moe), qwen3(_moe), gemma*, phi3."""
    h = _int(cfg, "hidden_size")
    heads = _int(cfg, "num_attention_heads")
    if heads == 0:
        raise UnsupportedModelError("hf_config 'num_attention_heads' must be at least 1")
    kv_heads = _int(cfg, "num_key_value_heads", heads)
    head_dim = _int(cfg, "head_dim", h // heads)
    layers = _int(cfg, "num_hidden_layers")
    gemma = model_type.startswith("gemma")
    activation = str(cfg.get("hidden_activation") or cfg.get("hidden_act") or "silu")
    attention_bias = bool(cfg.get("attention_bias", False))
    qkv_bias = attention_bias or model_type in ("qwen2", "qwen2_moe")
    window, sliding_layers = _sliding(cfg, model_type, layers)
    return ModelSpec(
        model_type=reported_type,
        num_layers=layers,
        hidden_size=h,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=_int(cfg, "intermediate_size"),
        vocab_size=_int(cfg, "vocab_size"),
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", gemma)),
        mlp="gated",
        activation=activation,
        norm="rms",
        norms_per_layer=4 if model_type in ("gemma2", "gemma3_text") else 2,
        qk_norm=model_type in ("qwen3", "qwen3_moe", "gemma3_text"),
        qkv_bias=qkv_bias,
        o_bias=attention_bias,
        mlp_bias=bool(cfg.get("mlp_bias", False)),
        **_moe_fields(cfg, model_type, layers),
        sliding_window=window,
        num_sliding_layers=sliding_layers,
        max_position_embeddings=int(cfg.get("max_position_embeddings") or 0),
        rotary_dim=int(head_dim * _partial_rotary(cfg, 1.0)) if model_type == "phi3" else 0,
        # only the gemma2/gemma3 forwards soft-cap (modeling_gemma2.py Gemma2ForCausalLM.forward,
        # eager_attention_forward); configuration_gemma2.py defaults: final 30.0, attention 50.0
        final_logit_softcapping=model_type in ("gemma2", "gemma3_text")
        and _set_float(raw, "final_logit_softcapping", 30.0 if model_type == "gemma2" else None),
        attn_logit_softcapping=model_type in ("gemma2", "gemma3_text")
        and _set_float(raw, "attn_logit_softcapping", 50.0 if model_type == "gemma2" else None),
        **_features(model_type, layers, sliding_layers),
    )


_BUILDERS = {"gpt2": _build_gpt2, "opt": _build_opt, "gpt_neox": _build_gpt_neox}


def from_architecture(
    *,
    num_layers: int,
    hidden_size: int,
    num_attention_heads: int,
    intermediate_size: int,
    vocab_size: int,
    num_key_value_heads: int | None = None,
    head_dim: int | None = None,
    tie_word_embeddings: bool = False,
    mlp: MlpKind = "gated",
    num_experts: int = 1,
    experts_per_token: int | None = None,
    moe_intermediate_size: int | None = None,
    attention_bias: bool = False,
    norm: NormKind = "rms",
    activation: str | None = None,
) -> ModelSpec:
    """A ModelSpec from directly given numbers (the workload's `architecture` form)."""
    return ModelSpec(
        model_type="custom",
        num_layers=num_layers,
        hidden_size=hidden_size,
        num_attention_heads=num_attention_heads,
        num_kv_heads=num_key_value_heads or num_attention_heads,
        head_dim=head_dim or hidden_size // num_attention_heads,
        intermediate_size=intermediate_size,
        vocab_size=vocab_size,
        tie_word_embeddings=tie_word_embeddings,
        mlp=mlp,
        activation=activation or ("silu" if mlp == "gated" else "gelu"),
        norm=norm,
        qkv_bias=attention_bias,
        o_bias=attention_bias,
        mlp_bias=attention_bias and mlp == "standard",
        num_experts=num_experts,
        experts_per_token=(experts_per_token or min(2, num_experts)) if num_experts > 1 else 1,
        moe_intermediate_size=moe_intermediate_size or 0,
    )


# --- presets -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Preset:
    id: str
    display_name: str
    hf_repo: str
    source: str
    config_verbatim_status: str
    config: Mapping[str, Any]
    parameter_count: int  # exact, measured on the meta device (tied counted once)
    spec: ModelSpec


def fixtures_dir() -> Path:
    override = os.environ.get("VRAMPLAN_FIXTURES_DIR")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[2] / "fixtures"


@lru_cache(maxsize=8)
def _load_presets_from(path: str) -> dict[str, Preset]:
    with open(path, encoding="utf-8") as fh:
        raw = json.load(fh)
    entries = raw["presets"] if isinstance(raw, dict) else raw
    out: dict[str, Preset] = {}
    for entry in entries:
        out[entry["id"]] = Preset(
            id=entry["id"],
            display_name=entry.get("display_name", entry["id"]),
            hf_repo=entry.get("hf_repo", ""),
            source=entry.get("source", ""),
            config_verbatim_status=entry.get("config_verbatim_status", ""),
            config=entry["config"],
            parameter_count=int(entry["parameter_count"]),
            spec=from_hf_config(entry["config"]),
        )
    return out


def load_presets() -> dict[str, Preset]:
    """Presets from `fixtures/model_presets.json` (or $VRAMPLAN_FIXTURES_DIR), parsed once."""
    return _load_presets_from(str(fixtures_dir() / "model_presets.json"))


def close_preset_ids(name: str, n: int = 5) -> list[str]:
    ids = list(load_presets())
    close = difflib.get_close_matches(name.lower(), ids, n=n, cutoff=0.4)
    if not close:
        close = [i for i in ids if name.lower().split("-")[0] in i][:n]
    return close
