"""What one pipeline stage holds in each phase, and the helpers its inference and training budgets share.

A stage budget (`StagePhases`) lists, per phase, the components alive together at that phase's peak;
`estimate.py` takes the largest phase, so a component never adds to itself across phases.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import parallel
from .budget import Range, ServingPlan
from .components import activations as act
from .models.spec import ModelSpec

# Uncertainty bands of modelled (not exact) terms: (low factor, high factor)
ACTIVATION_BAND_CPU = (0.9, 1.15)
ACTIVATION_BAND_CUDA = (0.8, 1.3)


@dataclass
class StagePhases:
    """One device's components per phase, plus what the allocator's fragmentation depends on."""

    name: str
    phases: dict[str, dict[str, Range]] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    fixed: dict[str, Range] = field(default_factory=dict)  # alive in every phase (workspace, runtime)
    transient_for_fragmentation: int = 0
    live_tensors: int = 0
    preallocated: bool = False
    serving: ServingPlan | None = None
    host_bytes: int = 0  # what this stage's process keeps in host RAM instead (offloads, paged states)
    host_note: str = ""  # which, with their bytes


def param_tensors(spec: ModelSpec, layers: int, fused_experts: bool = False) -> int:
    """Parameter tensors on a stage: an upper bound (fused projections count as their parts). `fused_experts`: the
    experts of a layer are two tensors, gate-up and down (vLLM's FusedMoE w13_weight / w2_weight,
    vllm-0.11.0/model_executor/layers/fused_moe/layer.py), not one per expert and matrix."""
    per_layer = 4 + (3 if spec.qkv_bias else 0) + (1 if spec.o_bias else 0) + spec.norms_per_layer
    per_layer *= 2 if spec.norm == "layer" else 1
    per_layer += 2 if spec.qk_norm else 0
    experts = (2 if fused_experts else spec.mlp_matrices * spec.num_experts) if spec.is_moe else spec.mlp_matrices
    per_layer += experts + (1 if spec.is_moe else 0)
    return per_layer * layers + 3


def activation_shape(
    spec: ModelSpec,
    stage: parallel.Stage,
    b: int,
    s: int,
    k: int,
    d: float,
    fp16_cuda: bool = False,
    cuda: bool = False,
) -> act.Shape:
    """The tensor shapes of one layer on this stage: b sequences of s queries attending over k keys."""
    t = stage.tensor
    return act.Shape(
        b=b,
        s=s,
        k=k,
        h=spec.hidden_size,
        q=stage.heads * spec.head_dim,
        kv=stage.kv_heads * spec.head_dim,
        heads=stage.heads,
        inter=math.ceil(spec.intermediate_size / t),
        vocab=math.ceil(spec.vocab_size / t),
        d=d,
        # softmax(dtype=float32) reads fp16 scores directly on CUDA; elsewhere it copies them first
        softmax_copy=not fp16_cuda,
        cuda=cuda,
        tensor=t,
    )


def activation_band(device: str) -> tuple[float, float]:
    """(low, high) factors around modelled activations: the CPU profiler view is tighter than CUDA's."""
    return ACTIVATION_BAND_CPU if device == "cpu" else ACTIVATION_BAND_CUDA
