"""Multimodal towers (vision/audio encoders and their projectors): counted in the weights.

`count_towers` counts the parameters transformers 5.24.0 builds on the meta device for everything outside the
language model of a multimodal wrapper — the vision (and audio) encoder, its merger/adapter and the projector into
the language model — from the config's `vision_config` (and `audio_config`). A key the config leaves out takes the
vision configuration class's default (configuration_<type>.py); a wrapper without a `vision_config` gets the class
defaults, as transformers builds it (Mistral 3 the wrapper's own `init_kwargs`; Gemma 4 builds no tower: its
`vision_config`/`audio_config` are optional, configuration_gemma4.py:363-367, modeling_gemma4.py:2231-2245).

Every size is read bounded (`hf_layered.Reader`) before any arithmetic: a bad field is an error that names it.
Paths below are transformers 5.24.0 `models/<type>/modeling_<type>.py` unless said otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .hf_layered import MAX_HEADS, MAX_LAYERS, MAX_POSITIONS, MAX_STATE, MAX_WIDTH, ConfigError, Reader

MAX_IMAGE = 65_536  # pixels per side of an image, a patch or a tile
MAX_CHANNELS = 4096


@dataclass(frozen=True, slots=True)
class Towers:
    params: int
    note: str


@dataclass(frozen=True, slots=True)
class _Block:
    """One encoder layer: q/k/v/o attention, an MLP (gate/up/down, or fc1/fc2) and its norms.

    Fused qkv projections (Qwen's `attn.qkv`) hold the same elements as separate q, k and v."""

    hidden: int
    inter: int
    q: int  # q width (the o projection's input): heads × head_dim
    kv: int  # k and v widths
    qkv_bias: bool
    o_bias: bool
    gated: bool  # gate/up/down; else fc1/fc2
    mlp_bias: bool
    norms: int
    norm_bias: bool  # LayerNorm (weight and bias); else RMSNorm (weight)
    qk_norm: int = 0  # per-head q_norm and k_norm width (0: none)

    @property
    def params(self) -> int:
        h = self.hidden
        attention = h * (self.q + 2 * self.kv) + self.q * h
        if self.qkv_bias:
            attention += self.q + 2 * self.kv
        if self.o_bias:
            attention += h
        matrices = 3 if self.gated else 2
        mlp = matrices * h * self.inter
        if self.mlp_bias:
            mlp += (matrices - 1) * self.inter + h
        return attention + mlp + self.norms * h * (2 if self.norm_bias else 1) + 2 * self.qk_norm


def count_towers(config: Mapping[str, Any], model_type: str) -> Towers | None:
    """The towers of a multimodal wrapper, as transformers builds them; None for a text-only model_type (and for a
    Gemma 4 config without vision and audio configs)."""
    counter = _FAMILIES.get(model_type)
    if counter is None:
        return None
    try:
        return counter(config)
    except ConfigError as exc:
        # hf_config imports this module; its error class is the adapter's one error for a config it cannot read
        from .hf_config import UnsupportedModelError

        raise UnsupportedModelError(str(exc)) from None


# --- reading ------------------------------------------------------------------------------------------------


def _sub(config: Mapping[str, Any], key: str, defaults: Mapping[str, Any]) -> Reader:
    """A sub-config (`vision_config`, `audio_config`) over its class defaults (absent: the defaults alone)."""
    value = config.get(key)
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"hf_config '{key}' must be an object")
    return Reader({**defaults, **{k: v for k, v in value.items() if v is not None}}, f"hf_config.{key}")


def _model_type(config: Mapping[str, Any], key: str, expected: str) -> None:
    """A sub-config resolved through AutoConfig by its `model_type` (configuration_utils.py SubConfigSpec
    create_subconfig): only the encoder the wrapper's modeling file is read for is counted."""
    value = config.get(key)
    if isinstance(value, Mapping) and value.get("model_type") not in (None, expected):
        raise ConfigError(f"hf_config.{key} 'model_type' = {value.get('model_type')!r}: only {expected!r} is counted")


