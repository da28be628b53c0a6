"""Compute capability ↔ the CUDA toolkit that targets it: Blackwell needs CUDA ≥ 12.8; CUDA 13 dropped Volta.

Sources: ``research/catalog-and-compat.md`` §B2 (first CUDA per CC: NVIDIA forum "minimum required CUDA
version by GPU"; Blackwell from the vLLM docs "Blackwell GPUs (B200, GB200) require a minimum of CUDA 12.8"
and flash-attention ``setup.py``; CUDA 13.0 removed sm_50…sm_72, NVIDIA "Deprecated architectures").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..units import version_key
from .base import Check, ComputeCapability, Reason, cuda_key, cuda_minor, parse_compute_capability

if TYPE_CHECKING:
    from .configuration import Facts, Requirements

# First CUDA toolkit that supports a compute capability (cuda_driver.json first_toolkit_supporting_...).
MIN_CUDA_FOR_CC: dict[tuple[int, int], str] = {
    (7, 0): "9.0",
    (7, 5): "10.0",
    (8, 0): "11.0",
    (8, 6): "11.1",
    (8, 9): "11.8",
    (9, 0): "11.8",
    (10, 0): "12.8",
    (10, 3): "12.9",  # uncertain: pytorch#159779 discussion
    (11, 0): "13.0",  # Jetson Thor (sm_101 before 13.0)
    (12, 0): "12.8",
    (12, 1): "12.9",
}
# CUDA 13.0 removed offline compilation and library support for sm_50…sm_72 (release notes, deprecated archs).
LAST_CUDA_MAJOR_FOR_OLD_ARCHS = 12
_OLD_ARCH_BELOW = (7, 5)


def min_cuda_for_compute_capability(cc: str | ComputeCapability) -> str | None:
    """First CUDA version that targets the capability; None when the table does not list it."""
    return MIN_CUDA_FOR_CC.get(parse_compute_capability(cc).pair)


def check_cuda_for_compute_capability(cuda_version: str, cc: str | ComputeCapability) -> Check:
    """Can code built with this CUDA version target the GPU? (Blackwell ⇒ ≥ 12.8; Volta ⇒ ≤ 12.x)."""
    capability = parse_compute_capability(cc)
    major, wanted = cuda_key(cuda_version)
    first = min_cuda_for_compute_capability(capability)
    if first is not None and wanted < version_key(first):
        return Check(
            False,
            f"compute capability {capability.major}.{capability.minor} needs CUDA ≥ {first}, not {cuda_version}",
        )
    if capability.pair < _OLD_ARCH_BELOW and major > LAST_CUDA_MAJOR_FOR_OLD_ARCHS:
        return Check(
            False,
            f"CUDA {major}.x dropped compute capability {capability.major}.{capability.minor} "
            f"(last family: {LAST_CUDA_MAJOR_FOR_OLD_ARCHS}.x)",
        )
    return Check(True, f"CUDA {cuda_version} targets compute capability {capability.major}.{capability.minor}")


def check_cuda_arch(requirements: Requirements, facts: Facts) -> list[Reason]:
    """The workload's CUDA version must target the GPU (B200 with CUDA 12.4 has no kernels to run)."""
    cc = facts.compute_capability
    if requirements.cuda_version is None or cc is None:
        return []
    check = check_cuda_for_compute_capability(requirements.cuda_version, cc)
    if check:
        return []
    first = min_cuda_for_compute_capability(cc)
    if first is not None and cuda_key(requirements.cuda_version)[1] < version_key(first):
        action = f"set runtime.cuda_version to ≥ {cuda_minor(first)}"
    else:
        action = f"set runtime.cuda_version to a {LAST_CUDA_MAJOR_FOR_OLD_ARCHS}.x release"
    return [Reason("cuda_arch", f"{facts.label}: {check.reason}", action)]
