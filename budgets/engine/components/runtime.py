"""The GPU architecture a device name implies, and the CUDA context: only visible in the device (NVML) view.

The context holds the driver's state and the loaded kernel modules. With lazy module loading (CUDA ≥ 11.7;
PyTorch sets `CUDA_MODULE_LOADING=LAZY` since 1.13) a PyTorch process's context is a few hundred MB; with
every module loaded eagerly it is 0.67–1.34 GB. Zero for `device: cpu`. Sources and quotes for every
figure: `budgets/engine/CUDA_TERMS.md`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from ..budget import GIB, Range

MB = 10**6
MIB = 2**20


@dataclass(frozen=True, slots=True)
class Architecture:
    """An NVIDIA GPU family and its compute capability major, or `unknown` when the name says neither."""

    family: str
    sm_major: int | None

    @property
    def known(self) -> bool:
        return self.sm_major is not None


UNKNOWN = Architecture("unknown", None)

# Device names as the catalog (fixtures/catalog/accelerators.json) and torch.cuda.get_device_name()
# spell them, lower-cased; the first match wins. Compute capabilities: the catalog's architectures.json.
_FAMILIES: tuple[tuple[re.Pattern[str], Architecture], ...] = (
    (re.compile(r"\bg?b[123]00\b"), Architecture("blackwell", 10)),  # B100/B200/B300/GB200: sm_100/103
    (re.compile(r"rtx 50\d0|blackwell"), Architecture("blackwell", 12)),  # RTX 50xx, RTX PRO Blackwell: sm_120
    (re.compile(r"\bg?h(100|200|800|20)\b"), Architecture("hopper", 9)),  # sm_90
    (re.compile(r"\bl(4|20|40|40s)\b|rtx 40\d0|\bada\b"), Architecture("ada", 8)),  # sm_89
    (re.compile(r"\ba(2|10g?|16|30|40|100|800)\b|rtx a\d{4}|rtx 30\d0"), Architecture("ampere", 8)),  # sm_80/86
    (re.compile(r"\bt4\b|rtx 20\d0|titan rtx"), Architecture("turing", 7)),  # sm_75
    (re.compile(r"v100|titan v\b"), Architecture("volta", 7)),  # sm_70
)


# compute capability → family (NVIDIA CUDA C Programming Guide, "Compute Capabilities"; the catalog's
# architectures.json): what the catalog knows of a device, before any name
_BY_CAPABILITY: dict[int, Architecture] = {
    7: Architecture("turing", 7),  # 7.5; 7.0 is Volta (below)
    8: Architecture("ampere", 8),  # 8.0, 8.6, 8.7; 8.9 is Ada (below)
    9: Architecture("hopper", 9),
    10: Architecture("blackwell", 10),
    11: Architecture("blackwell", 10),
    12: Architecture("blackwell", 12),
}


@lru_cache(maxsize=64)
def architecture(device_name: str | None, compute_capability: tuple[int, int] | None = None) -> Architecture:
    """The family of a device: from the catalog's compute capability when given, else from its name (`UNKNOWN`
    without either, or for a name not listed)."""
    if compute_capability is not None:
        major, minor = compute_capability
        if (major, minor) == (7, 0):
            return Architecture("volta", 7)
        if (major, minor) == (8, 9):
            return Architecture("ada", 8)
        return _BY_CAPABILITY.get(major, UNKNOWN)
    if not device_name:
        return UNKNOWN
    name = device_name.lower()
    for pattern, arch in _FAMILIES:
        if pattern.search(name):
            return arch
    return UNKNOWN


# CUDA context with lazy module loading, (low, expected, high) bytes. Published bare-PyTorch figures:
# 256 MiB on an RTX 3090 (torch 2.7.1+cu128; invoke-ai/InvokeAI#9413), 426 MiB on an RTX 6000 Ada
# (torch 2.10.0+cu130; unslothai/unsloth-zoo#1053), "~300MB" and "around 400MB" with no GPU named
# (ptrblck in pytorch/pytorch#107667, #109888). Hopper: 79.18 − 78.57 GiB = 0.61 GiB used at a vLLM
# 0.11 TP1 start on an H100 80GB HBM3 (llm-d/llm-d-benchmark@4f4d449 empirical-vllm-memory-results.md),
# which holds vLLM's start-up allocations besides the context, so it is Hopper's expected and high end.
CONTEXT_LOW = 256 * MIB  # InvokeAI#9413 (RTX 3090): the smallest published lazy-loading context
CONTEXT_GENERIC = 400 * MB  # pytorch#109888: "around 400MB if CUDA >= 11.7 is used and lazy module loading"
CONTEXT_HOPPER = round((79.18 - 78.57) * GIB)  # llm-d H100 vLLM start: "Free memory on device: 78.57/79.18 GiB"
LAZY_CONTEXT: dict[str, Range] = {
    "ampere": Range(CONTEXT_LOW, CONTEXT_LOW, 426 * MIB),  # RTX 3090 measured; high: the Ada figure
    "ada": Range(CONTEXT_LOW, 426 * MIB, 426 * MIB),  # unsloth-zoo#1053 (RTX 6000 Ada)
    "hopper": Range(CONTEXT_LOW, CONTEXT_HOPPER, CONTEXT_HOPPER),
}
# no published figure for the family (Volta, Turing, Blackwell) or no device name: every figure above
LAZY_CONTEXT_ANY = Range(CONTEXT_LOW, CONTEXT_GENERIC, CONTEXT_HOPPER)
# every module loaded at start (CUDA < 11.7): 666,632,192 B with CUDA_MODULE_LOADING=DEFAULT for a
# 6.4 MB tensor (pytorch/pytorch#86509), ">1000MB" (ptrblck, pytorch#107667), "GPU memory occupied:
# 1343 MB" for a 1×1 tensor (huggingface/transformers docs/source/en/model_memory_anatomy.md)
EAGER_CONTEXT = Range(666_632_192, 1000 * MB, 1343 * MB)


@lru_cache(maxsize=256)
def cuda_context(
    device: str,
    cuda_version: tuple[int, int] | None,
    device_name: str | None = None,
    compute_capability: tuple[int, int] | None = None,
) -> tuple[Range, str]:
    """The CUDA context of one process on `device_name`'s architecture with this CUDA toolkit (None: not given, so
    a toolkit with lazy module loading is assumed, as every one since 11.7 has, and the note says so)."""
    if device == "cpu":
        return Range(0, 0, 0), "cpu device: no CUDA context"
    if cuda_version is not None and cuda_version < (11, 7):
        return EAGER_CONTEXT, "CUDA context without lazy module loading (CUDA < 11.7): every kernel module loaded"
    assumed = " (runtime.cuda_version not given: assumed ≥ 11.7)" if cuda_version is None else ""
    arch = architecture(device_name, compute_capability)
    if arch.family in LAZY_CONTEXT:
        return LAZY_CONTEXT[arch.family], f"CUDA context with lazy module loading (CUDA ≥ 11.7){assumed}, {arch.family}"
    return LAZY_CONTEXT_ANY, f"CUDA context with lazy module loading (CUDA ≥ 11.7){assumed}, range over published GPUs"
