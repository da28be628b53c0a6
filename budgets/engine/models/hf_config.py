"""The Hugging Face config adapter: a `config.json` (as a dict) → `ModelSpec`, read the way transformers 5.x
reads it, with the library's defaults for missing keys (`hf_defaults.py`), and the implementation
features each model_type's modeling file has (`_FAMILY_FEATURES`), resolved here once."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, TypedDict, cast

from .hf_defaults import (
    DROPOUT_KEYS,
    HF_CONFIG_DEFAULTS,
    LAYERED_RULES,
    MULTIMODAL_TEXT,
    UNAPPLIED_DROPOUT_KEYS,
    WRAPPER_TIES_EMBEDDINGS,
)
from .hf_layered import MAX_EXPERTS, MAX_HEADS, MAX_LAYERS, MAX_POSITIONS, MAX_WIDTH, ConfigError, Reader, build_layered
from .hf_towers import count_towers as _towers
from .layers import compress
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


# Bounds of every number the flat adapter reads, checked before any loop or product (a hostile config is a 400
# naming the field, never a web worker held by a 10^12-layer loop): (low, high) by key; others 0..MAX_WIDTH
_BOUNDS: dict[str, tuple[int, int]] = {
    **dict.fromkeys(("num_hidden_layers", "n_layer"), (1, MAX_LAYERS)),
    **dict.fromkeys(("num_attention_heads", "n_head", "num_key_value_heads"), (1, MAX_HEADS)),
    **dict.fromkeys(("hidden_size", "n_embd", "head_dim", "vocab_size"), (1, MAX_WIDTH)),
    **dict.fromkeys(("max_position_embeddings", "n_positions", "sliding_window"), (0, MAX_POSITIONS)),
    **dict.fromkeys(("num_local_experts", "num_experts", "num_experts_per_tok"), (0, MAX_EXPERTS)),
    **dict.fromkeys(("max_window_layers",), (0, MAX_LAYERS)),
    **dict.fromkeys(("decoder_sparse_step", "sliding_window_pattern"), (1, MAX_LAYERS)),
}


def _int(cfg: Mapping[str, Any], key: str, default: Any = None) -> int:
    lo, hi = _BOUNDS.get(key, (0, MAX_WIDTH))
    try:
        return Reader({**cfg, key: cfg.get(key, default)}).integer(key, lo=lo, hi=hi)
    except ConfigError as exc:
        raise UnsupportedModelError(str(exc)) from None


def _int_list(cfg: Mapping[str, Any], key: str) -> list[int]:
    value = cfg.get(key) or []
    if not isinstance(value, list) or len(value) > MAX_LAYERS:
        raise UnsupportedModelError(f"hf_config '{key}' must be a list of at most {MAX_LAYERS} layer indices")
    if not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_LAYERS for v in value):
        raise UnsupportedModelError(f"hf_config '{key}' must hold layer indices in 0..{MAX_LAYERS}")
    return list(value)


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
    value: Any = default
    if isinstance(rope, Mapping) and rope.get("partial_rotary_factor") is not None:
        value = rope["partial_rotary_factor"]
    else:
        value = next((cfg[key] for key in ("partial_rotary_factor", "rotary_pct") if cfg.get(key) is not None), default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise UnsupportedModelError(f"hf_config 'partial_rotary_factor' must be a number in (0, 1], got {value!r}")
    return float(value)


def _sliding(cfg: Mapping[str, Any], model_type: str, layers: int) -> tuple[int, tuple[bool, ...]]:
    """(window, which layers slide) as transformers resolves them (configuration_<type>.py `layer_types`)."""
    window = _int(cfg, "sliding_window", 0)
    none = (False,) * layers
    if not window:
        return 0, none
    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, list) and layer_types:
        return window, tuple(i < len(layer_types) and layer_types[i] == "sliding_attention" for i in range(layers))
    if model_type in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe"):
        if not cfg.get("use_sliding_window", False):
            return 0, none
        max_window_layers = _int(cfg, "max_window_layers", layers) or layers
        return window, tuple(i >= max_window_layers for i in range(layers))
    if model_type == "gemma2":
        return window, tuple(i % 2 == 0 for i in range(layers))  # even layers (0, 2, ...) slide
    if model_type == "gemma3_text":
        pattern = _int(cfg, "sliding_window_pattern", 6)
        return window, tuple((i + 1) % pattern != 0 for i in range(layers))
    if model_type in ("mistral", "mixtral", "phi3"):
        return window, (True,) * layers
    return 0, none


def from_hf_config(config: Mapping[str, Any]) -> ModelSpec:
    """Build a ModelSpec from the content of a Hugging Face config.json.

    The 15 model_types of `SUPPORTED_MODEL_TYPES` keep their flat, measured-against-transformers adapter; the
    families of `LAYERED_RULES` (and their multimodal wrappers, `MULTIMODAL_TEXT`) are read per layer; any other
    model_type whose standard fields are present is read by the generic layer model, which says so.
    """
    if not isinstance(config, Mapping):
        raise UnsupportedModelError("hf_config must be a JSON object (the content of config.json)")
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type or len(model_type) > 100:
        raise UnsupportedModelError("hf_config 'model_type' must be a name, as config.json states it")
    towers = _towers(config, model_type)
    text, text_type = _text_part(config, model_type)
    try:
        if text_type in SUPPORTED_MODEL_TYPES:
            spec = _build(text, text_type, reported_type=model_type)
        else:
            layered = text_type if text_type in LAYERED_RULES else "generic"
            if layered == "generic":
                _check_standard_fields(text, model_type)
            spec = build_layered(text, layered, reported_type=model_type)
    except ConfigError as exc:
        raise UnsupportedModelError(str(exc)) from None
    if towers:
        spec = replace(spec, tower_params=towers.params, towers=towers.note)
    return spec


def _text_part(config: Mapping[str, Any], model_type: str) -> tuple[Mapping[str, Any], str]:
    """The language model's config and its model_type: `text_config` of a multimodal wrapper, else the config."""
    text = config.get("text_config")
    default_type = MULTIMODAL_TEXT.get(model_type)
    if text is None:
        if default_type and any(config.get(key) is None for key in _STANDARD_FIELDS):
            # a wrapper whose language model is not stated: transformers would build its class defaults, which
            # are not the checkpoint (a Gemma-3 config without text_config is a 2.6 B default, whatever was meant)
            raise UnsupportedModelError(
                f"hf_config of model_type {model_type!r} has no 'text_config' (the language model's config)"
            )
        return config, default_type or model_type
    if not isinstance(text, Mapping):
        raise UnsupportedModelError(f"hf_config.text_config must be an object for model_type {model_type!r}")
    inner = dict(text)
    text_type = default_type or str(inner.get("model_type") or model_type)
    if text_type in SUPPORTED_MODEL_TYPES or text_type not in LAYERED_RULES:
        text_type = str(inner.get("model_type") or text_type)
    inner["model_type"] = text_type
    # the wrapper's own `tie_word_embeddings` (its class default when absent) decides: transformers 5 ties through
    # the outer ForConditionalGeneration's config (modeling_utils.py get_expanded_tied_weights_keys); a pre-v5 save
    # that put `true` inside text_config is forwarded (configuration_qwen2_5_vl.py:207-211)
    tie = config.get("tie_word_embeddings")
    if tie is None:
        tie = WRAPPER_TIES_EMBEDDINGS.get(model_type, False) or inner.get("tie_word_embeddings") is True
    inner["tie_word_embeddings"] = bool(tie)
    return inner, text_type


