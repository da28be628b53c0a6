"""Weights resident on a device.

Float formats: parameters × bytes. Quantized formats (int8/int4/fp8/nf4) store the decoder's linear
layers quantized, with one fp16 scale (int4: scale + zero) per group of 128 weights, or for
bitsandbytes nf4 one fp32 absmax per block of 64 (`dtypes.py`); embeddings, LM head and norms stay
16-bit (DOMAIN.md §2; transformers' quantizers keep the output embedding unquantized,
transformers 5.24.0 quantizers/base.py:39-63 `get_keys_to_not_convert`). A `weights_bytes` override (e.g.
a safetensors index `total_size`) is taken as exact and split like the parameters.
"""

from __future__ import annotations

from ..dtypes import NF4_BLOCK, QUANT_GROUP, nbytes, stored_bytes_per_weight


def weight_bytes(
    layer_params: float,
    embedding_params: float,
    head_params: float,
    precision: str,
    weights_bytes_override: int | None,
    total_params: int,
    double_quant: bool = False,
) -> tuple[int, str]:
    """(bytes, note) for the weights on one device; ``double_quant``: NF4 with its absmax quantized too."""
    params = layer_params + embedding_params + head_params
    if weights_bytes_override:
        share = params / total_params if total_params else 1.0
        value = weights_bytes_override if abs(share - 1.0) < 1e-12 else int(weights_bytes_override * share)
        return int(value), "exact: given weights_bytes, split like the parameters"
    if precision in ("fp32", "bf16", "fp16"):
        exact = layer_params + embedding_params + head_params
        note = f"exact: {round(exact):,} parameters × {nbytes(precision):g} B ({precision})"
        return round(exact * nbytes(precision)), note
    stored = layer_params * stored_bytes_per_weight(precision, double_quant) + (embedding_params + head_params) * 2
    scales = (
        f"bitsandbytes NF4 with {'a uint8 absmax (double quantization)' if double_quant else 'an fp32 absmax'}"
        f" per {NF4_BLOCK}"
        if precision == "nf4"
        else f"{precision} with per-{QUANT_GROUP} group scales{' and zeros' if precision == 'int4' else ''}"
    )
    return int(stored), f"decoder weights {scales}; embeddings, LM head and norms kept 16-bit"
