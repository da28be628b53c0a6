"""Native tensor-core precision by architecture, and the one list of precision names.

Names: a workload stores and computes in the precisions the budget engine sizes
(``budgets.engine.dtypes.BYTES_PER_ELEMENT``: fp32, bf16, fp16, fp8, int8, int4, nf4); a device may also
list formats no workload asks for yet (fp64, tf32, fp8_fnuz, mxfp8, fp6, fp4). ``CANONICAL_PRECISIONS``
is both, less the storage-only formats no device computes in (nf4: bitsandbytes dequantizes it to the compute
dtype), and the catalog's ``PrecisionSlug`` choices are built from it.

Rules (``research/catalog-and-compat.md`` §B3, Transformer Engine support matrix): bf16/tf32 ⇒ CC ≥ 8.0,
fp8 ⇒ CC ≥ 8.9 or AMD CDNA3 (FNUZ variant) / CDNA4, fp4/fp6 ⇒ Blackwell (CC ≥ 10.0) or CDNA4.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from budgets.engine.dtypes import BYTES_PER_ELEMENT

from .base import Check, CompatError, ComputeCapability, Reason, parse_compute_capability

if TYPE_CHECKING:
    from .configuration import Facts, Requirements

WORKLOAD_PRECISIONS: tuple[str, ...] = tuple(BYTES_PER_ELEMENT)
DEVICE_ONLY_PRECISIONS: tuple[str, ...] = ("fp64", "tf32", "fp8_fnuz", "mxfp8", "fp6", "fp4")
# weights only, never a device's precision (nvfp4/mxfp4 normalize to the device's "fp4" through the aliases)
STORAGE_ONLY_PRECISIONS: frozenset[str] = frozenset({"nf4", "nvfp4", "mxfp4"})
CANONICAL_PRECISIONS: tuple[str, ...] = (
    tuple(p for p in WORKLOAD_PRECISIONS if p not in STORAGE_ONLY_PRECISIONS) + DEVICE_ONLY_PRECISIONS
)

PRECISION_LABELS: dict[str, str] = {
    "fp32": "FP32", "bf16": "BF16", "fp16": "FP16", "fp8": "FP8 (OCP e4m3/e5m2)", "int8": "INT8",
    "int4": "INT4", "fp64": "FP64", "tf32": "TF32", "fp8_fnuz": "FP8 FNUZ (AMD CDNA3)", "mxfp8": "MXFP8",
    "fp6": "FP6", "fp4": "FP4 (NVFP4/MXFP4)", "nf4": "NF4 (bitsandbytes 4-bit NormalFloat, weights only)",
    "nvfp4": "NVFP4 (fp4 with an fp8 scale per 16, weights only)",
    "mxfp4": "MXFP4 (fp4 with an e8m0 scale per 32, weights only)",
}  # fmt: skip

PRECISION_ALIASES: dict[str, str] = {
    "float64": "fp64", "double": "fp64",
    "float32": "fp32", "float": "fp32",
    "xf32": "tf32", "tf32(xf32)": "tf32",
    "bfloat16": "bf16",
    "float16": "fp16", "half": "fp16",
    "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "e4m3": "fp8", "e5m2": "fp8", "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8", "fp8_e4m3 (ocp)": "fp8", "fp8_e5m2 (ocp)": "fp8",
    "fp8_e4m3fnuz": "fp8_fnuz", "fp8_e5m2fnuz": "fp8_fnuz", "float8_e4m3fnuz": "fp8_fnuz",
    "float8_e5m2fnuz": "fp8_fnuz",
    "fp4_nvfp4": "fp4", "fp4_mxfp4": "fp4", "nvfp4": "fp4", "mxfp4": "fp4", "fp4_nvfp4_partial": "fp4",
}  # fmt: skip

# Formats a workload runs on tensor cores and so needs natively. fp32 runs on any GPU's CUDA cores;
# int8/int4 weights are dequantized by weight-only kernels (a software path, research §B3), not by
# integer tensor cores.
NEEDS_NATIVE_SUPPORT = frozenset({"bf16", "fp16", "fp8"})

_WHAT_SUPPORTS = {
    "bf16": "compute capability ≥ 8.0 (Ampere or newer) or AMD CDNA2+",
    "fp16": "any CUDA GPU from Volta on, or AMD CDNA",
    "fp8": "compute capability ≥ 8.9 (Ada, Hopper, Blackwell) or AMD CDNA3 (FNUZ) / CDNA4",
}
# What to use instead, nearest first; fp32 runs everywhere (CUDA cores).
_INSTEAD: dict[str, tuple[str, ...]] = {"fp8": ("bf16", "fp16"), "bf16": ("fp16",), "fp16": ()}


def normalize_precision(name: str) -> str:
    """A precision name as the catalog spells it (``"fp8_e4m3"`` → ``"fp8"``)."""
    key = str(name).strip().lower()
    key = PRECISION_ALIASES.get(key, key)
    if key not in CANONICAL_PRECISIONS and key not in STORAGE_ONLY_PRECISIONS:
        known = (*CANONICAL_PRECISIONS, *sorted(STORAGE_ONLY_PRECISIONS))
        raise CompatError(f"unknown precision {name!r}; expected one of {', '.join(known)}.")
    return key


def check_precision(precisions: Iterable[str], precision: str) -> Check:
    """Is ``precision`` native on a device whose tensor precisions are ``precisions``?

    fp8 on AMD CDNA3 exists only as FNUZ: accepted, with a reason saying OCP checkpoints need conversion.
    """
    wanted = normalize_precision(precision)
    native = {normalize_precision(p) for p in precisions}
    if wanted in native:
        return Check(True, f"{wanted} is native")
    if wanted == "fp8" and "fp8_fnuz" in native:
        return Check(True, "fp8 runs as FNUZ (e4m3fnuz/e5m2fnuz); OCP e4m3fn checkpoints must be converted")
    return Check(False, f"{wanted} is not native (native: {', '.join(sorted(native)) or 'none'})")


def supports_precision(precisions: Iterable[str], precision: str, *, fnuz_counts_as_fp8: bool = True) -> bool:
    wanted = normalize_precision(precision)
    native = {normalize_precision(p) for p in precisions}
    if wanted in native:
        return True
    return fnuz_counts_as_fp8 and wanted == "fp8" and "fp8_fnuz" in native


def cc_supports_precision(cc: str | ComputeCapability, precision: str) -> bool:
    """Native tensor-core support from the NVIDIA compute capability alone (research §B3, Transformer
    Engine support matrix): bf16/tf32 ⇒ ≥ 8.0, fp8 ⇒ ≥ 8.9, fp4/fp6 ⇒ ≥ 10.0, MXFP8 on 10.x/11.x only."""
    c = parse_compute_capability(cc).pair
    p = normalize_precision(precision)
    rules = {
        "fp16": c >= (7, 0),
        "bf16": c >= (8, 0),
        "tf32": c >= (8, 0),
        "fp8": c >= (8, 9),
        "mxfp8": c[0] in (10, 11),  # TE: sm_120 MXFP8 "No"
        "fp6": c >= (10, 0),
        "fp4": c >= (10, 0),
        "int8": c >= (7, 5),  # Volta has no INT8 tensor cores (TensorRT matrix)
        "int4": (7, 5) <= c < (9, 0),  # Hopper/Blackwell datasheets list no INT4
        "nf4": False,  # a storage format: bitsandbytes dequantizes it to the compute dtype (no tensor-core NF4)
        "fp64": c in {(8, 0), (9, 0)} or c[0] == 10,  # FP64 tensor cores: GA100, GH100, GB100-class
        "fp32": False,  # NVIDIA tensor cores take fp32 input as tf32
        "fp8_fnuz": False,  # AMD CDNA3 only
    }
    return rules[p]


def _native_on(facts: Facts, precision: str) -> bool:
    """The architecture's catalog list decides; without one, the NVIDIA compute-capability rule does."""
    if facts.native_precisions:
        return supports_precision(facts.native_precisions, precision)
    if facts.compute_capability is not None:
        return cc_supports_precision(facts.compute_capability, precision)
    return False


