"""How a parallel plan places the model on the busiest device.

Tensor parallel t splits every matrix (and the vocabulary) t ways and the KV heads as
`max(kv_heads / t, 1)` (replicated once t > kv_heads; Megatron/vLLM). Pipeline parallel p gives each
stage ceil(L/p) layers; the first stage also holds the input embedding and, under the 1F1B schedule,
p micro-batches of activations in flight (Korthikanti et al. §4.2.3); the last stage holds the final
norm, LM head and logits. Data parallel replicates unless ZeRO shards optimizer states (stage ≥ 1),
gradients (≥ 2) and parameters (3) over the data-parallel degree (Rajbhandari et al. §5). Expert parallel e
(serving) places whole routed experts, e/num_experts of them per device, instead of splitting each by the tensor degree
(vLLM's FusedMoE with expert parallelism: ``determine_expert_map`` gives each EP rank num_experts / ep_size experts);
the other weights stay split by the tensor degree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import TypedDict

from .models.layers import heads_per_device
from .models.parameters import ParameterCount, weight_groups
from .models.spec import ModelSpec


@dataclass(frozen=True, slots=True)
class Stage:
    name: str  # "only", "first" or "last"
    layers: int  # decoder layers on this device
    holds_embedding: bool
    holds_head: bool  # final norm + LM head + logits
    in_flight_microbatches: int  # micro-batches whose activations are alive together (1F1B)
    tensor: int
    data: int
    zero_stage: int
    sequence_parallel: bool
    kv_heads: int  # KV heads per device
    heads: int  # attention heads per device
    first_layer: int = 0  # index of the stage's first decoder layer
    expert: int = 1  # devices the routed experts are split over, whole experts each (1: split by the tensor degree)
    context: int = 1  # devices each training sequence is split over (context parallelism)

    @property
    def shards(self) -> int:
        """The devices ZeRO / FSDP shards over: the data-parallel ranks, × the context-parallel ones (torchtitan's
        FSDP mesh is dp_shard × cp)."""
        return self.data * self.context

    @property
    def zero_shards_optimizer(self) -> int:
        return self.shards if self.zero_stage >= 1 else 1

    @property
    def zero_shards_gradients(self) -> int:
        return self.shards if self.zero_stage >= 2 else 1

    @property
    def zero_shards_parameters(self) -> int:
        return self.shards if self.zero_stage >= 3 else 1


class _Shared(TypedDict):
    """The fields every stage of one split shares."""

    tensor: int
    data: int
    zero_stage: int
    sequence_parallel: bool
    kv_heads: int
    heads: int
    context: int


@lru_cache(maxsize=1024)
def stages(
    spec: ModelSpec,
    tensor: int,
    pipeline: int,
    data: int,
    zero_stage: int,
    sequence_parallel: bool,
    expert: int = 1,
    context: int = 1,
) -> tuple[Stage, ...]:
    """The candidate busiest devices: the only stage, or the first and last pipeline stages (cached per split:
    a plan search asks for the same split of one model on every configuration)."""
    layers = math.ceil(spec.num_layers / pipeline)
    common: _Shared = {
        "tensor": tensor,
        "data": data,
        "zero_stage": zero_stage,
        "sequence_parallel": sequence_parallel,
        "kv_heads": heads_per_device(spec.num_kv_heads, tensor),
        "heads": heads_per_device(spec.num_attention_heads, tensor),
        "context": context,
    }
    if pipeline == 1:
        return (Stage("only", spec.num_layers, True, True, 1, **common, expert=expert),)
    last_layers = spec.num_layers - layers * (pipeline - 1)
    return (
        Stage("first", layers, True, False, pipeline, **common),
        Stage(
            "last",
            max(last_layers, 1),
            spec.tie_word_embeddings,
            True,
            1,
            **common,
            first_layer=spec.num_layers - max(last_layers, 1),
        ),
    )


def stage_parameters(
    spec: ModelSpec, pc: ParameterCount, stage: Stage, total_override: int | None
) -> tuple[float, float, float]:
    """(layer params, embedding params, head params) resident on the device before ZeRO-3 sharding.

    Matrices and the vocabulary are split by the tensor degree; norms are replicated (small, counted
    as split: the error is below 0.01 %). A `parameter_count` override scales every part alike.
    """
    per_layer = pc.layers_total / spec.num_layers
    layer_params = per_layer * stage.layers
    if stage.expert > 1:  # whole experts over the expert degree, the rest of the layers over the tensor degree
        experts = routed_expert_parameters(spec) * stage.layers / spec.num_layers
        layer_params = (layer_params - experts) + experts * stage.tensor / stage.expert
    emb = pc.embedding if stage.holds_embedding else 0
    if stage.holds_head:
        head = pc.lm_head + pc.final_norm
        if spec.tie_word_embeddings and not stage.holds_embedding:
            head += spec.vocab_size * spec.embed_dim  # the last stage keeps its own copy of a tied head
    else:
        head = 0
    scale = (total_override / pc.total) if total_override else 1.0
    t = stage.tensor
    return layer_params * scale / t, emb * scale / t, head * scale / t


def routed_expert_parameters(spec: ModelSpec) -> int:
    """Parameters of the routed experts of every MoE layer (the shared experts and the router not counted): the
    checkpoint's ``expert`` weight groups, biases included (``models.parameters.weight_groups``)."""
    return sum(group.elements for group in weight_groups(spec) if group.role == "expert")