def _text_hidden(config: Mapping[str, Any], default: int) -> int:
    """The language model's width (the projector's output): `text_config.hidden_size`, else the text class's
    default."""
    text = config.get("text_config")
    if text is None:
        return default
    if not isinstance(text, Mapping):
        raise ConfigError("hf_config 'text_config' must be an object")
    return Reader(text, "hf_config.text_config").integer("hidden_size", default, lo=1)


# the sub-config readers below hold the class defaults (`_sub`): every key they read is there


def _hidden(r: Reader) -> int:
    return r.integer("hidden_size", lo=1)


def _layers(r: Reader, key: str) -> int:
    return r.integer(key, lo=0, hi=MAX_LAYERS)


def _heads(r: Reader, key: str) -> int:
    return r.integer(key, lo=1, hi=MAX_HEADS)


def _size(r: Reader, key: str) -> int:
    return r.integer(key, lo=1, hi=MAX_IMAGE)


def _listed(r: Reader, key: str, default: int) -> int:
    """How many entries a list field holds (bounded); its class default when absent."""
    value = r.cfg.get(key)
    if value is None:
        return default
    if not isinstance(value, list | tuple) or len(value) > MAX_LAYERS:
        raise ConfigError(f"{r.where} '{key}' must be a list of at most {MAX_LAYERS} entries")
    return len(value)


def _note(name: str, layers: int, hidden: int, params: int, extra: str = "") -> str:
    return f"{name} {layers} layers × {hidden}{extra}: {params:,} parameters"


# --- Mllama (Llama 3.2 Vision) ---------------------------------------------------------------------------------

# what Meta's two vision configs share (configuration_mllama.py:61-82, configuration_llama4.py:56-73)
_META_VISION: dict[str, Any] = {"num_channels": 3, "vision_output_dim": 7680, "image_size": 448, "patch_size": 14}
# configuration_mllama.py:61-82 (MllamaVisionConfig)
_MLLAMA_VISION = _META_VISION | {"hidden_size": 1280, "num_hidden_layers": 32, "num_global_layers": 8}
_MLLAMA_VISION |= {"attention_heads": 16, "intermediate_size": 5120, "max_num_tiles": 4}


