"""Bytes per element of each representation."""

from __future__ import annotations

BYTES_PER_ELEMENT: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
}

QUANT_GROUP = 128  # weights per quantization group (GPTQ/AWQ/bitsandbytes-style blockwise scales)


def nbytes(precision: str) -> float:
    return BYTES_PER_ELEMENT[precision]
