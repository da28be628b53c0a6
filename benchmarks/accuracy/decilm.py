"""A DeciLM (``nemotron-nas``) causal LM built from transformers' own Llama modules, for measuring only.

What it is: the accuracy harness (``measure.py``) builds every case's model with transformers 5.24. The Nemotron-NAS
checkpoints (e.g. nvidia/Llama-3_3-Nemotron-Super-49B-v1, whose config.json is kept in
``tests/engine/data/hf_configs/llama-3.3-nemotron-super-49b-v1.json``) declare ``"architectures":
["DeciLMForCausalLM"]`` with ``auto_map`` to the Hub's remote code ``modeling_decilm.py`` (and
``configuration_decilm.DeciLMConfig``); transformers 5.24 has no class for ``model_type`` ``nemotron-nas``. This module
is a stand-in written for round 16 (HOLDOUT.md) from the public description of that architecture: a Llama decoder whose
layers differ one from another, each described by one entry of the config's ``block_configs``:

- ``attention``: ``no_op`` (no attention and no ``input_layernorm``: the residual stream passes through), or
  ``replace_with_linear`` (``input_layernorm`` then one bias-free ``hidden x hidden`` Linear, ``self_attn.linear_attn``,
  added to the residual), or Llama attention with ``num_attention_heads // n_heads_in_group`` KV heads of its own;
- ``ffn``: ``no_op`` (no MLP and no ``post_attention_layernorm``), or ``replace_with_linear`` (the norm then one
  bias-free ``hidden x hidden`` Linear, ``mlp.linear_mlp``), or a gated Llama MLP whose width is derived from
  ``ffn_mult``: ``int(2 * ffn_mult * hidden / 3)`` rounded up to a multiple of 256 (DeciLM's
  ``_ffn_mult_to_intermediate_size``).

What it mirrors: the module layout of the remote ``modeling_decilm.py`` (``DeciLMDecoderLayer``: a part's norm is built
only when the part is; the module names ``self_attn``, ``mlp``, ``input_layernorm``, ``post_attention_layernorm``,
``linear_attn``, ``linear_mlp``) and vLLM's ``vllm/model_executor/models/nemotron_nas.py`` (the same per-layer Llama
attention and gated MLP with per-layer KV heads and ``ffn_mult`` widths, no-op parts skipped with their norms; vLLM
does not build ``replace_with_linear``, which follows the remote code). Embeddings, the final norm, RoPE, the LM head,
the causal mask and the loss are transformers' Llama ones (``LlamaModel``'s and ``LlamaForCausalLM``'s forwards run
unchanged over these blocks). The code is written here, not copied from either.

What it cannot represent: only what Llama modules express. A block that asks for anything else -- sliding-window or
sink attention (``window_length``, ``num_sink_tokens``, ``unshifted_sink``), ``sparsify``, the Mamba, Llama-4 or MoE
blocks of newer DeciLM variants, a non-gated FFN or a per-block ``hidden_act`` other than the config's, an explicit
per-block ``intermediate_size`` -- is refused (``UnsupportedBlock``), so no case measures something the stand-in
does not build. The KV cache is transformers' ``DynamicCache`` (one cache layer per decoder layer, left empty where the
attention is a no-op or a Linear), not the remote code's ``VariableCache``; the tensors cached per attention layer are
the same (that layer's keys and values, its own KV heads wide). The first block must have attention (as
Nemotron-Super-49B's does): ``generate`` reads the cached length from layer 0.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from huggingface_hub.dataclasses import strict
from torch import nn
from transformers import LlamaConfig
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.models.llama.modeling_llama import (
    LlamaAttention,
    LlamaForCausalLM,
    LlamaMLP,
    LlamaModel,
    LlamaPreTrainedModel,
    LlamaRMSNorm,
    LlamaRotaryEmbedding,
)

# block_configs keys whose only supported value is "off" (None or False): features Llama modules do not express
_ATTENTION_OFF_KEYS: tuple[str, ...] = (
    "num_sink_tokens",
    "sparsify",
    "unshifted_sink",
    "use_prefill_window_in_sink_attention",
    "window_length",
    "llama4",
    "mamba",
    "is_mamba",
    "is_llama4",
    "is_sliding",
)
_FFN_OFF_KEYS = ("sparsify", "moe", "is_moe", "intermediate_size")
_ATTENTION_KEYS = frozenset({"n_heads_in_group", "no_op", "replace_with_linear", *_ATTENTION_OFF_KEYS})
_FFN_KEYS = frozenset({"ffn_mult", "no_op", "replace_with_linear", "hidden_act", "gated", *_FFN_OFF_KEYS})


def ffn_mult_to_intermediate_size(ffn_mult: float, hidden_size: int) -> int:
    """DeciLM's MLP width for `ffn_mult`: int(2 * ffn_mult * hidden / 3), rounded up to a multiple of 256."""
    width = int(2 * ffn_mult * hidden_size / 3)
    return -(-width // 256) * 256


@strict
class DeciLMConfig(LlamaConfig):
    """LlamaConfig plus the per-layer `block_configs`; `intermediate_size` may be None (each block states its own)."""

    model_type = "nemotron-nas"

    intermediate_size: int | None = None  # type: ignore[assignment]
    block_configs: list[dict[str, Any]] | None = None

    def __post_init__(self, **kwargs):
        if self.block_configs is None or len(self.block_configs) != self.num_hidden_layers:
            raise ValueError("nemotron-nas needs one block_configs entry per layer")
        super().__post_init__(**kwargs)
        for index, block in enumerate(self.block_configs):
            check_block(block, index, self)


class UnsupportedBlock(ValueError):
    """A DeciLM block the Llama modules cannot build faithfully: refused, so no case measures something else."""


def check_block(block: dict[str, Any], index: int, config: DeciLMConfig) -> None:
    """Refuse a block the Llama modules cannot build faithfully (see the module docstring)."""
    attention, ffn = block["attention"], block["ffn"]
    unknown = (set(attention) - _ATTENTION_KEYS) | (set(ffn) - _FFN_KEYS) | (set(block) - {"attention", "ffn"})
    if unknown:
        raise UnsupportedBlock(f"block {index}: keys the stand-in does not know: {sorted(unknown)}")
    on = [f"attention.{k}" for k in _ATTENTION_OFF_KEYS if attention.get(k)]
    on += [f"ffn.{k}" for k in _FFN_OFF_KEYS if ffn.get(k)]
    if ffn.get("gated", True) is not True or ffn.get("hidden_act", config.hidden_act) != config.hidden_act:
        on.append("ffn.gated/hidden_act")
    if on:
        raise UnsupportedBlock(f"block {index}: not expressible with Llama modules: {on}")
    if attention.get("no_op") and attention.get("replace_with_linear"):
        raise ValueError(f"block {index}: attention is both no_op and replace_with_linear")
    if ffn.get("no_op") and ffn.get("replace_with_linear"):
        raise ValueError(f"block {index}: ffn is both no_op and replace_with_linear")
    if not (attention.get("no_op") or attention.get("replace_with_linear")):
        group = attention["n_heads_in_group"]
        if config.num_attention_heads % group:
            raise ValueError(f"block {index}: n_heads_in_group {group} does not divide the query heads")
    elif index == 0:
        raise UnsupportedBlock("block 0 without attention: generate reads the cached length from layer 0")
    if not (ffn.get("no_op") or ffn.get("replace_with_linear")) and ffn.get("ffn_mult") is None:
        raise ValueError(f"block {index}: ffn without ffn_mult")


class DeciLMLinear(nn.Module):
    """A `replace_with_linear` block: one bias-free hidden x hidden Linear, under the name the checkpoint gives it
    (`linear_attn` for attention, `linear_mlp` for the FFN)."""

    def __init__(self, config: DeciLMConfig, name: str):
        super().__init__()
        self.weight_name = name
        setattr(self, name, nn.Linear(config.hidden_size, config.hidden_size, bias=False))

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        linear: nn.Module = getattr(self, self.weight_name)
        return linear(hidden_states)


class DeciLMDecoderLayer(GradientCheckpointingLayer):
    """One block of `block_configs`: each part (attention, FFN) absent, a Linear, or the Llama module, with its norm
    only where the part is built."""

    def __init__(self, config: DeciLMConfig, layer_idx: int):
        super().__init__()
        assert config.block_configs is not None
        block = config.block_configs[layer_idx]
        attention, ffn = block["attention"], block["ffn"]
        self.attention_kind = (
            "no_op" if attention.get("no_op") else "linear" if attention.get("replace_with_linear") else "attention"
        )
        self.ffn_kind = "no_op" if ffn.get("no_op") else "linear" if ffn.get("replace_with_linear") else "mlp"
        if self.attention_kind != "no_op":
            self.input_layernorm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        if self.attention_kind == "linear":
            self.self_attn: nn.Module = DeciLMLinear(config, "linear_attn")
        elif self.attention_kind == "attention":
            # LlamaAttention reads its widths from the config when built: a copy with this block's KV heads; then it
            # keeps the model's config, whose `_attn_implementation` it reads at every call
            own = copy.copy(config)
            own.num_key_value_heads = config.num_attention_heads // attention["n_heads_in_group"]
            self.self_attn = LlamaAttention(own, layer_idx)
            self.self_attn.config = config
        if self.ffn_kind != "no_op":
            self.post_attention_layernorm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        if self.ffn_kind == "linear":
            self.mlp: nn.Module = DeciLMLinear(config, "linear_mlp")
        elif self.ffn_kind == "mlp":
            own = copy.copy(config)
            own.intermediate_size = ffn_mult_to_intermediate_size(ffn["ffn_mult"], config.hidden_size)
            self.mlp = LlamaMLP(own)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        cache: Any = None,
        use_cache: bool | None = False,
        position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
        **kwargs: Any,
    ) -> torch.Tensor:
        if self.attention_kind == "attention":
            residual = hidden_states
            hidden_states = self.input_layernorm(hidden_states)
            hidden_states, _ = self.self_attn(
                hidden_states=hidden_states,
                attention_mask=attention_mask,
                position_ids=position_ids,
                cache=cache,
                use_cache=use_cache,
                position_embeddings=position_embeddings,
                **kwargs,
            )
            hidden_states = residual + hidden_states
        elif self.attention_kind == "linear":
            hidden_states = hidden_states + self.self_attn(self.input_layernorm(hidden_states))
        if self.ffn_kind != "no_op":
            hidden_states = hidden_states + self.mlp(self.post_attention_layernorm(hidden_states))
        return hidden_states