_STANDARD_FIELDS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")


def _check_standard_fields(cfg: Mapping[str, Any], model_type: str) -> None:
    missing = [key for key in _STANDARD_FIELDS if cfg.get(key) is None]
    if missing:
        raise UnsupportedModelError(
            f"model_type {model_type!r} has no rules of its own, and the generic layer model needs the standard"
            f" fields: hf_config is missing {', '.join(repr(k) for k in missing)}"
        )


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
    # binds `attn_output` to a local that lives through the MLP; eager_attention_forward runs
    # `softmax(attn_weights, dim=-1)` in the scores' dtype (no dtype=float32)
    "gpt2": frozenset({"fused_qkv", "attn_output_kept", "softmax_in_compute_dtype"}),
    # modeling_opt.py OPTDecoderLayer runs fc1 inline and rebinds: the normed input dies at fc1
    "opt": frozenset({"mlp_input_freed"}),
}


class _Features(TypedDict, total=False):
    """The ModelSpec feature fields `_FAMILY_FEATURES` names."""

    norm_weight_offset: bool
    rope_per_layer_type: bool
    one_mask_with_window: bool
    sliding_mask_unread: bool
    router_weights_fp32: bool
    fused_qkv: bool
    rope_by_cat: bool
    fused_gate_up: bool
    mlp_input_freed: bool
    attn_output_kept: bool
    softmax_in_compute_dtype: bool


