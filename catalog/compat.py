"""Compatibility rules for the catalog: driver ↔ CUDA, precision, kernels, PyTorch wheels. Pure Python.

No Django here (an import-linter contract enforces it): the functions take and return plain values and
frozen dataclasses, so the recommender, the API filters and the admin all share one set of rules.
Sources: ``research/catalog-and-compat.md`` part B and ``data/cuda_driver.json`` (NVIDIA CUDA Toolkit
Release Notes, Tables 2 and 3).

Versions are strings (``"550.54.15"``, ``"12.4"``, ``"12.4.1"``, or a wheel tag ``"cu124"``); they are
compared as integers through :func:`catalog.units.version_key`. Compute capabilities are ``"8.6"`` or
``"9.0a"``.

Types
    ``Toolkit(version, family, min_driver_linux, minor_compat_min_driver_linux="", uncertain=False)``
        One CUDA toolkit release. ``Toolkit.from_row(row)`` takes a mapping
        (``CudaToolkit.objects.values(...)``) or any object with those attributes (a ``CudaToolkit``).
    ``Wheel(torch_versions, variant, cuda_version, compute_capabilities, embeds_ptx=False)``
        One PyTorch wheel variant; ``Wheel.from_row(row)`` as above. ``variant`` ``"cu130-aarch64"`` marks
        an aarch64 wheel (``Wheel.cpu_architecture``).
    ``ComputeCapability(major, minor, suffix="")`` — ``parse_compute_capability("9.0a")``.
    ``CudaSupport`` — ``FULL`` (driver ≥ the toolkit's own driver), ``MINOR_COMPAT`` (driver ≥ the family
        floor: runs prebuilt binaries, no JIT of newer PTX), ``NONE``.
    ``Check(ok, reason)`` — a verdict with the reason a person can read; truthy when ok.
    ``CompatError(ValueError)`` — an input that cannot be read; the message says what was expected.

Driver ↔ CUDA (full support vs minor-version compatibility: 13.x ≥ 580, 12.x ≥ 525.60.13, 11.x ≥ 450.80.02)
    ``cuda_support(driver_version, cuda_version, toolkits) -> CudaSupport``
    ``driver_supports_cuda(driver_version, cuda_version, toolkits, *, allow_minor_compat=True) -> bool``
    ``min_driver_for_cuda(cuda_version, toolkits, *, allow_minor_compat=True) -> str``
    ``min_driver_key_for_cuda(cuda_version, toolkits, *, allow_minor_compat=True) -> int``
        the smallest driver ``version_key`` that supports the CUDA version: filter configurations in the
        database with ``driver_version_key__gte=min_driver_key_for_cuda("12.4", toolkits)``.
        ``drivers_supporting_cuda_min_key`` is the same function.
    ``max_cuda_for_driver(driver_version, toolkits, *, allow_minor_compat=False) -> str | None``

Compute capability ↔ CUDA
    ``min_cuda_for_compute_capability(cc) -> str | None`` (Blackwell 10.0/12.0 ⇒ 12.8, 10.3 ⇒ 12.9)
    ``check_cuda_for_compute_capability(cuda_version, cc) -> Check`` (also: CUDA 13 dropped ≤ 7.2)

Precision
    ``normalize_precision(name) -> str`` (``"fp8_e4m3"`` → ``"fp8"``, ``"bfloat16"`` → ``"bf16"``)
    ``supports_precision(precisions, precision, *, fnuz_counts_as_fp8=True) -> bool``
    ``check_precision(precisions, precision) -> Check``
    ``cc_supports_precision(cc, precision) -> bool`` (bf16/tf32 ⇒ CC ≥ 8.0, fp8 ⇒ ≥ 8.9, fp4/fp6 ⇒ ≥ 10.0)

Kernels and frameworks
    ``check_flash_attention(version, *, compute_capability=None, gfx_target=None, cuda_version=None)``
        ``-> Check``.
        FA2 ⇒ CC ≥ 8.0 (or ROCm gfx90a/gfx942/gfx950/gfx11xx/gfx12xx); FA3 ⇒ CC 9.0 and CUDA ≥ 12.3.
    ``check_vllm(compute_capability, *, legacy=False) -> Check`` (CC ≥ 7.5; 7.0 for releases ≤ v0.14)
    ``wheel_supports_compute_capability(wheel, cc) -> bool``
    ``pytorch_wheels_for(cc, driver_version, wheels, toolkits, *, cpu_architecture="x86_64",
        allow_minor_compat=True) -> list[Wheel]`` — best first (newest torch, then newest CUDA)
    ``select_pytorch_wheel(...same...) -> Wheel | None``
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .units import UnitError, version_key

__all__ = [
    "FAMILY_MINOR_COMPAT_FLOORS",
    "Check",
    "CompatError",
    "ComputeCapability",
    "CudaSupport",
    "Toolkit",
    "Wheel",
    "cc_supports_precision",
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
    "wheel_supports_compute_capability",
]


class CompatError(ValueError):
    """A version, capability or precision that cannot be read; the message names what was expected."""


# --------------------------------------------------------------------------------------------------
# Value types


@dataclass(frozen=True)
class Check:
    """A verdict and its reason (``reason`` is written for a person: what is needed and what was found)."""

    ok: bool
    reason: str

    def __bool__(self) -> bool:
        return self.ok


class CudaSupport(enum.Enum):
    FULL = "full"  # driver ≥ the toolkit's own driver (Table 3): every feature, PTX JIT included
    MINOR_COMPAT = "minor_compat"  # driver ≥ the family floor (Table 2): prebuilt binaries only
    NONE = "none"


@dataclass(frozen=True, order=True)
class ComputeCapability:
    """An NVIDIA compute capability; ``suffix`` is ``a`` (arch-specific, e.g. sm_90a) or ``f`` (family)."""

    major: int
    minor: int
    suffix: str = ""

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}{self.suffix}"

    @property
    def pair(self) -> tuple[int, int]:
        return (self.major, self.minor)


def _get(row: Any, name: str, default: Any = None) -> Any:
    if isinstance(row, Mapping):
        return row.get(name, default)
    return getattr(row, name, default)


@dataclass(frozen=True)
class Toolkit:
    """A CUDA toolkit release and the Linux drivers it needs (versions as strings, ``>=`` allowed)."""

    version: str  # "12.4.1"
    family: str  # "12.x"
    min_driver_linux: str  # toolkit driver (Table 3): full feature set
    minor_compat_min_driver_linux: str = ""  # family floor (Table 2); "" = use FAMILY_MINOR_COMPAT_FLOORS
    uncertain: bool = False

    @classmethod
    def from_row(cls, row: Any) -> Toolkit:
        return cls(
            version=str(_get(row, "version")),
            family=str(_get(row, "family", "") or ""),
            min_driver_linux=str(_get(row, "min_driver_linux")),
            minor_compat_min_driver_linux=str(_get(row, "minor_compat_min_driver_linux", "") or ""),
            uncertain=bool(_get(row, "uncertain", False)),
        )

    @property
    def key(self) -> int:
        return version_key(self.version)

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    @property
    def driver_key(self) -> int:
        return version_key(self.min_driver_linux)


@dataclass(frozen=True)
class Wheel:
    """A PyTorch wheel variant and the compute capabilities it ships SASS for."""

    torch_versions: str  # "2.12-2.14" or "2.8"
    variant: str  # "cu128"; "cu130-aarch64" for the aarch64 build
    cuda_version: str  # "12.8"
    compute_capabilities: tuple[str, ...]  # ("7.5", "8.0", ...)
    # PTX of the newest arch is embedded: JIT on newer GPUs (which needs full driver support)
    embeds_ptx: bool = False

    @classmethod
    def from_row(cls, row: Any) -> Wheel:
        return cls(
            torch_versions=str(_get(row, "torch_versions")),
            variant=str(_get(row, "variant")),
            cuda_version=str(_get(row, "cuda_version")),
            compute_capabilities=tuple(str(c) for c in (_get(row, "compute_capabilities") or ())),
            embeds_ptx=bool(_get(row, "embeds_ptx", False)),
        )

    @property
    def cpu_architecture(self) -> str:
        return "aarch64" if self.variant.endswith("-aarch64") else "x86_64"

    @property
    def torch_range(self) -> tuple[int, int]:
        """(first, last) torch version as version keys: ``"2.12-2.14"`` → (key 2.12, key 2.14)."""
        low, _, high = self.torch_versions.partition("-")
        return version_key(low), version_key(high or low)

    def __str__(self) -> str:
        return f"torch {self.torch_versions}+{self.variant}"


# --------------------------------------------------------------------------------------------------
# Parsing

# Table 2, minor-version compatibility floors per family (Linux). 13.x: any R580 driver; 12.x: the 12.0 GA
# driver; 11.x: the Tesla Recommended Driver 450.80.02 (NVIDIA CUDA Toolkit Release Notes, Table 2).
FAMILY_MINOR_COMPAT_FLOORS: dict[int, str] = {13: "580", 12: "525.60.13", 11: "450.80.02"}

_CU_TAG = re.compile(r"^cu(?P<digits>\d{3,4})(?:-.*)?$", re.ASCII)
_CUDA = re.compile(r"^(?P<parts>\d{1,3}(?:\.\d{1,3}){1,2})$", re.ASCII)
_CC = re.compile(r"^\s*(?:sm_?)?(?P<major>\d{1,2})\.?(?P<minor>\d)(?P<suffix>[af]?)\s*$", re.ASCII)


def parse_cuda_version(text: str) -> str:
    """``"12.4"`` → ``"12.4"``; ``"cu124"`` → ``"12.4"``; ``"cu130-aarch64"`` → ``"13.0"``.

    The result is normalized, ``MAJOR.MINOR[.PATCH]`` in plain digits (``"12.04"`` → ``"12.4"``), so callers
    may split it; anything else (``"v12.4"``, ``">=12.4"``, ``"12"``) is a CompatError.
    """
    raw = str(text).strip().lower()
    tag = _CU_TAG.match(raw)
    if tag:
        digits = tag["digits"]
        raw = f"{digits[:-1]}.{digits[-1]}"
    match = _CUDA.match(raw)
    if not match:
        raise CompatError(f"{text!r} is not a CUDA version; expected e.g. 12.4, 12.4.1 or cu124.")
    return ".".join(str(int(part)) for part in match["parts"].split("."))


def _cuda_key(text: str) -> tuple[int, int]:
    """(major, version key) of a CUDA version string."""
    version = parse_cuda_version(text)
    return int(version.split(".")[0]), version_key(version)


def _driver_key(text: str) -> int:
    try:
        return version_key(text)
    except UnitError:
        raise CompatError(f"{text!r} is not a driver version; expected e.g. 550.54.15 or 580.95.05.") from None


def parse_compute_capability(text: str | ComputeCapability) -> ComputeCapability:
    """``"8.6"``, ``"86"``, ``"sm_90a"``, ``"9.0a"`` → ComputeCapability."""
    if isinstance(text, ComputeCapability):
        return text
    match = _CC.match(str(text))
    if not match:
        raise CompatError(f"{text!r} is not a compute capability; expected MAJOR.MINOR, e.g. 8.6, 9.0 or 10.0.")
    return ComputeCapability(int(match["major"]), int(match["minor"]), match["suffix"])


# --------------------------------------------------------------------------------------------------
# Driver ↔ CUDA


def _family_floor(major: int, toolkits: Iterable[Any]) -> str | None:
    for row in toolkits:
        toolkit = row if isinstance(row, Toolkit) else Toolkit.from_row(row)
        if toolkit.major == major and toolkit.minor_compat_min_driver_linux:
            return toolkit.minor_compat_min_driver_linux.lstrip(">= ")
    return FAMILY_MINOR_COMPAT_FLOORS.get(major)


def _toolkits(toolkits: Iterable[Any]) -> list[Toolkit]:
    return sorted((t if isinstance(t, Toolkit) else Toolkit.from_row(t) for t in toolkits), key=lambda t: t.key)


def _full_support_toolkit(cuda_key: int, toolkits: list[Toolkit]) -> Toolkit | None:
    """The earliest known release at or after the requested version: its driver runs that version fully.

    ``"12.4"`` → 12.4 GA (550.54.14); ``"12.4.1"`` → 12.4 Update 1. A version past the end of the table has
    no known toolkit driver, so only minor-version compatibility can be decided for it.
    """
    for toolkit in toolkits:
        if toolkit.key >= cuda_key:
            return toolkit
    return None


def _known_families(toolkits: list[Toolkit]) -> set[int]:
    return {t.major for t in toolkits} | set(FAMILY_MINOR_COMPAT_FLOORS)


def cuda_support(driver_version: str, cuda_version: str, toolkits: Iterable[Any]) -> CudaSupport:
    """How a host driver runs a CUDA version: FULL, MINOR_COMPAT or NONE.

    535.247.01 + 12.2 → FULL (≥ 535.54.03); 535.247.01 + 12.4 → MINOR_COMPAT (≥ 525.60.13);
    535.247.01 + 13.0 → NONE (13.x needs ≥ 580).
    """
    rows = _toolkits(toolkits)
    major, cuda_key = _cuda_key(cuda_version)
    if major not in _known_families(rows):
        raise CompatError(
            f"CUDA {cuda_version}: unknown major version; the toolkit table covers "
            f"{', '.join(f'{m}.x' for m in sorted(_known_families(rows)))}."
        )
    driver_key = _driver_key(driver_version)
    full = _full_support_toolkit(cuda_key, rows)
    if full is not None and driver_key >= full.driver_key:
        return CudaSupport.FULL
    floor = _family_floor(major, rows)
    if floor is not None and driver_key >= version_key(floor):
        return CudaSupport.MINOR_COMPAT
    return CudaSupport.NONE


def driver_supports_cuda(
    driver_version: str, cuda_version: str, toolkits: Iterable[Any], *, allow_minor_compat: bool = True
) -> bool:
    """True when the driver runs binaries built with that CUDA version (minor compat counts by default,
    as it does for prebuilt wheels that bundle their CUDA runtime)."""
    support = cuda_support(driver_version, cuda_version, toolkits)
    return support is CudaSupport.FULL or (allow_minor_compat and support is CudaSupport.MINOR_COMPAT)


def min_driver_for_cuda(cuda_version: str, toolkits: Iterable[Any], *, allow_minor_compat: bool = True) -> str:
    """The lowest Linux driver that supports the CUDA version (``"12.4"`` → ``"525.60.13"`` with minor
    compat, ``"550.54.14"`` without)."""
    rows = _toolkits(toolkits)
    major, cuda_key = _cuda_key(cuda_version)
    if major not in _known_families(rows):
        raise CompatError(
            f"CUDA {cuda_version}: unknown major version; the toolkit table covers "
            f"{', '.join(f'{m}.x' for m in sorted(_known_families(rows)))}."
        )
    full = _full_support_toolkit(cuda_key, rows)
    candidates: list[str] = []
    if full is not None:
        candidates.append(full.min_driver_linux.lstrip(">= "))
    if allow_minor_compat:
        floor = _family_floor(major, rows)
        if floor is not None:
            candidates.append(floor)
    if not candidates:
        newest = rows[-1].version if rows else "none"
        raise CompatError(
            f"CUDA {cuda_version}: no toolkit driver is known (the table ends at {newest}); "
            "allow minor-version compatibility or give a listed version."
        )
    return min(candidates, key=version_key)


def min_driver_key_for_cuda(cuda_version: str, toolkits: Iterable[Any], *, allow_minor_compat: bool = True) -> int:
    """:func:`min_driver_for_cuda` as a ``version_key``, for ``driver_version_key__gte`` filters."""
    return version_key(min_driver_for_cuda(cuda_version, toolkits, allow_minor_compat=allow_minor_compat))


drivers_supporting_cuda_min_key = min_driver_key_for_cuda


def max_cuda_for_driver(
    driver_version: str, toolkits: Iterable[Any], *, allow_minor_compat: bool = False
) -> str | None:
    """The newest toolkit version the driver runs: fully by default (what ``nvidia-smi`` reports), or
    through minor-version compatibility (the newest release of every family whose floor it meets)."""
    rows = _toolkits(toolkits)
    driver_key = _driver_key(driver_version)
    best: Toolkit | None = None
    for toolkit in rows:
        ok = driver_key >= toolkit.driver_key
        if not ok and allow_minor_compat:
            floor = _family_floor(toolkit.major, rows)
            ok = floor is not None and driver_key >= version_key(floor)
        if ok and (best is None or toolkit.key > best.key):
            best = toolkit
    return best.version if best else None


# --------------------------------------------------------------------------------------------------
# Compute capability ↔ CUDA

# First CUDA toolkit that supports a compute capability (cuda_driver.json first_toolkit_supporting_...):
# NVIDIA forum "minimum required CUDA version by GPU"; Blackwell from vLLM docs / flash-attention setup.py.
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
    major, cuda_key = _cuda_key(cuda_version)
    first = min_cuda_for_compute_capability(capability)
    if first is not None and cuda_key < version_key(first):
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


# --------------------------------------------------------------------------------------------------
# Precision

CANONICAL_PRECISIONS: tuple[str, ...] = (
    "fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp8_fnuz", "mxfp8", "fp6", "fp4", "int8", "int4",
)  # fmt: skip

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


def normalize_precision(name: str) -> str:
    """A precision name as the catalog spells it (``"fp8_e4m3"`` → ``"fp8"``)."""
    key = str(name).strip().lower()
    key = PRECISION_ALIASES.get(key, key)
    if key not in CANONICAL_PRECISIONS:
        raise CompatError(f"unknown precision {name!r}; expected one of {', '.join(CANONICAL_PRECISIONS)}.")
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
        "fp64": c in {(8, 0), (9, 0)} or c[0] == 10,  # FP64 tensor cores: GA100, GH100, GB100-class
        "fp32": False,  # NVIDIA tensor cores take fp32 input as tf32
        "fp8_fnuz": False,  # AMD CDNA3 only
    }
    return rules[p]


# --------------------------------------------------------------------------------------------------
# Kernels and frameworks

# flash-attention setup.py allowed_archs for the ROCm CK/Triton backends.
_FA2_ROCM_TARGETS = re.compile(r"^gfx(90a|942|950|11\d\d|12\d\d)$")


def check_flash_attention(
    version: int,
    *,
    compute_capability: str | ComputeCapability | None = None,
    gfx_target: str | None = None,
    cuda_version: str | None = None,
) -> Check:
    """FlashAttention 2 or 3 on a device (Dao-AILab/flash-attention README and setup.py).

    FA2: NVIDIA CC ≥ 8.0 (Ampere, Ada, Hopper, Blackwell; Turing only through a separate fork), CUDA ≥ 12.0
    (README), Blackwell builds need CUDA ≥ 12.8; AMD gfx90a/gfx942/gfx950/gfx11xx/gfx12xx (ROCm ≥ 6.0).
    FA3: Hopper (CC 9.0) and CUDA ≥ 12.3.
    """
    if version not in (2, 3):
        raise CompatError(f"FlashAttention version {version!r}: expected 2 or 3.")
    if compute_capability is None:
        if gfx_target is None:
            raise CompatError("give compute_capability (NVIDIA) or gfx_target (AMD).")
        if version == 3:
            return Check(False, f"FlashAttention-3 targets Hopper (sm_90); {gfx_target} is not supported")
        if _FA2_ROCM_TARGETS.match(gfx_target.strip().lower()):
            return Check(True, f"FlashAttention-2 has a ROCm backend for {gfx_target}")
        return Check(
            False,
            f"FlashAttention-2's ROCm backends support gfx90a, gfx942, gfx950, gfx11xx, gfx12xx, not {gfx_target}",
        )

    cc = parse_compute_capability(compute_capability)
    label = f"{cc.major}.{cc.minor}"
    cuda_key = _cuda_key(cuda_version)[1] if cuda_version else None
    if version == 3:
        if cc.pair != (9, 0):
            return Check(False, f"FlashAttention-3 needs Hopper (compute capability 9.0), not {label}")
        if cuda_key is not None and cuda_key < version_key("12.3"):
            return Check(False, f"FlashAttention-3 needs CUDA ≥ 12.3, not {cuda_version}")
        return Check(True, "FlashAttention-3 supports Hopper (CUDA ≥ 12.3; 12.8 recommended)")
    if cc.pair < (8, 0):
        return Check(False, f"FlashAttention-2 needs compute capability ≥ 8.0 (Ampere or newer), not {label}")
    if cuda_key is not None:
        if cuda_key < version_key("12.0"):
            return Check(False, f"FlashAttention-2 needs CUDA ≥ 12.0, not {cuda_version}")
        if cc.major >= 10 and cuda_key < version_key("12.8"):
            return Check(False, f"FlashAttention-2 on Blackwell ({label}) needs CUDA ≥ 12.8, not {cuda_version}")
    return Check(True, f"FlashAttention-2 supports compute capability {label}")


def check_vllm(compute_capability: str | ComputeCapability, *, legacy: bool = False) -> Check:
    """vLLM's CUDA builds: CC ≥ 7.5 in current docs, ≥ 7.0 up to v0.14 (``legacy=True``)."""
    cc = parse_compute_capability(compute_capability)
    floor = (7, 0) if legacy else (7, 5)
    if cc.pair < floor:
        return Check(False, f"vLLM needs compute capability ≥ {floor[0]}.{floor[1]}, not {cc.major}.{cc.minor}")
    return Check(True, f"vLLM supports compute capability {cc.major}.{cc.minor}")


