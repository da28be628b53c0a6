"""The Hugging Face config adapter: a `config.json` (as a dict) → `ModelSpec`, read the way transformers 5.x
reads it, with the library's defaults for missing keys (`hf_defaults.py`), and the implementation
features each model_type's modeling file has (`_FAMILY_FEATURES`), resolved here once."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, TypedDict

from .hf_defaults import DROPOUT_KEYS, HF_CONFIG_DEFAULTS
from .spec import ModelSpec

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


def _int(cfg: Mapping[str, Any], key: str, default: Any = None) -> int:
    value = cfg.get(key, default)
    if value is None:
        raise UnsupportedModelError(f"hf_config is missing '{key}' (model_type {cfg.get('model_type')!r})")
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value or value < 0:
        raise UnsupportedModelError(f"hf_config '{key}' must be a non-negative integer, got {value!r}")
    return int(value)


def _with_defaults(cfg: Mapping[str, Any], model_type: str) -> dict[str, Any]:
    merged = dict(HF_CONFIG_DEFAULTS[model_type])
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
    attention, hidden, embedding = (_dropout(cfg, model_type, f) for f in ("attention", "hidden", "embedding"))
    spec = builder(raw, cfg, model_type, reported_type)
    return replace(
        spec,
        eos_token=_has_eos_token(cfg),
        attention_dropout=attention,
        hidden_dropout=hidden,
        embedding_dropout=embedding,
    )


def _dropout(cfg: Mapping[str, Any], model_type: str, where: str) -> float:
    """A ModelSpec dropout field from the config key the model_type's modeling file applies (0: none)."""
    key = DROPOUT_KEYS.get(model_type, {}).get(f"{where}_dropout")
    p = (cfg.get(key) if key else None) or 0.0
    if isinstance(p, bool) or not isinstance(p, int | float) or not 0 <= p <= 1:
        raise UnsupportedModelError(f"hf_config '{key}' must be a dropout probability in [0, 1], got {p!r}")
    return float(p)


def _has_eos_token(cfg: Mapping[str, Any]) -> bool:
    """config.json's eos_token_id (an id or a list of ids), else the configuration class's default."""
    eos = cfg.get("eos_token_id")
    return (isinstance(eos, int) and not isinstance(eos, bool)) or (isinstance(eos, list) and len(eos) > 0)


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


class _MoeFields(TypedDict):
    num_experts: int
    experts_per_token: int
    moe_intermediate_size: int
    shared_expert_intermediate_size: int
    num_dense_layers: int


def _moe_fields(cfg: Mapping[str, Any], model_type: str, layers: int) -> _MoeFields:
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
