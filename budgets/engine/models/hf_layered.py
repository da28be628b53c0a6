"""The HF adapter's per-layer reader: a config.json whose layers differ (MLA, sliding/chunked/linear attention,
Mamba hybrids, NAS layers, interleaved MoE) → a `ModelSpec` with layer runs and exact parameters.

Fields are read generically where the config states them (`layer_types`, `layers_block_type`,
`hybrid_override_pattern`, `full_attention_interval`, `attn_layer_period`/`offset`, `no_rope_layers` with
`attention_chunk_size`, `kv_lora_rank`, `linear_*`, `mamba_*`, `first_k_dense_replace`, `moe_layer_freq`,
`interleave_moe_layer_step`, `mlp_only_layers`, `block_configs`); the module layout differences between
families (which projections carry biases, how many norms a layer has, how q/k are normed) are the rules in
`hf_defaults.LAYERED_RULES`. Parameters are the sum of the weight groups (`weight_groups.py`), each shaped as
the transformers 5.24 module of the same name on the meta device.

Every size is bounded before any loop or product (`Reader`): a hostile config is an error naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .hf_defaults import LAYERED_RULES, LayeredRules
from .layers import LayerRun, Mixer, MixerKind, Mlp, compress
from .spec import ModelSpec
from .weight_groups import Role, WeightGroup

MAX_LAYERS = 1024
MAX_WIDTH = 1_048_576  # hidden, intermediate and projection widths
MAX_HEADS = 4096
MAX_VOCAB = 4_194_304
MAX_EXPERTS = 4096
MAX_POSITIONS = 2**27  # tokens; over ten times the longest published context (10M, Llama 4 Scout)
MAX_STATE = 65_536  # SSM state size, conv kernel, ranks


class ConfigError(ValueError):
    """A config that cannot be read: the message names the field."""


@dataclass
class Reader:
    """Reads bounded numbers from a config dict, with the family defaults for absent keys."""

    cfg: Mapping[str, Any]
    where: str = "hf_config"

    def has(self, key: str) -> bool:
        return self.cfg.get(key) is not None

    def integer(self, key: str, default: int | None = None, *, lo: int = 0, hi: int = MAX_WIDTH) -> int:
        value = self.cfg.get(key)
        if value is None:
            if default is None:
                raise ConfigError(f"{self.where} is missing '{key}' (model_type {self.cfg.get('model_type')!r})")
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            raise ConfigError(f"{self.where} '{key}' must be an integer, got {value!r}")
        if isinstance(value, float) and (not value.is_integer()):
            raise ConfigError(f"{self.where} '{key}' must be an integer, got {value!r}")
        if not lo <= value <= hi:
            raise ConfigError(f"{self.where} '{key}' = {value!r} is outside the allowed range {lo}..{hi}")
        return int(value)

    def number(self, key: str, default: float, *, lo: float = 0.0, hi: float = 1.0) -> float:
        value = self.cfg.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= value <= hi:
            raise ConfigError(f"{self.where} '{key}' must be a number in {lo:g}..{hi:g}, got {value!r}")
        return float(value)

    def flag(self, key: str, default: bool) -> bool:
        value = self.cfg.get(key)
        if value is None:
            return default
        if not isinstance(value, bool | int):
            raise ConfigError(f"{self.where} '{key}' must be true or false, got {value!r}")
        return bool(value)

    def int_list(self, key: str, length: int | None = None, *, hi: int = MAX_WIDTH) -> list[int] | None:
        value = self.cfg.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or len(value) > MAX_LAYERS * 4:
            raise ConfigError(f"{self.where} '{key}' must be a list of at most {MAX_LAYERS * 4} integers")
        out: list[int] = []
        for item in value:
            if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item <= hi:
                raise ConfigError(f"{self.where} '{key}' must hold integers in 0..{hi}, got {item!r}")
            out.append(item)
        if length is not None and len(out) < length:
            raise ConfigError(f"{self.where} '{key}' has {len(out)} entries for {length} layers")
        return out

    def str_list(self, key: str, length: int) -> list[str] | None:
        value = self.cfg.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) and len(v) <= 64 for v in value):
            raise ConfigError(f"{self.where} '{key}' must be a list of names")
        if len(value) < length:
            raise ConfigError(f"{self.where} '{key}' has {len(value)} entries for {length} layers")
        return list(value)


# layer-type names as configs spell them → mixer kinds
_LAYER_TYPE_NAMES: dict[str, MixerKind] = {
    "full_attention": "full",
    "attention": "full",
    "global": "full",
    "indexed_attention": "full",  # DeepSeek-V3.2: MLA with the indexer
    "sliding_attention": "sliding",
    "chunked_attention": "chunked",
    "linear_attention": "linear",
    "mamba": "mamba",
    "mamba2": "mamba",
    "none": "none",
}


@dataclass
class _Dims:
    h: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    v_head_dim: int
    vocab: int
    inter: int
    window: int
    chunk: int


def _dims(r: Reader, rules: LayeredRules) -> _Dims:
    h = r.integer("hidden_size", lo=1)
    listed = r.cfg.get("layers_block_type") or r.cfg.get("hybrid_override_pattern")
    implied = len(listed) if isinstance(listed, list | str) and 0 < len(listed) <= MAX_LAYERS else None
    layers = r.integer("num_hidden_layers", implied, lo=1, hi=MAX_LAYERS)
    heads = r.integer("num_attention_heads", lo=1, hi=MAX_HEADS)
    kv = r.integer("num_key_value_heads", heads, lo=1, hi=MAX_HEADS)
    if heads % kv:
        raise ConfigError(f"{r.where} num_key_value_heads ({kv}) must divide num_attention_heads ({heads})")
    head_dim = r.integer("head_dim", h // heads, lo=1, hi=4096) if r.has("head_dim") else max(h // heads, 1)
    vocab = r.integer("vocab_size", lo=1, hi=MAX_VOCAB)
    inter = r.integer("intermediate_size", 0)
    window = r.integer("sliding_window", 0, hi=MAX_POSITIONS)
    chunk = r.integer("attention_chunk_size", 0, hi=MAX_POSITIONS)
    return _Dims(h, layers, heads, kv, head_dim, head_dim, vocab, inter, window, chunk)


# --- which mixer and MLP each layer has --------------------------------------------------------------------


def _mixer_kinds(r: Reader, d: _Dims, rules: LayeredRules) -> list[MixerKind]:
    n = d.layers
    if rules.block_configs or r.has("block_configs"):
        return ["full"] * n  # NAS: decided per block in _nas_layers
    types = r.str_list("layer_types", n)
    if types is not None:
        out: list[MixerKind] = []
        for i, t in enumerate(types[:n]):
            if t not in _LAYER_TYPE_NAMES:
                raise ConfigError(f"{r.where} layer_types[{i}] = {t!r}; known: {', '.join(sorted(_LAYER_TYPE_NAMES))}")
            kind = _LAYER_TYPE_NAMES[t]
            kind = rules.linear_kind if kind == "linear" else kind
            out.append("sliding" if kind == "full" and rules.all_sliding and d.window else kind)
        if rules.last_layer_full and out:
            out[-1] = "full"  # Gemma 4 forces it (configuration_gemma4.py:195-199)
        return out
    if rules.sliding_pattern:  # configuration_gemma4.py:188-199: 5 sliding then 1 full, the last one full
        out = ["sliding" if (i + 1) % rules.sliding_pattern else "full" for i in range(n)]
        if rules.last_layer_full:
            out[-1] = "full"
        return out
    linear_cfg = r.cfg.get("linear_attn_config")
    if isinstance(linear_cfg, Mapping) and "full_attn_layers" in linear_cfg:
        lr = Reader(linear_cfg, f"{r.where}.linear_attn_config")
        full = set(lr.int_list("full_attn_layers", hi=MAX_LAYERS) or [])  # 1-indexed in the checkpoint
        return ["full" if i + 1 in full else "linear" for i in range(n)]
    blocks = r.str_list("layers_block_type", n)
    if blocks is not None:  # "mamba"/"attention" (+ "moe"/"mlp" blocks without a mixer in nemotron_h)
        kinds = [_LAYER_TYPE_NAMES.get(b, "none") for b in blocks[:n]]
        return [rules.linear_kind if k == "linear" else k for k in kinds]
    pattern = r.cfg.get("hybrid_override_pattern")
    if pattern is not None:
        if not isinstance(pattern, str) or len(pattern) < n or set(pattern) - set("M*-E"):
            raise ConfigError(f"{r.where} 'hybrid_override_pattern' must be {n} characters of M, *, - and E")
        return [{"M": "mamba", "*": "full"}.get(c, "none") for c in pattern[:n]]  # type: ignore[misc]
    if r.has("full_attention_interval"):
        every = r.integer("full_attention_interval", lo=1, hi=MAX_LAYERS)
        return ["full" if (i + 1) % every == 0 else "linear" for i in range(n)]
    if r.has("attn_layer_period"):
        period = r.integer("attn_layer_period", lo=1, hi=MAX_LAYERS)
        offset = r.integer("attn_layer_offset", 0, hi=MAX_LAYERS)
        return ["full" if i % period == offset else "mamba" for i in range(n)]
    if rules.parallel_mamba:
        return ["full"] * n
    if d.chunk and (r.has("no_rope_layers") or r.has("no_rope_layer_interval")):
        # Llama 4: `no_rope_layers[i]` = 1 means layer i uses RoPE and attends in chunks; else a NoPE layer every
        # no_rope_layer_interval (configuration_llama4.py:169-172, 187-191)
        rope = r.int_list("no_rope_layers", n, hi=1)
        if not rope:
            every = r.integer("no_rope_layer_interval", lo=1, hi=MAX_LAYERS)
            rope = [int((i + 1) % every != 0) for i in range(n)]
        return ["chunked" if rope[i] else "full" for i in range(n)]
    if rules.all_sliding and d.window:
        return ["sliding"] * n
    return ["full"] * n


def _moe_layers(r: Reader, n: int, kinds: Sequence[MixerKind], rules: LayeredRules) -> list[bool]:
    """Which layers have a mixture of experts."""
    key = _experts_key(r, rules)
    if not key or r.integer(key, hi=MAX_EXPERTS) <= 1:
        return [False] * n
    listed = r.int_list("moe_layers", hi=MAX_LAYERS)
    if listed is not None:  # configuration_llama4.py:175-185
        return [i in set(listed) for i in range(n)]
    mlp_types = r.str_list("mlp_layer_types", n)
    if mlp_types is not None:
        return [t in ("sparse", "moe") for t in mlp_types[:n]]
    first_dense = r.integer("first_k_dense_replace", 0, hi=MAX_LAYERS)
    freq = r.integer("moe_layer_freq", 1, lo=1, hi=MAX_LAYERS)
    step = r.integer("interleave_moe_layer_step", 1, lo=1, hi=MAX_LAYERS)
    sparse_step = r.integer("decoder_sparse_step", 1, lo=1, hi=MAX_LAYERS)
    mlp_only = set(r.int_list("mlp_only_layers", hi=MAX_LAYERS) or [])
    moe = [
        i >= first_dense and (i - first_dense) % freq == 0 and (i + 1) % step == 0 and (i + 1) % sparse_step == 0
        for i in range(n)
    ]
    if r.has("expert_layer_period"):
        period = r.integer("expert_layer_period", lo=1, hi=MAX_LAYERS)
        offset = r.integer("expert_layer_offset", 0, hi=MAX_LAYERS)
        moe = [i % period == offset for i in range(n)]
    return [m and i not in mlp_only for i, m in enumerate(moe)]


def _experts_key(r: Reader, rules: LayeredRules) -> str:
    return next((key for key in rules.experts_keys if r.has(key)), "")


# --- parameters of each part ------------------------------------------------------------------------------


class _Groups:
    """Collects weight groups for one layer index (or the model level)."""

    def __init__(self, layer: int | None) -> None:
        self.layer = layer
        self.items: list[WeightGroup] = []

    def add(self, name: str, role: Role, shape: tuple[int, ...], *, linear: bool = True, per_layer: int = 1) -> None:
        if min(shape, default=1) <= 0:
            return
        prefix = "model." if self.layer is None else "model.layers.{layer}."
        layers = () if self.layer is None else (self.layer,)
        self.items.append(WeightGroup(prefix + name, role, shape, layers, per_layer, linear))

    def linear(self, name: str, role: Role, out: int, inp: int, bias: bool = False, per_layer: int = 1) -> None:
        self.add(name, role, (out, inp), per_layer=per_layer)
        if bias:
            self.add(name + ".bias", role, (out,), linear=False, per_layer=per_layer)

    def vector(self, name: str, role: Role, size: int) -> None:
        self.add(name, role, (size,), linear=False)

    @property
    def elements(self) -> int:
        return sum(g.elements for g in self.items)


def _attention(
    g: _Groups, r: Reader, d: _Dims, rules: LayeredRules, kind: MixerKind, *, values: bool = True, owns_kv: bool = True
) -> Mixer:
    """q/k/v/o attention. `values` False: no v_proj, the keys serve as values (Gemma 4 attention_k_eq_v); `owns_kv`
    False: the layer reads another layer's K/V (Gemma 4 num_kv_shared_layers): no k/v projections or k norm, and
    nothing cached (vLLM's kv_sharing_target_layer_name allocates no cache for it)."""
    bias = r.flag("attention_bias", rules.attention_bias)
    q_out = d.heads * d.head_dim * (2 if rules.gated_query else 1)
    g.linear("self_attn.q_proj", "attention", q_out, d.h, bias)
    if owns_kv:
        g.linear("self_attn.k_proj", "attention", d.kv_heads * d.head_dim, d.h, bias)
        if values:
            g.linear("self_attn.v_proj", "attention", d.kv_heads * d.v_head_dim, d.h, bias)
    g.linear("self_attn.o_proj", "attention", d.h, d.heads * d.v_head_dim, bias and rules.o_bias)
    qk_norm = rules.qk_norm or ("head" if r.flag("use_qk_norm", False) and rules.qk_norm_weights else None)
    if qk_norm == "head":
        g.vector("self_attn.q_norm", "norm", d.head_dim)
        if owns_kv:
            g.vector("self_attn.k_norm", "norm", d.head_dim)
    elif qk_norm == "full":
        g.vector("self_attn.q_norm", "norm", d.heads * d.head_dim)
        g.vector("self_attn.k_norm", "norm", d.kv_heads * d.head_dim)
    if rules.sinks:
        g.vector("self_attn.sinks", "attention", d.heads)
    window = d.window if kind == "sliding" else d.chunk if kind == "chunked" else 0
    kv_heads = d.kv_heads if owns_kv else 0
    return Mixer(kind, d.heads, kv_heads, d.head_dim, d.v_head_dim, window=window, sinks=rules.sinks)


def _cross_attention(g: _Groups, r: Reader, d: _Dims) -> Mixer:
    """A cross-attention layer over encoder (image) tokens (modeling_mllama.py MllamaCrossAttentionDecoderLayer):
    q/k/v/o, per-head q/k norms and two tanh gates; it caches the encoder tokens' K/V per sequence."""
    g.linear("cross_attn.q_proj", "attention", d.heads * d.head_dim, d.h)
    g.linear("cross_attn.k_proj", "attention", d.kv_heads * d.head_dim, d.h)
    g.linear("cross_attn.v_proj", "attention", d.kv_heads * d.head_dim, d.h)
    g.linear("cross_attn.o_proj", "attention", d.h, d.heads * d.head_dim)
    g.vector("cross_attn.q_norm", "norm", d.head_dim)
    g.vector("cross_attn.k_norm", "norm", d.head_dim)
    g.vector("cross_attn_attn_gate", "other", 1)
    g.vector("cross_attn_mlp_gate", "other", 1)
    return Mixer("cross", d.heads, d.kv_heads, d.head_dim)


def _mla(g: _Groups, r: Reader, d: _Dims) -> Mixer:
    """DeepSeek's multi-head latent attention (modeling_deepseek_v3.py DeepseekV3Attention)."""
    bias = r.flag("attention_bias", False)
    q_lora = r.integer("q_lora_rank", 0, hi=MAX_WIDTH)
    latent = r.integer("kv_lora_rank", lo=1, hi=MAX_WIDTH)
    rope = r.integer("qk_rope_head_dim", lo=1, hi=4096)
    nope = r.integer("qk_nope_head_dim", lo=0, hi=4096)
    v = r.integer("v_head_dim", lo=1, hi=4096)
    qk = nope + rope
    if q_lora:
        g.linear("self_attn.q_a_proj", "attention", q_lora, d.h, bias)
        g.vector("self_attn.q_a_layernorm", "norm", q_lora)
        g.linear("self_attn.q_b_proj", "attention", d.heads * qk, q_lora)
    else:
        g.linear("self_attn.q_proj", "attention", d.heads * qk, d.h)
    g.linear("self_attn.kv_a_proj_with_mqa", "attention", latent + rope, d.h, bias)
    g.vector("self_attn.kv_a_layernorm", "norm", latent)
    g.linear("self_attn.kv_b_proj", "attention", d.heads * (nope + v), latent)
    g.linear("self_attn.o_proj", "attention", d.h, d.heads * v, bias)
    index_dim = 0
    if r.has("index_head_dim"):  # DeepSeek-V3.2's lightning indexer (modeling_deepseek_v32.py Indexer)
        index_dim = r.integer("index_head_dim", lo=1, hi=4096)
        index_heads = r.integer("index_n_heads", lo=1, hi=MAX_HEADS)
        g.linear("self_attn.indexer.wq_b", "attention", index_heads * index_dim, q_lora or d.h)
        g.linear("self_attn.indexer.wk", "attention", index_dim, d.h)
        g.vector("self_attn.indexer.k_norm", "norm", 2 * index_dim)  # LayerNorm: weight and bias
        g.linear("self_attn.indexer.weights_proj", "attention", index_heads, d.h)
    index_heads = r.integer("index_n_heads", lo=1, hi=MAX_HEADS) if index_dim else 0
    index_topk = (
        r.integer("index_topk", 2048, lo=1, hi=MAX_POSITIONS) if index_dim else 0
    )  # configuration_deepseek_v32.py
    return Mixer(
        "mla",
        d.heads,
        1,
        qk,
        v,
        latent_dim=latent,
        rope_dim=rope,
        index_dim=index_dim,
        q_rank=q_lora,
        index_heads=index_heads,
        index_topk=index_topk,
    )


def _gated_delta_net(g: _Groups, r: Reader, d: _Dims, split_proj: bool = False) -> Mixer:
    """Gated DeltaNet (modeling_qwen3_next.py Qwen3NextGatedDeltaNet; Qwen3.5 splits in_proj the same widths)."""
    nv = r.integer("linear_num_value_heads", lo=1, hi=MAX_HEADS)
    nk = r.integer("linear_num_key_heads", lo=1, hi=MAX_HEADS)
    dk = r.integer("linear_key_head_dim", lo=1, hi=4096)
    dv = r.integer("linear_value_head_dim", lo=1, hi=4096)
    kernel = r.integer("linear_conv_kernel_dim", 4, lo=1, hi=MAX_STATE)
    key, value = nk * dk, nv * dv
    conv = 2 * key + value
    if split_proj:  # modeling_qwen3_5.py Qwen3_5GatedDeltaNet: in_proj_qkv, in_proj_z, in_proj_b, in_proj_a
        g.linear("linear_attn.in_proj_qkv", "attention", 2 * key + value, d.h)
        g.linear("linear_attn.in_proj_z", "attention", value, d.h)
        g.linear("linear_attn.in_proj_b", "attention", nv, d.h)
        g.linear("linear_attn.in_proj_a", "attention", nv, d.h)
    else:
        g.linear("linear_attn.in_proj_qkvz", "attention", 2 * key + 2 * value, d.h)
        g.linear("linear_attn.in_proj_ba", "attention", 2 * nv, d.h)
    g.add("linear_attn.conv1d", "attention", (conv, 1, kernel), linear=False)
    g.vector("linear_attn.dt_bias", "attention", nv)
    g.vector("linear_attn.A_log", "attention", nv)
    g.vector("linear_attn.norm", "norm", dv)
    g.linear("linear_attn.out_proj", "attention", d.h, value)
    # state (vllm mamba_utils.py gated_delta_net_state_shape): conv (kernel − 1) × conv dim, temporal nv × dk × dv
    return Mixer(
        "linear",
        nv,
        nk,
        dk,
        dv,
        conv_state=(kernel - 1) * conv,
        recurrent_state=nv * dk * dv,
        variant="gated_delta",
        chunk=64,  # torch_chunk_gated_delta_rule's chunk_size (modeling_qwen3_next.py:377)
        kernel=kernel,
        split_proj=split_proj,  # Qwen3.5's in_proj_qkv / z / b / a (the activation model's copies differ)
    )


def _kimi_delta(g: _Groups, r: Reader, d: _Dims) -> Mixer:
    """Kimi Delta Attention (modeling_kimi_linear.py KimiDeltaAttention), from `linear_attn_config`."""
    sub = r.cfg.get("linear_attn_config")
    if sub is not None:  # the checkpoint's sub-dict (configuration_kimi_linear.py reads it into linear_*)
        if not isinstance(sub, Mapping):
            raise ConfigError(f"{r.where} 'linear_attn_config' must be an object")
        lr = Reader(sub, f"{r.where}.linear_attn_config")
        heads = lr.integer("num_heads", lo=1, hi=MAX_HEADS)
        hd = lr.integer("head_dim", lo=1, hi=4096)
        kernel = lr.integer("short_conv_kernel_size", 4, lo=1, hi=MAX_STATE)
    else:
        heads = r.integer("linear_num_heads", lo=1, hi=MAX_HEADS)
        hd = r.integer("linear_head_dim", lo=1, hi=4096)
        kernel = r.integer("linear_conv_kernel_dim", 4, lo=1, hi=MAX_STATE)
    width = heads * hd
    for proj in ("q_proj", "k_proj", "v_proj"):
        g.linear(f"self_attn.{proj}", "attention", width, d.h)
    g.add("self_attn.conv1d", "attention", (3 * width, 1, kernel), linear=False)
    g.vector("self_attn.forget_gate.dt_bias", "attention", width)
    g.vector("self_attn.forget_gate.A_log", "attention", heads)
    g.linear("self_attn.forget_gate.f_a_proj", "attention", hd, d.h)
    g.linear("self_attn.forget_gate.f_b_proj", "attention", width, hd)
    g.linear("self_attn.b_proj", "attention", heads, d.h)
    g.linear("self_attn.g_a_proj", "attention", hd, d.h)
    g.linear("self_attn.g_b_proj", "attention", width, hd)
    g.vector("self_attn.o_norm", "norm", hd)
    g.linear("self_attn.o_proj", "attention", d.h, width)
    return Mixer(
        "linear",
        heads,
        heads,
        hd,
        hd,
        conv_state=(kernel - 1) * 3 * width,
        recurrent_state=heads * hd * hd,
        variant="kda",
        chunk=64,  # chunk_kda's chunk_size
        kernel=kernel,
    )


def _key(r: Reader, preferred: str, *alternatives: str) -> str:
    """The family's key for a field, else the first spelling another family uses that the config has."""
    if r.has(preferred):
        return preferred
    return next((key for key in alternatives if r.has(key)), preferred)


def _mamba2(g: _Groups, r: Reader, d: _Dims, rules: LayeredRules) -> Mixer:
    """Mamba2 mixer (modeling_nemotron_h.py / granitemoehybrid / falcon_h1 / bamba `...Mamba2Mixer`)."""
    p = rules.mamba_prefix
    heads = r.integer(_key(r, rules.mamba_heads_key, "mamba_n_heads", "mamba_num_heads"), lo=1, hi=MAX_HEADS)
    head_dim = r.integer(_key(r, rules.mamba_head_dim_key, "mamba_d_head", "mamba_head_dim"), 0, hi=4096)
    state = r.integer(_key(r, rules.mamba_state_key, "mamba_d_state", "ssm_state_size"), lo=1, hi=MAX_STATE)
    groups = r.integer(_key(r, rules.mamba_groups_key, "mamba_n_groups", "n_groups"), 1, lo=1, hi=MAX_HEADS)
    kernel = r.integer(_key(r, rules.mamba_conv_key, "mamba_d_conv", "conv_kernel"), 4, lo=1, hi=MAX_STATE)
    if rules.mamba_inner_key and r.has(rules.mamba_inner_key):
        inner = r.integer(rules.mamba_inner_key, lo=1)
    elif head_dim:
        inner = heads * head_dim
    else:
        inner = r.integer(_key(r, rules.mamba_expand_key, "mamba_expand", "expand"), 2, lo=1, hi=64) * d.h
    bias = r.flag(rules.mamba_bias_key, False)
    conv_bias = r.flag("use_conv_bias", True)
    conv = inner + 2 * groups * state
    g.linear(f"{p}.in_proj", "attention", 2 * inner + 2 * groups * state + heads, d.h, bias)
    g.add(f"{p}.conv1d", "attention", (conv, 1, kernel), linear=False)
    if conv_bias:
        g.vector(f"{p}.conv1d.bias", "attention", conv)
    for vec in ("dt_bias", "A_log", "D"):
        g.vector(f"{p}.{vec}", "attention", heads)
    gated_norm = r.flag("mamba_rms_norm", rules.mamba_norm)
    if gated_norm:
        g.vector(f"{p}.norm", "norm", inner)
    g.linear(f"{p}.out_proj", "attention", d.h, inner, bias)
    # vllm mamba_utils.py mamba2_state_shape: conv (kernel − 1) × (inner + 2·groups·state), ssm heads × hd × state
    chunk_key = _key(r, rules.mamba_chunk_key, "mamba_chunk_size", "chunk_size")
    chunk = r.integer(chunk_key, rules.mamba_chunk_default, lo=1, hi=MAX_POSITIONS)
    return Mixer(
        "mamba",
        heads,
        0,
        inner // heads,
        conv_state=(kernel - 1) * conv,
        recurrent_state=heads * (inner // heads) * state,
        variant="mamba2",
        inner=inner,
        state_dim=state,
        groups=groups,
        chunk=chunk,
        kernel=kernel,
        gated_norm=gated_norm,
        multipliers=rules.parallel_mamba,  # modeling_falcon_h1.py FalconH1Mixer: ssm_in_multiplier, mup_vector
    )


def _mamba1(g: _Groups, r: Reader, d: _Dims) -> Mixer:
    """Mamba1 mixer with Jamba's inner norms (modeling_jamba.py JambaMambaMixer)."""
    state = r.integer("mamba_d_state", 16, lo=1, hi=MAX_STATE)
    kernel = r.integer("mamba_d_conv", 4, lo=1, hi=MAX_STATE)
    inner = r.integer("mamba_expand", 2, lo=1, hi=64) * d.h
    dt_rank = r.integer("mamba_dt_rank", -(-d.h // 16), lo=1) if r.cfg.get("mamba_dt_rank") != "auto" else -(-d.h // 16)
    bias = r.flag("mamba_proj_bias", False)
    g.linear("mamba.in_proj", "attention", 2 * inner, d.h, bias)
    g.add("mamba.conv1d", "attention", (inner, 1, kernel), linear=False)
    if r.flag("mamba_conv_bias", True):
        g.vector("mamba.conv1d.bias", "attention", inner)
    g.linear("mamba.x_proj", "attention", dt_rank + 2 * state, inner)
    g.linear("mamba.dt_proj", "attention", inner, dt_rank, True)
    g.add("mamba.A_log", "attention", (inner, state), linear=False)
    g.vector("mamba.D", "attention", inner)
    g.linear("mamba.out_proj", "attention", d.h, inner, bias)
    g.vector("mamba.dt_layernorm", "norm", dt_rank)
    g.vector("mamba.b_layernorm", "norm", state)
    g.vector("mamba.c_layernorm", "norm", state)
    # vllm mamba_utils.py mamba1_state_shape: conv (kernel − 1) × inner, ssm inner × state
    return Mixer(
        "mamba",
        conv_state=(kernel - 1) * inner,
        recurrent_state=inner * state,
        variant="mamba1",
        inner=inner,
        state_dim=state,
        kernel=kernel,
        rank=dt_rank,
    )


def _gated(r: Reader, rules: LayeredRules) -> bool:
    """Gate/up/down, unless the family says otherwise or the MLP's activation is relu² (Nemotron's squared ReLU is
    never gated: modeling_nemotron_h.py NemotronHMLP up → relu² → down)."""
    act = r.cfg.get("mlp_hidden_act") or r.cfg.get("hidden_act")
    return rules.gated_mlp and act != "relu2"


def _dense_mlp(g: _Groups, r: Reader, d: _Dims, rules: LayeredRules, width: int, prefix: str) -> Mlp:
    bias = r.flag("mlp_bias", False)
    if _gated(r, rules):
        g.linear(f"{prefix}.gate_proj", "mlp", width, d.h, bias)
    g.linear(f"{prefix}.up_proj", "mlp", width, d.h, bias)
    g.linear(f"{prefix}.down_proj", "mlp", d.h, width, bias)
    return Mlp("dense", width)


def _moe(g: _Groups, r: Reader, d: _Dims, rules: LayeredRules) -> Mlp:
    experts = r.integer(_experts_key(r, rules), lo=2, hi=MAX_EXPERTS)
    top_k_key = rules.top_k_key or ("num_experts_per_tok" if r.has("num_experts_per_tok") else "num_experts_per_token")
    top_k = r.integer(top_k_key, lo=1, hi=experts)
    width = r.integer(rules.moe_width_key, d.inter, lo=1) if rules.moe_width_key else d.inter
    prefix = rules.mlp_prefix if rules.moe_prefix is None else rules.moe_prefix
    p = prefix + "." if prefix else ""
    g.linear(f"{p}{rules.router_name}", "router", experts, d.h, rules.router_bias)
    if rules.router_scales:  # Gemma4TextRouter.scale and .per_expert_scale (modeling_gemma4.py:1304-1305)
        g.vector(f"{p}router.scale", "router", d.h)
        g.vector(f"{p}router.per_expert_scale", "router", experts)
    matrices = 3 if _gated(r, rules) else 2
    g.add(f"{p}experts", "expert", (matrices * width, d.h), per_layer=experts)
    if rules.expert_bias:
        g.add(f"{p}experts.bias", "expert", ((matrices - 1) * width + d.h,), linear=False, per_layer=experts)
    shared = rules.shared_fixed * width
    if rules.shared_width_key and r.has(rules.shared_width_key):
        shared = r.integer(rules.shared_width_key, lo=0)
    elif rules.shared_count_key and r.has(rules.shared_count_key):
        shared = r.integer(rules.shared_count_key, lo=0, hi=MAX_EXPERTS) * width
    if shared:
        g.add(f"{p}shared_experts", "shared_expert", (matrices * shared, d.h))
        if rules.shared_gate:
            g.linear(f"{p}shared_expert_gate", "router", 1, d.h)
    return Mlp("moe", width, experts, top_k, shared)


def _norms(g: _Groups, d: _Dims, rules: LayeredRules, count: int) -> None:
    for i in range(count):
        g.add(f"norm{i}", "norm", (d.h * (2 if rules.norm_bias else 1),), linear=False)


def _nas_block(g: _Groups, block: Reader, norm: str, linear: str, role: Role, h: int) -> bool:
    """A NAS block's norm and, when it is replaced with a linear layer, that layer; True when the block is real
    (neither `no_op` nor `replace_with_linear`) and its module must be built."""
    if block.flag("no_op", False):
        return False
    g.vector(norm, "norm", h)
    if block.flag("replace_with_linear", False):
        g.linear(linear, role, h, h)
        return False
    return True


def _nas_layers(r: Reader, d: _Dims, rules: LayeredRules) -> list[tuple[Mixer, Mlp, _Groups, Mixer | None]]:
    """Nemotron-NAS (DeciLM `block_configs`): per layer, attention with its own KV-head grouping, a linear
    stand-in or nothing; an FFN of its own width, a linear stand-in or nothing (modeling_decilm.py; the FFN
    width is `_ffn_mult_to_intermediate_size`: the multiple of 256 at or above int(2·mult·h/3))."""
    blocks = r.cfg.get("block_configs")
    if not isinstance(blocks, list) or len(blocks) < d.layers:
        raise ConfigError(f"{r.where} 'block_configs' must list one block per layer ({d.layers})")
    out: list[tuple[Mixer, Mlp, _Groups, Mixer | None]] = []
    for i, block in enumerate(blocks[: d.layers]):
        if not isinstance(block, Mapping):
            raise ConfigError(f"{r.where} block_configs[{i}] must be an object")
        attn, ffn = block.get("attention") or {}, block.get("ffn") or {}
        if not isinstance(attn, Mapping) or not isinstance(ffn, Mapping):
            raise ConfigError(f"{r.where} block_configs[{i}].attention and .ffn must be objects")
        ar = Reader(attn, f"{r.where}.block_configs[{i}].attention")
        fr = Reader(ffn, f"{r.where}.block_configs[{i}].ffn")
        g = _Groups(i)
        mixer, mlp = Mixer("none"), Mlp("none")
        if _nas_block(g, ar, "input_layernorm", "self_attn.linear_attn", "attention", d.h):
            group = ar.integer("n_heads_in_group", lo=1, hi=d.heads)
            if d.heads % group:
                raise ConfigError(f"{ar.where} n_heads_in_group ({group}) must divide the heads ({d.heads})")
            sub = _Dims(**{**d.__dict__, "kv_heads": d.heads // group})
            mixer = _attention(g, r, sub, rules, "full")
        if _nas_block(g, fr, "post_attention_layernorm", "mlp.linear_mlp", "mlp", d.h):
            mult = fr.number("ffn_mult", 0.0, lo=0.0, hi=64.0)
            if mult <= 0:
                raise ConfigError(f"{fr.where} 'ffn_mult' must be a positive number")
            width = -(-int(2 * mult * d.h / 3) // 256) * 256
            mlp = _dense_mlp(g, r, d, rules, width, "mlp")
        out.append((mixer, mlp, g, None))
    return out


def _per_layer_config(r: Reader, d: _Dims) -> dict[int, dict[str, int]] | None:
    """`per_layer_config` (transformers' HeterogeneousConfigMixin, configuration_utils.py:496-511): per-layer
    head_dim / num_key_value_heads overrides keyed by layer index, as a saved Gemma 4 config carries them."""
    value = r.cfg.get("per_layer_config")
    if value is None:
        return None
    if not isinstance(value, Mapping) or len(value) > d.layers:
        raise ConfigError(f"{r.where} 'per_layer_config' must map at most {d.layers} layer indices to overrides")
    out: dict[int, dict[str, int]] = {}
    for key, over in value.items():
        text = str(key)
        if isinstance(key, bool) or not text.isdigit() or len(text) > 6 or int(text) >= d.layers:
            raise ConfigError(f"{r.where} 'per_layer_config' key {key!r} must be a layer index below {d.layers}")
        if not isinstance(over, Mapping):
            raise ConfigError(f"{r.where} per_layer_config[{text}] must be an object")
        lr = Reader(over, f"{r.where}.per_layer_config[{text}]")
        limits = {"head_dim": 4096, "num_key_value_heads": MAX_HEADS}
        out[int(text)] = {k: lr.integer(k, lo=1, hi=hi) for k, hi in limits.items() if lr.has(k)}
    return out


def _attention_geometry(
    r: Reader, d: _Dims, rules: LayeredRules, kinds: Sequence[MixerKind]
) -> list[tuple[_Dims, bool, bool]]:
    """Per layer: the attention's dims, whether it has a v_proj, whether it owns its K/V. One geometry for every
    layer unless the family's full-attention layers differ (Gemma 4, configuration_gemma4.py:208-221 and
    Gemma4TextAttention, modeling_gemma4.py:1150-1188) or its last layers share K/V (configuration_gemma4.py:225-251
    kv_sharing_modes)."""
    n = d.layers
    first_shared = n - (r.integer(rules.kv_shared_key, 0, hi=n) if rules.kv_shared_key else 0)
    if 0 < first_shared < n and set(kinds[:first_shared]) != set(kinds):
        raise ConfigError(f"{r.where} '{rules.kv_shared_key}': each layer type sharing K/V needs an earlier one")
    if not rules.global_attention:
        return [(d, True, i < first_shared) for i in range(n)]
    k_eq_v = r.flag("attention_k_eq_v", False)
    # use_bidirectional_attention "all" halves the window (configuration_gemma4.py:184-186)
    window = d.window // 2 + 1 if r.cfg.get("use_bidirectional_attention") == "all" else d.window
    overrides = _per_layer_config(r, d)
    if overrides is None:
        full = {"head_dim": r.integer("global_head_dim", lo=1, hi=4096)}
        if k_eq_v and r.has("num_global_key_value_heads"):
            full["num_key_value_heads"] = r.integer("num_global_key_value_heads", lo=1, hi=MAX_HEADS)
        overrides = {i: full for i, kind in enumerate(kinds) if kind == "full"}
    out = []
    for i, kind in enumerate(kinds):
        head_dim = overrides.get(i, {}).get("head_dim", d.head_dim)
        kv = overrides.get(i, {}).get("num_key_value_heads", d.kv_heads)
        if d.heads % kv:
            raise ConfigError(f"{r.where} layer {i}: {kv} KV heads must divide num_attention_heads ({d.heads})")
        sub = replace(d, head_dim=head_dim, v_head_dim=head_dim, kv_heads=kv, window=window)
        # keys serve as values on the layers that do not slide (use_alternative_attention, modeling_gemma4.py:1154)
        out.append((sub, not (k_eq_v and kind != "sliding"), i < first_shared))
    return out


def _mlp_and_moe(g: _Groups, r: Reader, d: _Dims, rules: LayeredRules, shares_kv: bool) -> Mlp:
    """Gemma 4: a dense MLP in every layer (twice as wide on a K/V-sharing layer under use_double_wide_mlp,
    modeling_gemma4.py:1051-1062) and, with the flag, an MoE beside it on the layer's residual (:1391-1403): the
    dense MLP is then the MoE layer's always-active shared part."""
    width = d.inter * (2 if shares_kv and r.flag("use_double_wide_mlp", False) else 1)
    dense = _dense_mlp(g, r, d, rules, width, rules.mlp_prefix)
    if not r.flag(rules.moe_beside_key, False):
        return dense
    return replace(_moe(g, r, d, rules), shared_intermediate=width)


def _per_layer_input(g: _Groups, r: Reader, d: _Dims, rules: LayeredRules) -> None:
    """Per-layer embeddings' gate, projection and norm in each layer (modeling_gemma4.py:1346-1350)."""
    width = r.integer(rules.per_layer_input_key, 0) if rules.per_layer_input_key else 0
    if width:
        g.linear("per_layer_input_gate", "other", width, d.h)
        g.linear("per_layer_projection", "other", d.h, width)
        g.vector("post_per_layer_input_norm", "norm", d.h)


def _layers(r: Reader, d: _Dims, rules: LayeredRules) -> list[tuple[Mixer, Mlp, _Groups, Mixer | None]]:
    if rules.block_configs or r.has("block_configs"):
        return _nas_layers(r, d, rules)
    kinds = _mixer_kinds(r, d, rules)
    moe = _moe_layers(r, d.layers, kinds, rules)
    geometry = _attention_geometry(r, d, rules, kinds)
    blocks = r.str_list("layers_block_type", d.layers) or r.cfg.get("hybrid_override_pattern")
    mla = r.has("kv_lora_rank")
    cross = set(r.int_list("cross_attention_layers", hi=MAX_LAYERS) or [])
    # a pattern that names MLP and MoE blocks (hybrid_override_pattern "-"/"E", layers_block_type "mlp"/"moe") makes
    # every layer one block
    one_block = rules.one_block_per_layer or (blocks is not None and any(b in ("-", "E", "mlp", "moe") for b in blocks))
    out = []
    for i, kind in enumerate(kinds):
        g = _Groups(i)
        block = blocks[i] if blocks is not None else ""
        mixer, side = Mixer("none"), None
        if i in cross:
            mixer = _cross_attention(g, r, d)
        elif rules.parallel_mamba:  # Falcon-H1: attention and Mamba2 side by side in every layer
            mixer = _attention(g, r, d, rules, kind)
            side = _mamba2(g, r, d, rules)
        elif kind == "linear":
            kda = rules.kimi_delta or isinstance(r.cfg.get("linear_attn_config"), Mapping)
            mixer = _kimi_delta(g, r, d) if kda else _gated_delta_net(g, r, d, rules.gdn_split_proj)
        elif kind == "mamba":
            mamba1 = rules.mamba_version == 1 or r.has("mamba_dt_rank")
            mixer = _mamba1(g, r, d) if mamba1 else _mamba2(g, r, d, rules)
        elif kind in ("full", "sliding", "chunked"):
            sub, values, owns_kv = geometry[i]
            mixer = _mla(g, r, d) if mla else _attention(g, r, sub, rules, kind, values=values, owns_kv=owns_kv)
        if one_block:  # nemotron_h: a layer is a mixer, an MLP or an MoE
            mlp = Mlp("none")
            if block in ("moe", "E"):
                mlp = _moe(g, r, d, rules)
            elif block in ("mlp", "-"):
                mlp = _dense_mlp(g, r, d, rules, d.inter, rules.mlp_prefix)
            _norms(g, d, rules, 1)
        elif rules.moe_beside_key:
            mlp = _mlp_and_moe(g, r, d, rules, not geometry[i][2])
            _norms(g, d, rules, rules.norms_per_layer + (rules.moe_norms if mlp.kind == "moe" else 0))
        else:
            dense_width = r.integer(rules.dense_width_key, d.inter, lo=1) if rules.dense_width_key else d.inter
            mlp = _moe(g, r, d, rules) if moe[i] else _dense_mlp(g, r, d, rules, dense_width, rules.mlp_prefix)
            _norms(g, d, rules, rules.norms_per_layer)
        _per_layer_input(g, r, d, rules)
        out.append((mixer, mlp, g, side))
    return out


def build_layered(cfg: Mapping[str, Any], model_type: str, reported_type: str) -> ModelSpec:
    """A ModelSpec with layer runs for a config of `model_type` (a key of LAYERED_RULES, or "generic")."""
    rules = LAYERED_RULES.get(model_type, LAYERED_RULES["generic"])
    r = Reader({**dict(rules.defaults), **{k: v for k, v in cfg.items() if v is not None}})
    d = _dims(r, rules)
    layers = _layers(r, d, rules)
    top = _Groups(None)
    top.add("embed_tokens", "embedding", (d.vocab + rules.extra_embed_rows, d.h), linear=False)
    top.add("norm", "norm", (d.h * (2 if rules.norm_bias else 1),), linear=False)
    tied = r.flag("tie_word_embeddings", rules.tie_word_embeddings)
    if not tied:
        top.items.append(WeightGroup("lm_head", "lm_head", (d.vocab, d.h)))
    if r.flag("lm_head_bias", False):
        top.items.append(WeightGroup("lm_head.bias", "lm_head", (d.vocab,), linear=False))
    width = r.integer(rules.per_layer_input_key, 0) if rules.per_layer_input_key else 0
    if width:  # Gemma4TextModel's per-layer embeddings (modeling_gemma4.py:1565-1580): a table packing every layer
        vocab = r.integer("vocab_size_per_layer_input", lo=1, hi=MAX_VOCAB)
        top.add("embed_tokens_per_layer", "embedding", (vocab, d.layers * width), linear=False)
        top.linear("per_layer_model_projection", "other", d.layers * width, d.h)
        top.vector("per_layer_projection_norm", "norm", width)
    runs = compress([(mixer, mlp, g.elements, side) for mixer, mlp, g, side in layers])
    groups = tuple(top.items) + tuple(item for _, _, g, _ in layers for item in g.items)
    embedding = sum(g.elements for g in top.items if g.role == "embedding")
    lm_head = sum(g.elements for g in top.items if g.role == "lm_head")
    final = sum(g.elements for g in top.items if g.name == "model.norm")
    extra = sum(g.elements for g in top.items) - embedding - lm_head - final  # PLE projection and its norm
    spec = _spec(r, d, rules, runs, groups, reported_type, tied)
    draft = r.integer("num_nextn_predict_layers", 0, lo=0, hi=MAX_LAYERS)
    return replace(spec, top_params=(embedding, lm_head, final), extra_params=extra, draft_layers=draft)


def _spec(
    r: Reader,
    d: _Dims,
    rules: LayeredRules,
    runs: tuple[LayerRun, ...],
    groups: tuple[WeightGroup, ...],
    reported_type: str,
    tied: bool,
) -> ModelSpec:
    """The flat fields describe the most common attention and MLP (what the activation model reads)."""
    attn = [run for run in runs if run.mixer.kind in ("full", "sliding", "chunked", "mla")]
    main = max(attn, key=lambda run: run.count).mixer if attn else Mixer("full", d.heads, d.kv_heads, d.head_dim)
    moe_runs = [run for run in runs if run.mlp.kind == "moe"]
    dense_runs = [run for run in runs if run.mlp.kind == "dense"]
    moe = moe_runs[0].mlp if moe_runs else None
    sliding = sum(run.count for run in runs if run.mixer.kind in ("sliding", "chunked"))
    windows = [run.mixer.window for run in runs if run.mixer.kind in ("sliding", "chunked")]
    qk_norm = rules.qk_norm or ("head" if r.flag("use_qk_norm", False) and rules.qk_norm_weights else None)
    return ModelSpec(
        model_type=reported_type,
        num_layers=d.layers,
        hidden_size=d.h,
        num_attention_heads=main.heads or d.heads,
        num_kv_heads=main.kv_heads or d.kv_heads,
        head_dim=main.head_dim or d.head_dim,
        intermediate_size=(dense_runs[0].mlp.intermediate if dense_runs else (moe.intermediate if moe else d.inter))
        or 1,
        vocab_size=d.vocab,
        tie_word_embeddings=tied,
        mlp="gated" if rules.gated_mlp else "standard",
        activation=str(r.cfg.get("hidden_act") or r.cfg.get("hidden_activation") or "silu"),
        norm="layer" if rules.norm_bias else "rms",
        norms_per_layer=rules.norms_per_layer,
        # Gemma4ForCausalLM.forward (modeling_gemma4.py:1920): logits / cap → tanh → · cap when the config sets one
        final_logit_softcapping=bool(r.number("final_logit_softcapping", 0.0, hi=1e6)),
        num_experts=moe.experts if moe else 1,
        experts_per_token=moe.experts_per_token if moe else 1,
        moe_intermediate_size=moe.intermediate if moe else 0,
        shared_expert_intermediate_size=moe.shared_intermediate if moe else 0,
        num_dense_layers=d.layers - sum(run.count for run in moe_runs) if moe else 0,
        sliding_window=max(windows, default=0),
        num_sliding_layers=sliding,
        max_position_embeddings=r.integer("max_position_embeddings", 0, hi=MAX_POSITIONS),
        layer_runs=runs,
        weight_groups=groups,
        layer_model=rules.name,
        qk_norm=qk_norm is not None,
        qk_norm_full=qk_norm == "full",
        **dict.fromkeys(rules.features, True),  # type: ignore[arg-type]
        # the attention layers' `attention_dropout` (their modeling files pass it to the attention call in
        # training); recurrent layers apply none
        attention_dropout=r.number("attention_dropout", 0.0),
        dropout_read=(
            f"attention_dropout {r.number('attention_dropout', 0.0):g} (attention probabilities;"
            f" {'config' if r.has('attention_dropout') else 'default 0'}); other dropouts not read"
        ),
    )