# SASS for X.Y runs on X.Z with Z ≥ Y, except these (PyTorch's own warning text, quoted in vLLM PR #39878:
# "8.0 ... supports hardware CC >=8.0,<9.0 except {8.7}", "10.0 ... >=10.0,<11.0 except {10.1}").
_IN_MAJOR_EXCEPTIONS: dict[tuple[int, int], set[tuple[int, int]]] = {(8, 0): {(8, 7)}, (10, 0): {(10, 1)}}


def _sass_runs_on(binary: ComputeCapability, device: ComputeCapability) -> bool:
    if binary.suffix == "a":  # arch-specific targets run on that exact architecture only
        return binary.pair == device.pair
    if binary.major != device.major or binary.minor > device.minor:
        return False
    return device.pair not in _IN_MAJOR_EXCEPTIONS.get(binary.pair, set())


def _wheel_reaches(wheel: Wheel, cc: ComputeCapability) -> tuple[bool, bool]:
    """(reaches the GPU at all, only through PTX JIT)."""
    binaries = [parse_compute_capability(c) for c in wheel.compute_capabilities]
    if any(_sass_runs_on(b, cc) for b in binaries):
        return True, False
    if wheel.embeds_ptx and binaries and cc.pair >= max(b.pair for b in binaries):
        return True, True
    return False, False


