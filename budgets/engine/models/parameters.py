"""Exact parameter counts of a `ModelSpec`: `parameter_count(spec)` equals
`sum(p.numel() for p in model.parameters())` of the transformers model built on the meta device (tied
tensors counted once; rotary `inv_freq`, causal-mask and `embed_scale` buffers are buffers, not parameters).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from .spec import ModelSpec
from .weight_groups import WeightGroup


@dataclass(frozen=True, slots=True)
class ParameterCount:
    """Exact parameter counts (number of elements)."""

    total: int
    embedding: int  # input token table (+ learned positions, + opt projections)
    lm_head: int  # 0 when tied to the input embedding
    final_norm: int

    @property
    def layers_total(self) -> int:
        return self.total - self.embedding - self.lm_head - self.final_norm


def _norm_params(spec: ModelSpec, size: int) -> int:
    return size * (2 if spec.norm == "layer" else 1)


def idle_parameters(spec: ModelSpec, start: int, stop: int, with_towers: bool) -> int:
    """Parameters a text-only step never gives a gradient: the vision/audio towers and their projector (with
    `with_towers`, on the stage that holds them), the cross-attention layers in [start, stop), which
    `MllamaTextModel.forward` skips without image states (modeling_mllama.py), and V3.2's no-grad indexer. torch's
    optimizers skip a parameter whose `.grad` is None (`if p.grad is not None` in every `_init_group`), so none of
    them has optimizer state either."""
    idle = spec.tower_params if with_towers else 0
    at = 0
    for run in spec.layer_runs:
        lo, hi = max(at, start), min(at + run.count, stop)
        if hi > lo and run.mixer.kind == "cross":
            idle += (hi - lo) * run.params
        at += run.count
    # DeepSeek-V3.2's lightning indexer runs under @torch.no_grad() (modeling_deepseek_v32.py DeepseekV32Indexer):
    # its weights never get a gradient in transformers' training forward
    for g in spec.weight_groups:
        if ".indexer." in g.name:
            idle += math.prod(g.shape) * g.per_layer * sum(1 for layer in g.layers if start <= layer < stop)
    return idle


@lru_cache(maxsize=4096)
def mixer_parameters(spec: ModelSpec, layer: int) -> int:
    """Parameters of layer `layer`'s token mixer and norms (its attention, latent or recurrent mixer; not its MLP)."""
    return sum(
        math.prod(g.shape) * g.per_layer
        for g in weight_groups(spec)
        if g.role in ("attention", "norm") and layer in g.layers
    )


@lru_cache(maxsize=4096)
def mlp_parameters(spec: ModelSpec, layer: int) -> tuple[int, int]:
    """(all, output projections) of layer `layer`'s MLP parameters: its dense projections, experts, shared expert and
    router; the output projections (dense `down_proj`, every expert's and the shared expert's) are the ones whose
    weight gradient the MLP's first backward node computes. (0, 0) for a layer without an MLP."""
    run = spec.run_at(layer)
    mlp = run.mlp if run is not None else None
    if mlp is None or mlp.kind == "none":
        return 0, 0
    total = sum(
        math.prod(g.shape) * g.per_layer
        for g in weight_groups(spec)
        if g.role in ("mlp", "expert", "shared_expert", "router") and layer in g.layers
    )
    experts = mlp.experts if mlp.kind == "moe" else 1
    output = spec.hidden_size * (mlp.intermediate * experts + mlp.shared_intermediate)
    return total, min(output, total)


@lru_cache(maxsize=4096)
def layers_parameters(spec: ModelSpec, start: int, stop: int) -> int:
    """Parameters of the token mixers, norms and MLPs of layers [start, stop): what their gradients need (a flat
    spec's biases and norms outside the weight groups' layers are left out: a few elements a layer)."""
    return sum(mixer_parameters(spec, layer) + mlp_parameters(spec, layer)[0] for layer in range(start, stop))