def _features(model_type: str, layers: int = 0, sliding_layers: int = 0) -> _Features:
    """The ModelSpec feature fields of a model_type (`_FAMILY_FEATURES`), resolved against its layers."""
    on = _FAMILY_FEATURES.get(model_type, frozenset())
    features = cast(_Features, dict.fromkeys(on, True))
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
        dropout_read=_dropout_read(raw, cfg, model_type),
    )


# where each ModelSpec dropout field acts, for the budget's assumptions
_DROPOUT_PLACES = {
    "attention_dropout": "attention probabilities",
    "hidden_dropout": "both residual branches of every layer",
    "embedding_dropout": "embeddings",
}


def _dropout_read(raw: Mapping[str, Any], cfg: Mapping[str, Any], model_type: str) -> str:
    """The dropout keys read for the model_type, their values and whether the config or the transformers default
    gave each; keys the modeling file reads but applies nowhere are named as such."""
    keys = DROPOUT_KEYS.get(model_type)
    if keys is None:
        return ""
    fields: dict[str, list[str]] = {}  # config key -> the ModelSpec fields it sets (gpt_neox: two)
    for name, key in keys.items():
        fields.setdefault(key, []).append(name)
    read = [
        f"{key} {_dropout(cfg, model_type, names[0].removesuffix('_dropout')):g}"
        f" ({', '.join(_DROPOUT_PLACES[n] for n in names)};"
        f" {'config' if raw.get(key) is not None else 'transformers 5.24 default'})"
        for key, names in fields.items()
    ]
    read += [
        f"{key} {cfg.get(key, 0.0):g} (read; no module applies it)"
        for key in UNAPPLIED_DROPOUT_KEYS.get(model_type, ())
    ]
    return ", ".join(read)


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
    inner = _int(cfg, "n_inner", 4 * h) or 4 * h
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
    proj = _int(cfg, "word_embed_proj_dim", h) or h
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
            shared = _int(cfg, "shared_expert_intermediate_size", 0)
        step = _int(cfg, "decoder_sparse_step", 1)
        mlp_only = set(_int_list(cfg, "mlp_only_layers"))
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
    window, sliding = _sliding(cfg, model_type, layers)
    sliding_layers = sum(sliding)
    spec = ModelSpec(
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
        max_position_embeddings=_int(cfg, "max_position_embeddings", 0),
        rotary_dim=int(head_dim * _partial_rotary(cfg, 1.0)) if model_type == "phi3" else 0,
        # only the gemma2/gemma3 forwards soft-cap (modeling_gemma2.py Gemma2ForCausalLM.forward,
        # eager_attention_forward); configuration_gemma2.py defaults: final 30.0, attention 50.0
        final_logit_softcapping=model_type in ("gemma2", "gemma3_text")
        and _set_float(raw, "final_logit_softcapping", 30.0 if model_type == "gemma2" else None),
        attn_logit_softcapping=model_type in ("gemma2", "gemma3_text")
        and _set_float(raw, "attn_logit_softcapping", 50.0 if model_type == "gemma2" else None),
        **_features(model_type, layers, sliding_layers),
    )
    return _with_sliding_runs(spec, window, sliding)