def _mllama(config: Mapping[str, Any]) -> Towers:
    """MllamaVisionModel (modeling_mllama.py:820-859) + MllamaModel.multi_modal_projector (:1285-1289)."""
    r = _sub(config, "vision_config", _MLLAMA_VISION)
    h = _hidden(r)
    # attribute_map {"num_attention_heads": "attention_heads"} (configuration_mllama.py:59): either spelling
    given = config.get("vision_config")
    spelled = isinstance(given, Mapping) and given.get("attention_heads") is None and "num_attention_heads" in given
    heads = _heads(r, "num_attention_heads" if spelled else "attention_heads")
    inter = r.integer("intermediate_size", lo=1)
    channels = r.integer("num_channels", lo=1, hi=MAX_CHANNELS)
    patch = _size(r, "patch_size")
    patches = (_size(r, "image_size") // patch) ** 2 + 1  # + the class token (:834)
    tiles = r.integer("max_num_tiles", lo=1, hi=MAX_LAYERS)
    # max_aspect_ratio_id = len(supported_aspect_ratios), 8 by default (configuration_mllama.py:78-95)
    ratios = _listed(r, "supported_aspect_ratios", 8) + 1
    local = _layers(r, "num_hidden_layers")
    glob = _layers(r, "num_global_layers")
    # MllamaVisionAttention: q/k/v/o heads × (hidden // heads), no bias (:246-249); MllamaVisionMLP fc1/fc2 with bias
    # (:186-187); two LayerNorms (:301-302); the global layers add gate_attn and gate_ffn (:305-306)
    q = heads * (h // heads)
    block = _Block(h, inter, q, q, False, False, False, True, 2, True).params
    embeddings = (
        h * channels * patch * patch  # patch_embedding Conv2d, no bias (:837-844)
        + h  # class_embedding (:846)
        + 1
        + patches * h
        + ratios * tiles * patches * h  # gated_positional_embedding (:143-160)
        + 2 * (1 + ratios * tiles * h)  # pre/post_tile_positional_embedding, gated (:120-131)
        + 2 * 2 * h  # layernorm_pre, layernorm_post (:853-854)
    )
    tower = embeddings + local * block + glob * (block + 2)
    text = _text_hidden(config, 4096)  # MllamaTextConfig (configuration_mllama.py:125)
    projector = r.integer("vision_output_dim", lo=1) * text + text
    total = tower + projector
    return Towers(total, _note("Mllama vision tower", local, h, total, f" + {glob} gated global layers + projector"))


# --- Llama 4 -----------------------------------------------------------------------------------------------------

# configuration_llama4.py:56-73 (Llama4VisionConfig)
_LLAMA4_VISION = _META_VISION | {"hidden_size": 768, "num_hidden_layers": 34, "num_attention_heads": 16}
_LLAMA4_VISION |= {"intermediate_size": 5632, "projector_input_dim": 4096, "projector_output_dim": 4096}


def _llama4(config: Mapping[str, Any]) -> Towers:
    """Llama4VisionModel (modeling_llama4.py:1003-1031) + Llama4MultiModalProjector (:684-691)."""
    r = _sub(config, "vision_config", _LLAMA4_VISION)
    h = _hidden(r)
    heads = _heads(r, "num_attention_heads")
    inter = r.integer("intermediate_size", lo=1)
    channels = r.integer("num_channels", lo=1, hi=MAX_CHANNELS)
    patch = _size(r, "patch_size")
    patches = (_size(r, "image_size") // patch) ** 2 + 1
    layers = _layers(r, "num_hidden_layers")
    # Llama4VisionAttention q/k/v/o with bias (:762-765), Llama4VisionMLP fc1/fc2 with bias (:816-817), two LayerNorms
    q = heads * (h // heads)
    block = _Block(h, inter, q, q, True, True, False, True, 2, True).params
    embeddings = (
        channels * patch * patch * h  # Llama4UnfoldConvolution.linear, no bias (:959-963)
        + h  # class_embedding
        + patches * h  # positional_embedding_vlm (:1022)
        + 2 * 2 * h  # layernorm_pre, layernorm_post
    )
    # vision_adapter: Llama4VisionMLP2 fc1 intermediate → projector_input_dim, fc2 projector_output_dim², no bias
    # (:667-673)
    adapter_in = r.integer("projector_input_dim", lo=1)
    adapter_out = r.integer("projector_output_dim", lo=1)
    adapter = inter * adapter_in + adapter_out * adapter_out
    projector = r.integer("vision_output_dim", lo=1) * _text_hidden(config, 5120)  # no bias
    total = embeddings + layers * block + adapter + projector
    return Towers(total, _note("Llama 4 vision tower", layers, h, total, " + pixel-shuffle adapter + projector"))


# --- Qwen2.5-VL, Qwen3-VL, Qwen3.5 ------------------------------------------------------------------------------

# configuration_qwen2_5_vl.py:53-65 (Qwen2_5_VLVisionConfig)
_QWEN2_5_VISION: dict[str, Any] = {"depth": 32, "hidden_size": 3584, "intermediate_size": 3420, "num_heads": 16}
_QWEN2_5_VISION |= {"in_channels": 3, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2}
_QWEN2_5_VISION |= {"out_hidden_size": 3584}

# configuration_qwen3_vl.py:44-55, configuration_qwen3_vl_moe.py:138-149, configuration_qwen3_5.py:136-146,
# configuration_qwen3_5_moe.py:148-158: the same defaults (Qwen3.5 has no deepstack_visual_indexes)
_QWEN3_VISION: dict[str, Any] = {"depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "num_heads": 16}
_QWEN3_VISION |= {"in_channels": 3, "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2}
_QWEN3_VISION |= {"out_hidden_size": 3584, "num_position_embeddings": 2304}


def _qwen_patch(r: Reader, h: int) -> tuple[int, int, int]:
    """(Conv3d patch weights, merged width hidden × merge², output width) of a Qwen vision tower."""
    channels = r.integer("in_channels", lo=1, hi=MAX_CHANNELS)
    patch = _size(r, "patch_size")
    temporal = _size(r, "temporal_patch_size")
    merge = r.integer("spatial_merge_size", lo=1, hi=MAX_IMAGE)
    return h * channels * temporal * patch * patch, h * merge * merge, r.integer("out_hidden_size", lo=1)


def _qwen_tower(config: Mapping[str, Any], defaults: Mapping[str, Any]) -> tuple[Reader, int, int, int]:
    """A Qwen vision config's reader, hidden width, MLP width and depth (heads checked)."""
    r = _sub(config, "vision_config", defaults)
    h = _hidden(r)
    inter = r.integer("intermediate_size", lo=1)
    _heads(r, "num_heads")
    return r, h, inter, _layers(r, "depth")


def _qwen2_5_vl(config: Mapping[str, Any]) -> Towers:
    """Qwen2_5_VisionTransformerPretrainedModel (modeling_qwen2_5_vl.py:386-423)."""
    r, h, inter, layers = _qwen_tower(config, _QWEN2_5_VISION)
    patch, merged, out = _qwen_patch(r, h)
    # Qwen2_5_VLVisionBlock (:342-349): RMSNorm norm1/norm2, attn.qkv + proj with bias (:266-267), gated MLP with
    # bias (Qwen2_5_VLMLP(bias=True), :85-92)
    block = _Block(h, inter, h, h, True, True, True, True, 2, False).params
    # Qwen2_5_VLPatchMerger (:185-194): ln_q RMSNorm(hidden), mlp merged → merged → out, with bias
    merger = h + merged * merged + merged + out * merged + out
    total = patch + layers * block + merger  # Conv3d patch embed without bias (:114)
    return Towers(total, _note("Qwen2.5-VL vision tower", layers, h, total, " + patch merger"))


def _qwen3_vl(config: Mapping[str, Any], deepstack: bool) -> Towers:
    """Qwen3VLVisionModel (modeling_qwen3_vl.py:621-662; qwen3_vl_moe :675-716 the same) and Qwen3_5VisionModel
    (modeling_qwen3_5.py:1117-1150, qwen3_5_moe :1227-1260: no deepstack mergers)."""
    r, h, inter, layers = _qwen_tower(config, _QWEN3_VISION)
    patch, merged, out = _qwen_patch(r, h)
    positions = r.integer("num_position_embeddings", lo=1, hi=MAX_POSITIONS)
    # Qwen3VLVisionBlock (:328-333): LayerNorm norm1/norm2, attn.qkv + proj with bias (:252-253), fc1/fc2 with bias
    # (Qwen3VLVisionMLP, :83-84)
    block = _Block(h, inter, h, h, True, True, False, True, 2, True).params
    # Qwen3VLVisionPatchMerger (:171-179): a LayerNorm over hidden (the deepstack ones over hidden × merge²:
    # use_postshuffle_norm), linear_fc1 merged², linear_fc2 merged → out, with bias
    mlp = merged * merged + merged + out * merged + out
    mergers = 2 * h + mlp
    stacks = _listed(r, "deepstack_visual_indexes", 3) if deepstack else 0
    mergers += stacks * (2 * merged + mlp)
    total = patch + h + positions * h + layers * block + mergers  # Conv3d with bias (:100), pos_embed (:639)
    what = f" + merger + {stacks} deepstack mergers" if deepstack else " + merger"
    return Towers(
        total, _note("Qwen3-VL vision tower" if deepstack else "Qwen3.5 vision tower", layers, h, total, what)
    )


# --- Mistral 3 (Pixtral) -----------------------------------------------------------------------------------------

# configuration_pixtral.py:43-49 (PixtralVisionConfig)
_PIXTRAL: dict[str, Any] = {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24}
_PIXTRAL |= {"num_attention_heads": 16, "num_channels": 3, "image_size": 1024, "patch_size": 16}
# Mistral3Config's vision_config when the config has none: Pixtral with these init_kwargs
# (configuration_mistral3.py:74-88; its text_config 5120 wide, :52-72)
_MISTRAL3_VISION_INIT: dict[str, Any] = {**_PIXTRAL, "patch_size": 14, "image_size": 1540}


def _mistral3(config: Mapping[str, Any]) -> Towers:
    """PixtralVisionModel (modeling_pixtral.py:378-395) + Mistral3MultiModalProjector (modeling_mistral3.py:108-127)
    with its Mistral3PatchMerger (:70-82)."""
    _model_type(config, "vision_config", "pixtral")
    given = config.get("vision_config") is not None
    r = _sub(config, "vision_config", _PIXTRAL if given else _MISTRAL3_VISION_INIT)
    w = Reader(config, "hf_config")
    h = _hidden(r)
    inter = r.integer("intermediate_size", lo=1)
    _heads(r, "num_attention_heads")
    channels = r.integer("num_channels", lo=1, hi=MAX_CHANNELS)
    patch = _size(r, "patch_size")
    layers = _layers(r, "num_hidden_layers")
    # PixtralAttentionLayer (:261-268): RMSNorm attention_norm/ffn_norm, q/k/v/o hidden × hidden without bias
    # (:175-178), PixtralMLP gate/up/down without bias (:230-232)
    block = _Block(h, inter, h, h, False, False, True, False, 2, False).params
    tower = h * channels * patch * patch + h + layers * block  # patch_conv without bias, ln_pre (:384-392)
    # the projector (configuration_mistral3.py:93-98 defaults): RMSNorm(vision hidden), merging_layer
    # hidden × merge² → hidden (no bias), linear_1 vision hidden × feature layers → text, linear_2 text → text
    merge = w.integer("spatial_merge_size", 2, lo=1, hi=MAX_IMAGE)
    bias = w.flag("multimodal_projector_bias", False)
    text = _text_hidden(config, 5120 if config.get("text_config") is None else 4096)  # MistralConfig: 4096
    feature = config.get("vision_feature_layer", -1)
    if isinstance(feature, list):
        if not 1 <= len(feature) <= MAX_LAYERS or not all(
            isinstance(x, int) and not isinstance(x, bool) for x in feature
        ):
            raise ConfigError(
                f"hf_config 'vision_feature_layer' must be an integer or a list of 1..{MAX_LAYERS} integers"
            )
        features = len(feature)
    elif isinstance(feature, int) and not isinstance(feature, bool):
        features = 1
    else:
        raise ConfigError(f"hf_config 'vision_feature_layer' must be an integer or a list of integers, got {feature!r}")
    projector = h + h * merge * merge * h + h * features * text + text * text + (2 * text if bias else 0)
    total = tower + projector
    return Towers(total, _note("Pixtral vision tower", layers, h, total, " + patch merger + projector"))


# --- Gemma 3 (SigLIP) --------------------------------------------------------------------------------------------

# configuration_siglip.py:93-103 (SiglipVisionConfig)
_SIGLIP: dict[str, Any] = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12}
_SIGLIP |= {"num_attention_heads": 12, "num_channels": 3, "image_size": 224, "patch_size": 16}
_SIGLIP |= {"vision_use_head": True}


def _gemma3(config: Mapping[str, Any]) -> Towers:
    """SiglipVisionModel (siglip/modeling_siglip.py:552-569) + Gemma3MultiModalProjector
    (modeling_gemma3.py:635-645)."""
    _model_type(config, "vision_config", "siglip_vision_model")
    r = _sub(config, "vision_config", _SIGLIP)
    h = _hidden(r)
    inter = r.integer("intermediate_size", lo=1)
    heads = _heads(r, "num_attention_heads")
    if h % heads:  # SiglipAttention refuses it (modeling_siglip.py:258-263)
        raise ConfigError(f"hf_config.vision_config 'num_attention_heads' ({heads}) must divide hidden_size ({h})")
    channels = r.integer("num_channels", lo=1, hi=MAX_CHANNELS)
    patch = _size(r, "patch_size")
    positions = (_size(r, "image_size") // patch) ** 2  # no class token (:132-134)
    layers = _layers(r, "num_hidden_layers")
    # SiglipEncoderLayer (:325-331): LayerNorms, q/k/v/out_proj with bias (:268-271), fc1/fc2 with bias (:315-316)
    block = _Block(h, inter, h, h, True, True, False, True, 2, True).params
    mlp = 2 * h * inter + inter + h
    tower = h * channels * patch * patch + h + positions * h + layers * block + 2 * h  # + post_layernorm (:566)
    if r.flag("vision_use_head", True):
        # SiglipMultiheadAttentionPoolingHead (:621-630): probe, nn.MultiheadAttention (in_proj 3h × h + bias,
        # out_proj h × h + bias), LayerNorm, SiglipMLP
        tower += h + (3 * h * h + 3 * h + h * h + h) + 2 * h + mlp
    projector = h * _text_hidden(config, 2304) + h  # mm_input_projection_weight, mm_soft_emb_norm (Gemma3RMSNorm)
    total = tower + projector
    return Towers(total, _note("SigLIP vision tower", layers, h, total, " + projector"))


# --- Gemma 4 ------------------------------------------------------------------------------------------------------

# configuration_gemma4.py:299-315 (Gemma4VisionConfig)
_GEMMA4_VISION: dict[str, Any] = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 16}
_GEMMA4_VISION |= {"num_attention_heads": 12, "num_key_value_heads": 12, "head_dim": 64, "patch_size": 16}
_GEMMA4_VISION |= {"position_embedding_size": 10 * 1024}
# configuration_gemma4.py:55-73 (Gemma4AudioConfig)
_GEMMA4_AUDIO: dict[str, Any] = {"hidden_size": 1024, "num_hidden_layers": 12, "num_attention_heads": 8}
_GEMMA4_AUDIO |= {"subsampling_conv_channels": [128, 32], "conv_kernel_size": 5, "output_proj_dims": 1536}


def _gemma4(config: Mapping[str, Any]) -> Towers | None:
    """Gemma4Model.vision_tower/embed_vision and audio_tower/embed_audio, each built only when its config is given
    (modeling_gemma4.py:2231-2245)."""
    text = _text_hidden(config, 2304)  # configuration_gemma4.py:151
    parts: list[tuple[int, str]] = []
    if config.get("vision_config") is not None:
        parts.append(_gemma4_vision(_sub(config, "vision_config", _GEMMA4_VISION), text))
    if config.get("audio_config") is not None:
        parts.append(_gemma4_audio(_sub(config, "audio_config", _GEMMA4_AUDIO), text))
    if not parts:
        return None
    total = sum(params for params, _ in parts)
    return Towers(total, " + ".join(what for _, what in parts) + f": {total:,} parameters")


def _gemma4_vision(r: Reader, text: int) -> tuple[int, str]:
    """Gemma4VisionModel (:2048-2063) + Gemma4MultimodalEmbedder (:2116-2130)."""
    h = _hidden(r)
    inter = r.integer("intermediate_size", lo=1)
    heads = _heads(r, "num_attention_heads")
    kv = _heads(r, "num_key_value_heads")
    head_dim = r.integer("head_dim", lo=1, hi=MAX_STATE)
    patch = _size(r, "patch_size")
    positions = r.integer("position_embedding_size", lo=1, hi=MAX_POSITIONS)
    layers = _layers(r, "num_hidden_layers")
    # Gemma4VisionEncoderLayer (:962-974): Gemma4VisionAttention q/k/v/o without bias, q_norm/k_norm over head_dim,
    # a weightless v_norm (:904-911); gate/up/down without bias (:687-696); four RMSNorms. Gemma4ClippableLinear's
    # clip bounds are buffers (:167-182)
    block = _Block(h, inter, heads * head_dim, kv * head_dim, False, False, True, False, 4, False, head_dim).params
    # Gemma4VisionPatchEmbedder (:575-584): input_proj 3·patch² → hidden, position_embedding_table 2 × size × hidden;
    # the pooler has no parameters, std_bias/std_scale are buffers (:2058-2060)
    tower = 3 * patch * patch * h + 2 * positions * h + layers * block
    # embed_vision: embedding_projection (output_proj_dims if the config has it, else hidden) → text, no bias; its
    # pre-projection norm has no weight
    embed = r.integer("output_proj_dims", h, lo=1) * text
    return tower + embed, f"Gemma 4 vision tower {layers} layers × {h} + embedder"


def _gemma4_audio(r: Reader, text: int) -> tuple[int, str]:
    """Gemma4AudioModel (:1956-1979) + Gemma4MultimodalEmbedder (:2116-2130)."""
    h = _hidden(r)
    heads = _heads(r, "num_attention_heads")
    kernel = r.integer("conv_kernel_size", lo=1, hi=MAX_STATE)
    out = r.integer("output_proj_dims", lo=1)
    layers = _layers(r, "num_hidden_layers")
    channels = r.int_list("subsampling_conv_channels", hi=MAX_WIDTH)
    if channels is None or len(channels) < 2 or min(channels[:2]) < 1:
        raise ConfigError(f"{r.where} 'subsampling_conv_channels' must list two positive channel counts")
    c0, c1 = channels[:2]
    # Gemma4AudioSubSampleConvProjection (:353-392): two 3×3 Conv2d without bias, each with a bias-free LayerNorm,
    # input_proj_linear (c0 // 4) · c1 → hidden
    subsample = 9 * c0 + c0 + 9 * c1 * c0 + c1 + (c0 // 4) * c1 * h
    head_dim = h // heads
    width = heads * head_dim
    # Gemma4AudioLayer (:521-534): two feed-forwards (hidden → 4·hidden → hidden, two RMSNorms each, :411-420);
    # attention q/k/v heads × head_dim, post hidden², relative_k_proj, per_dim_scale (:247-270); the light conv
    # (linear_start hidden → 2·hidden, linear_end, a depthwise conv, two RMSNorms, :480-497); three RMSNorms
    feed_forward = 2 * 4 * h * h + 2 * h
    attention = 3 * width * h + h * h + width * h + head_dim
    conv = 2 * h * h + h * h + h * kernel + 2 * h
    layer = 2 * feed_forward + attention + conv + 3 * h
    tower = subsample + layers * layer + out * h + out  # output_proj with bias
    embed = out * text  # embed_audio: output_proj_dims → text, no bias
    return tower + embed, f"Gemma 4 audio tower {layers} layers × {h} + embedder"


_FAMILIES: dict[str, Callable[[Mapping[str, Any]], Towers | None]] = {
    "mllama": _mllama,
    "llama4": _llama4,
    "qwen2_5_vl": _qwen2_5_vl,
    "qwen3_vl": lambda config: _qwen3_vl(config, deepstack=True),
    "qwen3_vl_moe": lambda config: _qwen3_vl(config, deepstack=True),
    "qwen3_5": lambda config: _qwen3_vl(config, deepstack=False),
    "qwen3_5_moe": lambda config: _qwen3_vl(config, deepstack=False),
    "mistral3": _mistral3,
    "gemma3": _gemma3,
    "gemma4": _gemma4,
}
