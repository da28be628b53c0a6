"""Library workspaces and communication buffers (constants per stack; calibrate per node).

cuBLAS: CUBLAS_WORKSPACE_CONFIG default `:4096:2:16:8` = 2 × 4 MiB + 8 × 16 KiB per handle/stream.
NCCL: per communicator buffers (NCCL_BUFFSIZE 4 MiB × channels × peers); vLLM reports ≈0.13 GiB of
non-torch memory at TP1 and ≈0.55 GiB at TP2 (budget-engine.md §5.4).
ZeRO-3: all-gathered layers (current + prefetched) live beside the shards (DeepSpeed#5305).
"""

from __future__ import annotations

from ..budget import Range

MIB = 2**20
CUBLAS_PER_HANDLE = 2 * 4 * MIB + 8 * 16 * 1024  # bytes


def cublas(device: str) -> Range:
    if device == "cpu":
        return Range(0, 0, 0)
    return Range(CUBLAS_PER_HANDLE, CUBLAS_PER_HANDLE, 2 * CUBLAS_PER_HANDLE)


def nccl(device: str, tensor: int, pipeline: int, data: int) -> Range:
    if device == "cpu" or tensor * pipeline * data == 1:
        return Range(0, 0, 0)
    if tensor > 1 or pipeline > 1:
        return Range(128 * MIB, 420 * MIB, 1024 * MIB)
    return Range(64 * MIB, 200 * MIB, 512 * MIB)


def attention_backend(device: str, attention: str) -> Range:
    if device == "cpu":
        return Range(0, 0, 0)
    if attention == "flash":
        return Range(0, 4 * MIB, 64 * MIB)
    return Range(0, 0, 32 * MIB)
