"""CUDA context and module images: only visible in the device (NVML) view.

With lazy module loading (CUDA ≥ 11.7, default since 11.8 in PyTorch) the context of a PyTorch
process is ≈300–600 MB; before that >1 GB (DOMAIN.md §1). Zero for `device: cpu`.
"""

from __future__ import annotations

from ..budget import Range

MB = 10**6


def cuda_context(device: str, cuda_version: tuple[int, int]) -> tuple[Range, str]:
    if device == "cpu":
        return Range(0, 0, 0), "cpu device: no CUDA context"
    if cuda_version >= (11, 7):
        return Range(300 * MB, 500 * MB, 650 * MB), "CUDA context with lazy module loading (CUDA ≥ 11.7)"
    return Range(900 * MB, 1200 * MB, 1700 * MB), "CUDA context without lazy loading (CUDA < 11.7)"