def _instead(facts: Facts, precision: str) -> str:
    native = next((p for p in _INSTEAD[precision] if _native_on(facts, p)), "fp32")
    return f"{native} (or int8/int4 weight-only quantization)" if precision == "fp8" else native


# vLLM serves FP8 weights on NVIDIA GPUs without FP8 tensor cores weight-only through Marlin: the weights stay
# 1 B each on the device and are dequantized to the compute dtype in the kernel. vllm-0.11.0/model_executor/layers/
# quantization/fp8.py:232-238 (`use_marlin = not has_device_capability(89)`), :113-115 (the method needs compute
# capability 8.0); utils/marlin_utils_fp8.py:78-164 (fp8 repacked into int32, scales in the model dtype). FP4 has
# the same weight-only path (marlin_utils_fp4.py), a storage-only precision here.
FP8_WEIGHT_ONLY_MIN_CC = (8, 0)


def _weight_only_fp8(requirements: Requirements, facts: Facts, role: str, precision: str) -> bool:
    if role != "weights" or precision != "fp8" or requirements.engine != "vllm":
        return False
    compute = dict(requirements.precisions).get("compute")
    cc = facts.compute_capability
    return compute != "fp8" and cc is not None and parse_compute_capability(cc).pair >= FP8_WEIGHT_ONLY_MIN_CC


def check_precisions(requirements: Requirements, facts: Facts) -> list[Reason]:
    """Each precision the workload stores or computes in (weights, compute, KV cache) must be native, except FP8
    weights that vLLM runs weight-only (Marlin) on an NVIDIA GPU from Ampere on."""
    if not facts.has_accelerator:
        return []
    failing: dict[str, list[str]] = {}
    for role, precision in requirements.precisions:
        if _weight_only_fp8(requirements, facts, role, precision):
            continue
        if precision in NEEDS_NATIVE_SUPPORT and not _native_on(facts, precision):
            failing.setdefault(precision, []).append(role)
    native = ", ".join(sorted(facts.native_precisions)) or "unknown"
    return [
        Reason(
            "precision",
            f"{precision} ({', '.join(roles)}) is not native on {facts.label} "
            f"(native: {native}); {precision} needs {_WHAT_SUPPORTS[precision]}",
            f"use {_instead(facts, precision)} for {', '.join(roles)}, or a device with native {precision}",
        )
        for precision, roles in failing.items()
    ]
