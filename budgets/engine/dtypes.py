"""Bytes per element of each representation, and the block scales of the quantized weight formats."""

from __future__ import annotations

BYTES_PER_ELEMENT: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
    "nf4": 0.5,
    "nvfp4": 0.5,
    "mxfp4": 0.5,
}

#: The compute dtype as frameworks name it (torch, vLLM's --dtype): fp8 compute runs its matmuls on fp8 weights with
#: bf16 activations, so the framework dtype is bfloat16; int8/int4 compute defaults to bf16 (schema.PrecisionSpec).
FRAMEWORK_DTYPES: dict[str, str] = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp8": "bfloat16"}


def framework_dtype(compute: str | None) -> str:
    """``FRAMEWORK_DTYPES`` of a workload's compute precision (bfloat16 when it has none there)."""
    return FRAMEWORK_DTYPES.get(compute or "bf16", "bfloat16")


QUANT_GROUP = 128  # weights per quantization group (GPTQ/AWQ-style group scales)

# bitsandbytes NF4 (bitsandbytes@a06a0f6 = 0.41.0, bitsandbytes/functional.py:775 `quantize_4bit(...,
# blocksize=64, ...)`, :812 `absmax = torch.zeros((blocks,), ..., dtype=torch.float32)`): two 4-bit codes
# per byte and one fp32 absmax per block of 64 weights, without double quantization (quantize_4bit's
# compress_statistics=False; with it the absmax is stored as uint8 with an fp32 absmax per 256 blocks,
# :844-848, not modelled)
NF4_BLOCK = 64
NF4_ABSMAX_BYTES = 4

# bytes of the scales per group: an fp16 scale (+ an fp16 zero for int4) per QUANT_GROUP weights;
# nf4: the fp32 absmax per NF4_BLOCK weights
SCALE_BYTES_PER_WEIGHT: dict[str, float] = {
    "int8": 2 / QUANT_GROUP,
    "int4": 4 / QUANT_GROUP,
    "fp8": 0.0,
    "nf4": NF4_ABSMAX_BYTES / NF4_BLOCK,
    # NVFP4: an fp8 e4m3 scale per 16 weights (+ an fp32 global scale per tensor, negligible); MXFP4: an e8m0 scale
    # per 32 (OCP Microscaling Formats v1.0 §5; quantization.py prices a checkpoint's tensors exactly)
    "nvfp4": 1 / 16,
    "mxfp4": 1 / 32,
}


def nbytes(precision: str) -> float:
    return BYTES_PER_ELEMENT[precision]


#: NF4 with double quantization (bitsandbytes functional.py:873-885 `compress_statistics=True`, what Unsloth's loader
#: asks for: unsloth/models/llama.py:1626-1631 at 400d995): a uint8 absmax per 64 weights and an fp32 absmax per 256
#: of them (the 256-entry code per tensor is negligible)
NF4_DOUBLE_QUANT_SCALE_BYTES = 1 / NF4_BLOCK + NF4_ABSMAX_BYTES / (NF4_BLOCK * 256)


def stored_bytes_per_weight(precision: str, double_quant: bool = False) -> float:
    """Bytes one weight takes on the device, its share of the block scales included (``double_quant``: NF4's
    absmax itself quantized)."""
    if precision == "nf4" and double_quant:
        return nbytes(precision) + NF4_DOUBLE_QUANT_SCALE_BYTES
    return nbytes(precision) + SCALE_BYTES_PER_WEIGHT.get(precision, 0.0)