def _with_sliding_runs(spec: ModelSpec, window: int, sliding: tuple[bool, ...]) -> ModelSpec:
    """The flat spec's layers as runs: full attention, the layers that slide keeping `window` positions."""
    (flat,) = spec.runs
    per_layer = [
        (replace(flat.mixer, kind="sliding", window=window) if slides else flat.mixer, flat.mlp, 0, None)
        for slides in sliding
    ]
    return replace(spec, layer_runs=compress(per_layer))


_BUILDERS = {"gpt2": _build_gpt2, "opt": _build_opt, "gpt_neox": _build_gpt_neox}


def hf_config_of_architecture(spec: ModelSpec, positions: int) -> dict[str, Any] | str:
    """The config.json of the Hugging Face model type whose layers are exactly those of ``spec``, a workload's
    ``architecture`` (``spec.from_architecture``: q/k/v/o biases with ``attention_bias``, a standard MLP's two biases
    too), with room for ``positions`` tokens; or why no model type builds it. The inverse of this adapter's reading,
    for a launch that builds the model (``recommendations.scratch``): a dense gated MLP with RMSNorm is Llama's
    (modeling_llama.py: ``attention_bias`` on q/k/v/o, ``mlp_bias``, ``head_dim``); routed experts on every layer
    without biases, Mixtral's; a standard MLP with LayerNorm and biases everywhere over one KV head per query head,
    GPT-NeoX's with sequential residuals and rotary over the whole head (the ZeRO and Megatron GPT layout)."""
    if spec.model_type != "custom":
        raise ValueError(f"not an architecture's spec: model_type {spec.model_type}")
    common: dict[str, Any] = {
        "hidden_size": spec.hidden_size,
        "num_hidden_layers": spec.num_layers,
        "num_attention_heads": spec.num_attention_heads,
        "vocab_size": spec.vocab_size,
        "tie_word_embeddings": spec.tie_word_embeddings,
        "max_position_embeddings": positions,
    }
    heads = {"num_key_value_heads": spec.num_kv_heads, "head_dim": spec.head_dim}
    gated_rms = spec.mlp == "gated" and spec.norm == "rms"
    if gated_rms and spec.num_experts == 1:
        return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", **common, **heads,
                "intermediate_size": spec.intermediate_size, "hidden_act": "silu", "attention_bias": spec.qkv_bias,
                "mlp_bias": False}  # fmt: skip
    if gated_rms and not spec.qkv_bias:
        return {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", **common, **heads,
                "intermediate_size": spec.expert_intermediate_size, "hidden_act": "silu",
                "num_local_experts": spec.num_experts, "num_experts_per_tok": spec.experts_per_token}  # fmt: skip
    mha = spec.num_kv_heads == spec.num_attention_heads and spec.num_attention_heads * spec.head_dim == spec.hidden_size
    standard_layer = spec.mlp == "standard" and spec.norm == "layer"
    if standard_layer and spec.num_experts == 1 and spec.qkv_bias and mha:
        return {"architectures": ["GPTNeoXForCausalLM"], "model_type": "gpt_neox", **common,
                "intermediate_size": spec.intermediate_size, "hidden_act": "gelu", "rotary_pct": 1.0,
                "use_parallel_residual": False, "attention_bias": True}  # fmt: skip
    if gated_rms:
        return "routed experts with attention biases: Mixtral, the model type with these experts, has no biases"
    if standard_layer:
        return (
            "a standard MLP with LayerNorm builds as GPT-NeoX only with biases everywhere, one KV head per query head"
            " and no expert routing"
        )
    return f"a {spec.mlp} MLP with {spec.norm} norms: no Hugging Face model type pairs them as the architecture does"
