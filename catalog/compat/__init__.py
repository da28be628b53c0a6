"""Compatibility rules for the catalog, one module per rule family. Pure Python.

No Django here (an import-linter contract enforces it): the functions take and return plain values and
frozen dataclasses, so the recommender, the API filters and the admin all share one set of rules.
Sources: ``research/catalog-and-compat.md`` part B and ``data/cuda_driver.json``.

Versions are strings (``"550.54.15"``, ``"12.4"``, ``"12.4.1"``, or a wheel tag ``"cu124"``) compared as
integers through :func:`catalog.units.version_key`; compute capabilities are ``"8.6"`` or ``"9.0a"``.

The entry point
    ``check_configuration(requirements, facts) -> list[Reason]`` (``configuration``): every failed rule as
    ``Reason(rule, message, action)``; ``Requirements.from_workload(workload)``; ``Facts`` from a catalog
    row through ``catalog.selectors.configuration_facts``.

Rule families (each module has its ``check_*(requirements, facts) -> list[Reason]``)
    ``precision``  native precision by architecture; the one list of precision names
    ``driver``     installed driver ↔ the CUDA version the workload needs (Tables 2 and 3)
    ``cuda_arch``  compute capability ↔ CUDA (Blackwell ⇒ ≥ 12.8; CUDA 13 dropped Volta)
    ``wheels``     PyTorch wheels that include the compute capability
    ``kernels``    FlashAttention-2/3 and vLLM minimums
    ``host``       a GPU for a CUDA workload; the host CPU architecture
"""

from __future__ import annotations

from .base import (
    Check,
    CompatError,
    ComputeCapability,
    Reason,
    parse_compute_capability,
    parse_cuda_version,
)
from .configuration import RULES, Facts, Requirements, assumed_cuda, check_configuration
from .cuda_arch import (
    MIN_CUDA_FOR_CC,
    check_cuda_for_compute_capability,
    min_cuda_for_compute_capability,
)
from .driver import (
    FAMILY_MINOR_COMPAT_FLOORS,
    CudaSupport,
    Toolkit,
    cuda_support,
    driver_supports_cuda,
    drivers_supporting_cuda_min_key,
    max_cuda_for_driver,
    min_driver_for_cuda,
    min_driver_key_for_cuda,
)
from .kernels import check_flash_attention, check_vllm, vllm_release_is_legacy
from .precision import (
    CANONICAL_PRECISIONS,
    PRECISION_ALIASES,
    PRECISION_LABELS,
    STORAGE_ONLY_PRECISIONS,
    WORKLOAD_PRECISIONS,
    cc_supports_precision,
    check_precision,
    normalize_precision,
    supports_precision,
)
from .wheels import (
    Wheel,
    pytorch_wheels_for,
    select_pytorch_wheel,
    wheel_supports_compute_capability,
    wheels_for_cuda,
)

__all__ = [
    "CANONICAL_PRECISIONS",
    "FAMILY_MINOR_COMPAT_FLOORS",
    "MIN_CUDA_FOR_CC",
    "PRECISION_ALIASES",
    "PRECISION_LABELS",
    "RULES",
    "STORAGE_ONLY_PRECISIONS",
    "WORKLOAD_PRECISIONS",
    "Check",
    "CompatError",
    "ComputeCapability",
    "CudaSupport",
    "Facts",
    "Reason",
    "Requirements",
    "Toolkit",
    "Wheel",
    "assumed_cuda",
    "cc_supports_precision",
    "check_configuration",
    "check_cuda_for_compute_capability",
    "check_flash_attention",
    "check_precision",
    "check_vllm",
    "cuda_support",
    "driver_supports_cuda",
    "drivers_supporting_cuda_min_key",
    "max_cuda_for_driver",
    "min_cuda_for_compute_capability",
    "min_driver_for_cuda",
    "min_driver_key_for_cuda",
    "normalize_precision",
    "parse_compute_capability",
    "parse_cuda_version",
    "pytorch_wheels_for",
    "select_pytorch_wheel",
    "supports_precision",
    "vllm_release_is_legacy",
    "wheel_supports_compute_capability",
    "wheels_for_cuda",
]
