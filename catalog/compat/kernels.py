"""FlashAttention-2/3 and vLLM minimums (``research/catalog-and-compat.md`` §B5, §B6).

FlashAttention: Dao-AILab/flash-attention README and ``setup.py`` @0251105a. vLLM: "compute capability 7.0
or higher" in the docs up to v0.14 (docs.vllm.ai/en/v0.14.0/getting_started/installation/gpu/), "7.5 or
higher" in current docs (``docs/getting_started/installation/gpu.cuda.inc.md`` @0487d5c2); ROCm targets
"MI200s (gfx90a), MI300 (gfx942), MI350 (gfx950), Radeon RX 7900 (gfx1100/1101), RX 9000 (gfx1200/1201)".
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..units import UnitError, version_key
from .base import Check, CompatError, ComputeCapability, Reason, cuda_key, parse_compute_capability

if TYPE_CHECKING:
    from .configuration import Facts, Requirements

# flash-attention setup.py allowed_archs for the ROCm CK/Triton backends.
_FA2_ROCM_TARGETS = re.compile(r"^gfx(90a|942|950|11\d\d|12\d\d)$")
# vLLM's ROCm docs (v0.14): gfx90a, gfx942, gfx950, gfx1100/1101, gfx1200/1201.
VLLM_ROCM_TARGETS = frozenset({"gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1101", "gfx1200", "gfx1201"})
# The last vLLM release whose docs list compute capability 7.0 as the floor (research §B6).
VLLM_LAST_RELEASE_WITH_CC70 = "0.14"


def _check_flash_attention_rocm(version: int, gfx_target: str) -> Check:
    if version == 3:
        return Check(False, f"FlashAttention-3 targets Hopper (sm_90); {gfx_target} is not supported")
    if _FA2_ROCM_TARGETS.match(gfx_target.strip().lower()):
        return Check(True, f"FlashAttention-2 has a ROCm backend for {gfx_target}")
    return Check(
        False,
        f"FlashAttention-2's ROCm backends support gfx90a, gfx942, gfx950, gfx11xx, gfx12xx, not {gfx_target}",
    )


def check_flash_attention(
    version: int,
    *,
    compute_capability: str | ComputeCapability | None = None,
    gfx_target: str | None = None,
    cuda_version: str | None = None,
) -> Check:
    """FlashAttention 2 or 3 on a device.

    FA2: NVIDIA CC ≥ 8.0 (Ampere, Ada, Hopper, Blackwell; Turing only through a separate fork), CUDA ≥ 12.0
    (README), Blackwell builds need CUDA ≥ 12.8; AMD gfx90a/gfx942/gfx950/gfx11xx/gfx12xx (ROCm ≥ 6.0).
    FA3: Hopper (CC 9.0) and CUDA ≥ 12.3.
    """
    if version not in (2, 3):
        raise CompatError(f"FlashAttention version {version!r}: expected 2 or 3.")
    if compute_capability is None:
        if gfx_target is None:
            raise CompatError("give compute_capability (NVIDIA) or gfx_target (AMD).")
        return _check_flash_attention_rocm(version, gfx_target)

    cc = parse_compute_capability(compute_capability)
    label = f"{cc.major}.{cc.minor}"
    cuda = cuda_key(cuda_version)[1] if cuda_version else None
    if version == 3:
        if cc.pair != (9, 0):
            return Check(False, f"FlashAttention-3 needs Hopper (compute capability 9.0), not {label}")
        if cuda is not None and cuda < version_key("12.3"):
            return Check(False, f"FlashAttention-3 needs CUDA ≥ 12.3, not {cuda_version}")
        return Check(True, "FlashAttention-3 supports Hopper (CUDA ≥ 12.3; 12.8 recommended)")
    if cc.pair < (8, 0):
        return Check(False, f"FlashAttention-2 needs compute capability ≥ 8.0 (Ampere or newer), not {label}")
    if cuda is not None:
        if cuda < version_key("12.0"):
            return Check(False, f"FlashAttention-2 needs CUDA ≥ 12.0, not {cuda_version}")
        if cc.major >= 10 and cuda < version_key("12.8"):
            return Check(False, f"FlashAttention-2 on Blackwell ({label}) needs CUDA ≥ 12.8, not {cuda_version}")
    return Check(True, f"FlashAttention-2 supports compute capability {label}")


def check_vllm(compute_capability: str | ComputeCapability, *, legacy: bool = False) -> Check:
    """vLLM's CUDA builds: CC ≥ 7.5 in current docs, ≥ 7.0 up to v0.14 (``legacy=True``)."""
    cc = parse_compute_capability(compute_capability)
    floor = (7, 0) if legacy else (7, 5)
    if cc.pair < floor:
        return Check(False, f"vLLM needs compute capability ≥ {floor[0]}.{floor[1]}, not {cc.major}.{cc.minor}")
    return Check(True, f"vLLM supports compute capability {cc.major}.{cc.minor}")


def vllm_release_is_legacy(engine_version: str | None) -> bool:
    """Does this vLLM release still document compute capability 7.0 as its floor (≤ v0.14)?

    An unknown or unreadable release counts as current: the stricter floor (7.5) applies.
    """
    if not engine_version:
        return False
    release = ".".join(re.findall(r"\d+", engine_version)[:2])
    try:
        return version_key(release) <= version_key(VLLM_LAST_RELEASE_WITH_CC70)
    except UnitError:
        return False


def check_attention(requirements: Requirements, facts: Facts) -> list[Reason]:
    """``runtime.attention: flash`` needs FlashAttention-2 (or 3 when asked for) on the device."""
    version = requirements.flash_attention
    if version is None or not facts.has_accelerator:
        return []
    if facts.compute_capability is None and not facts.gfx_target:
        return []
    check = check_flash_attention(
        version,
        compute_capability=facts.compute_capability,
        gfx_target=facts.gfx_target or None,
        cuda_version=requirements.cuda_version if facts.is_nvidia_gpu else None,
    )
    if check:
        return []
    action = "use FlashAttention-2 or sdpa attention" if version == 3 else "set runtime.attention to sdpa"
    return [Reason("flash_attention", f"{facts.label}: {check.reason}", action)]


def check_engine(requirements: Requirements, facts: Facts) -> list[Reason]:
    """vLLM runs on compute capability ≥ 7.5 (≥ 7.0 up to v0.14) or on its listed ROCm targets."""
    if requirements.engine != "vllm" or not facts.has_accelerator:
        return []
    if facts.compute_capability is not None:
        check = check_vllm(facts.compute_capability, legacy=vllm_release_is_legacy(requirements.engine_version))
        if check:
            return []
        action = "use engine transformers"
        if facts.compute_capability.pair >= (7, 0):
            action += f", or runtime.engine_version ≤ {VLLM_LAST_RELEASE_WITH_CC70} (its floor was 7.0)"
        return [Reason("vllm", f"{facts.label}: {check.reason}", action)]
    if facts.gfx_target and facts.gfx_target not in VLLM_ROCM_TARGETS:
        return [
            Reason(
                "vllm",
                f"{facts.label}: vLLM's ROCm builds target {', '.join(sorted(VLLM_ROCM_TARGETS))}, "
                f"not {facts.gfx_target}",
                "use engine transformers, or a listed AMD device",
            )
        ]
    return []
