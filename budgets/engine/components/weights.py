"""Weights resident on a device.

Float formats: parameters × bytes. Quantized formats (int8/int4/fp8) store the decoder's linear
layers quantized, with one fp16 scale (int4: scale + zero) per group of 128 weights; embeddings,
LM head and norms stay 16-bit (DOMAIN.md §2). A `weights_bytes` override (e.g. a safetensors index
`total_size`) is taken as exact and split like the parameters.
"""

from __future__ import annotations

from ..dtypes import QUANT_GROUP, nbytes

SCALE_BYTES_PER_GROUP = {"int8": 2, "int4": 4, "fp8": 0}  # fp16 scale (+ fp16 zero for int4)


def weight_bytes(
    layer_params: float,
    embedding_params: float,
    head_params: float,
    precision: str,
    weights_bytes_override: int | None,
    total_params: int,
) -> tuple[int, str]:
    """(bytes, note) for the weights on one device."""
    params = layer_params + embedding_params + head_params
    if weights_bytes_override:
        share = params / total_params if total_params else 1.0
        value = weights_bytes_override if abs(share - 1.0) < 1e-12 else int(weights_bytes_override * share)
        return int(value), "exact: given weights_bytes, split like the parameters"
    if precision in ("fp32", "bf16", "fp16"):
        exact = layer_params + embedding_params + head_params
        note = f"exact: {round(exact):,} parameters × {nbytes(precision):g} B ({precision})"
        return round(exact * nbytes(precision)), note
    per_weight = nbytes(precision) + SCALE_BYTES_PER_GROUP[precision] / QUANT_GROUP
    value = layer_params * per_weight + (embedding_params + head_params) * 2
    return int(value), (
        f"{precision} decoder weights with per-{QUANT_GROUP} group scales"
        f"{' and zeros' if precision == 'int4' else ''}; embeddings, LM head and norms kept 16-bit"
    )