@lru_cache(maxsize=1024)
def parameter_count(spec: ModelSpec) -> ParameterCount:
    """Exact number of parameters, with a breakdown by part."""
    if spec.counts_by_runs:
        embedding, lm_head, final = spec.top_params
        layers = sum(run.count * run.params for run in spec.layer_runs)
        total = embedding + lm_head + final + layers + spec.tower_params + spec.extra_params
        return ParameterCount(total=total, embedding=embedding, lm_head=lm_head, final_norm=final)
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
    if spec.is_moe:
        moe = h * spec.num_experts + spec.num_experts * mlp_params(spec.expert_intermediate_size)
        if spec.shared_expert_intermediate_size:
            moe += mlp_params(spec.shared_expert_intermediate_size) + h  # shared expert + its gate
    norms = spec.norms_per_layer * _norm_params(spec, h)
    final = _norm_params(spec, h) if spec.final_norm else 0

    layers = spec.num_layers * (attention + norms)
    layers += spec.num_moe_layers * moe + (spec.num_layers - spec.num_moe_layers) * dense
    total = embedding + lm_head + layers + final + spec.tower_params + spec.extra_params
    return ParameterCount(total=total, embedding=embedding, lm_head=lm_head, final_norm=final)


@lru_cache(maxsize=256)
def weight_groups(spec: ModelSpec) -> tuple[WeightGroup, ...]:
    """The checkpoint's tensors by kind: the layered reader's own, or for a flat spec its projections in the
    Llama-style names quantization configs use, with the remaining parameters (norms, biases, positions) as one
    unquantizable group, so the elements always add up to `parameter_count`; multimodal towers are one unquantized
    group (vLLM's quantization methods leave vision towers out, e.g. modelopt.py:194-198)."""
    towers = (
        (WeightGroup("model.vision_tower", "vision", (spec.tower_params,), linear=False),) if spec.tower_params else ()
    )
    if spec.weight_groups:
        return spec.weight_groups + towers
    h, layers = spec.hidden_size, tuple(range(spec.num_layers))
    pc = parameter_count(spec)
    groups = [WeightGroup("model.embed_tokens", "embedding", (pc.embedding,), linear=False)]
    if pc.lm_head:
        groups.append(WeightGroup("lm_head", "lm_head", (spec.vocab_size, spec.embed_dim)))
    attn = "model.layers.{layer}.self_attn."
    groups += [
        WeightGroup(attn + "q_proj", "attention", (spec.q_dim, h), layers),
        WeightGroup(attn + "k_proj", "attention", (spec.kv_dim, h), layers),
        WeightGroup(attn + "v_proj", "attention", (spec.kv_dim, h), layers),
        WeightGroup(attn + "o_proj", "attention", (h, spec.q_dim), layers),
    ]
    names = ("gate_proj", "up_proj", "down_proj") if spec.mlp == "gated" else ("up_proj", "down_proj")
    dense = tuple(range(spec.num_layers - spec.num_moe_layers))
    for name in names:
        shape = (h, spec.intermediate_size) if name == "down_proj" else (spec.intermediate_size, h)
        if dense:
            groups.append(WeightGroup(f"model.layers.{{layer}}.mlp.{name}", "mlp", shape, dense))
    if spec.is_moe:
        moe = tuple(range(spec.num_layers - spec.num_moe_layers, spec.num_layers))
        width = spec.expert_intermediate_size
        groups.append(WeightGroup("model.layers.{layer}.mlp.gate", "router", (spec.num_experts, h), moe))
        groups.append(
            WeightGroup(
                "model.layers.{layer}.mlp.experts", "expert", (spec.mlp_matrices * width, h), moe, spec.num_experts
            )
        )
        if spec.shared_expert_intermediate_size:
            shared = (spec.mlp_matrices * spec.shared_expert_intermediate_size, h)
            groups.append(WeightGroup("model.layers.{layer}.mlp.shared_expert", "shared_expert", shared, moe))
    rest = pc.total - spec.tower_params - sum(g.elements for g in groups)
    if rest:
        groups.append(WeightGroup("model.other", "other", (rest,), linear=False))
    return tuple(groups) + towers
