"""One flat view per kind of layer, for the activation model.

The activation model (`activations.py`) reads a layer through the flat `ModelSpec` fields (heads, head size, MLP
width, experts). A model whose layers differ (`ModelSpec.layer_runs`: a dense first layer before MoE layers,
Mamba or linear-attention layers between attention layers, per-layer head sizes, Nemotron-H's one block per
layer) is budgeted layer kind by layer kind: each view is the model's spec with the flat fields of one kind of
layer and that layer as its only run, so the operators of a Mamba layer are never priced as attention, nor a dense
MLP as the MoE beside it. Layers that differ only in how far they attend (full, sliding, chunked) share a view:
the window acts through the masks and the cache, which the model-level terms and the KV component price.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

from ..models.layers import LayerRun, Mixer, Mlp, heads_per_device
from ..models.spec import ModelSpec

# mixer kinds priced by the attention operators of `activations.py` (q/k/v projections, SDPA or eager, o_proj)
ATTENTION_KINDS = frozenset({"full", "sliding", "chunked"})


@dataclass(frozen=True, slots=True)
class View:
    spec: ModelSpec  # the flat fields of this kind of layer; `spec.runs` is its one run
    count: int  # layers of this kind in the range asked for
    first: int  # the first layer of this kind in the range
    last: int  # one past the last layer of this kind in the range

    @property
    def mixer(self) -> Mixer:
        return self.spec.runs[0].mixer

    @property
    def side(self) -> Mixer | None:
        return self.spec.runs[0].side

    @property
    def mlp(self) -> Mlp:
        return self.spec.runs[0].mlp


def _key(run: LayerRun) -> tuple[Mixer, Mlp, Mixer | None]:
    mixer = run.mixer
    if mixer.kind in ATTENTION_KINDS:
        mixer = replace(mixer, kind="full", window=0)
    return mixer, run.mlp, run.side


@lru_cache(maxsize=4096)
def views(spec: ModelSpec, start: int, stop: int) -> tuple[View, ...]:
    """The kinds of layer in [start, stop) with their counts; a model without layer runs is one view, itself."""
    if not spec.layer_runs:
        return (View(spec, stop - start, start, stop),)
    found: dict[tuple[Mixer, Mlp, Mixer | None], tuple[int, int, int]] = {}  # count, first, last
    at = 0
    for run in spec.layer_runs:
        lo, hi = max(at, start), min(at + run.count, stop)
        if hi > lo:
            key = _key(run)
            count, first, _ = found.get(key, (0, lo, hi))
            found[key] = (count + hi - lo, first, hi)
        at += run.count
    return tuple(View(_view_spec(spec, *key), *where) for key, where in found.items())


def _view_spec(spec: ModelSpec, mixer: Mixer, mlp: Mlp, side: Mixer | None) -> ModelSpec:
    fields: dict[str, object] = {"layer_runs": (LayerRun(spec.num_layers, mixer, mlp, 0, side),)}
    if mixer.kind in ATTENTION_KINDS or mixer.kind in ("mla", "cross"):
        fields.update(num_attention_heads=mixer.heads, num_kv_heads=mixer.kv_heads, head_dim=mixer.head_dim)
    if mlp.kind == "moe":
        fields.update(
            num_experts=mlp.experts,
            experts_per_token=mlp.experts_per_token,
            moe_intermediate_size=mlp.intermediate,
            shared_expert_intermediate_size=mlp.shared_intermediate,
            num_dense_layers=0,
        )
    else:
        fields.update(
            intermediate_size=mlp.intermediate,
            num_experts=1,
            experts_per_token=1,
            moe_intermediate_size=0,
            shared_expert_intermediate_size=0,
            num_dense_layers=0,
        )
    return replace(spec, **fields)  # type: ignore[arg-type]


@lru_cache(maxsize=4096)
def view_widths(spec: ModelSpec, tensor: int) -> tuple[int, int, int, int]:
    """(q, kv, heads, MLP width) of a view's layer on one device under tensor degree `tensor`: the `Shape` widths."""
    heads = heads_per_device(spec.num_attention_heads, tensor)
    kv = heads_per_device(spec.num_kv_heads, tensor) * spec.head_dim
    return heads * spec.head_dim, kv, heads, math.ceil(spec.intermediate_size / tensor)