def wheel_supports_compute_capability(wheel: Wheel, cc: str | ComputeCapability) -> bool:
    """Does the wheel run on the GPU: SASS within the same major (forward in minor, with PyTorch's
    exceptions 8.7 and 10.1), or embedded PTX of an older-or-equal arch?"""
    return _wheel_reaches(wheel, parse_compute_capability(cc))[0]


def pytorch_wheels_for(
    cc: str | ComputeCapability,
    driver_version: str,
    wheels: Iterable[Any],
    toolkits: Iterable[Any],
    *,
    cpu_architecture: str = "x86_64",
    allow_minor_compat: bool = True,
) -> list[Wheel]:
    """Wheel variants that run on this GPU with this host driver, best first (newest torch, newest CUDA).

    A wheel qualifies when its arch list reaches the GPU, its CUDA version targets the GPU (Blackwell ⇒
    cu128+), the driver runs its CUDA (cu13x ⇒ ≥ 580; cu12x ⇒ ≥ 525.60.13 through minor compat), and it is
    built for the host's CPU architecture. A GPU reached only through PTX JIT needs full driver support.
    """
    capability = parse_compute_capability(cc)
    rows = _toolkits(toolkits)
    chosen: list[Wheel] = []
    for row in wheels:
        wheel = row if isinstance(row, Wheel) else Wheel.from_row(row)
        if wheel.cpu_architecture != cpu_architecture:
            continue
        reaches, via_ptx = _wheel_reaches(wheel, capability)
        if not reaches or not check_cuda_for_compute_capability(wheel.cuda_version, capability):
            continue
        support = cuda_support(driver_version, wheel.cuda_version, rows)
        if support is CudaSupport.NONE:
            continue
        if support is CudaSupport.MINOR_COMPAT and (via_ptx or not allow_minor_compat):
            continue
        chosen.append(wheel)
    chosen.sort(key=lambda w: (w.torch_range[1], version_key(w.cuda_version)), reverse=True)
    return chosen


def select_pytorch_wheel(
    cc: str | ComputeCapability,
    driver_version: str,
    wheels: Iterable[Any],
    toolkits: Iterable[Any],
    *,
    cpu_architecture: str = "x86_64",
    allow_minor_compat: bool = True,
) -> Wheel | None:
    """The best wheel from :func:`pytorch_wheels_for`, or None when no listed wheel runs there."""
    found = pytorch_wheels_for(
        cc,
        driver_version,
        wheels,
        toolkits,
        cpu_architecture=cpu_architecture,
        allow_minor_compat=allow_minor_compat,
    )
    return found[0] if found else None
