"""Weight groups: the tensors of a checkpoint by kind, as the HF adapter reads them from a config.

A group is `per_layer` tensors of one shape in each layer of `layers` (model-level tensors: `layers == ()`).
Parameter counts are the sum of their elements; quantized weight bytes (`quantization.py`) are priced per
group, since a quantization config names modules (`lm_head`, `re:.*mlp.gate$`, `model.layers.*.self_attn`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Role = Literal[
    "embedding", "lm_head", "attention", "mlp", "expert", "shared_expert", "router", "norm", "vision", "other"
]


@dataclass(frozen=True, slots=True)
class WeightGroup:
    """`per_layer` tensors of `shape` in each layer of `layers` (model-level tensors: layers == ())."""

    name: str  # module path as checkpoints spell it, "{layer}"/"{expert}" for indices; tensor "<name>.weight"
    role: Role
    shape: tuple[int, ...]  # logical shape; a Linear: (out_features, in_features)
    layers: tuple[int, ...] = ()
    per_layer: int = 1
    linear: bool = True  # a Linear weight (quantizable); False: norms, biases, conv, tables, gates' vectors

    @property
    def count(self) -> int:
        return max(1, len(self.layers)) * self.per_layer

    @property
    def elements(self) -> int:
        return math.prod(self.shape) * self.count