class DeciLMPreTrainedModel(LlamaPreTrainedModel):
    config: DeciLMConfig
    _no_split_modules = ["DeciLMDecoderLayer"]
    _can_record_outputs = {"hidden_states": DeciLMDecoderLayer, "attentions": LlamaAttention}


class DeciLMModel(DeciLMPreTrainedModel, LlamaModel):
    """LlamaModel (embeddings, per-layer loop, final norm, RoPE, mask; its forward) over DeciLM blocks."""

    def __init__(self, config: DeciLMConfig):
        DeciLMPreTrainedModel.__init__(self, config)
        self.padding_idx = config.pad_token_id
        self.vocab_size = config.vocab_size
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, self.padding_idx)
        self.layers = nn.ModuleList([DeciLMDecoderLayer(config, i) for i in range(config.num_hidden_layers)])
        self.norm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.rotary_emb = LlamaRotaryEmbedding(config=config)
        self.gradient_checkpointing = False
        self.post_init()


class DeciLMForCausalLM(DeciLMPreTrainedModel, LlamaForCausalLM):
    """LlamaForCausalLM (LM head, loss, generate) over `DeciLMModel`."""

    def __init__(self, config: DeciLMConfig):
        DeciLMPreTrainedModel.__init__(self, config)
        self.model = DeciLMModel(config)
        self.vocab_size = config.vocab_size
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()


def decilm_config(fields: dict[str, Any]) -> DeciLMConfig:
    """The stand-in's config from a nemotron-nas config.json's fields (without `model_type`)."""
    return DeciLMConfig(**fields)
