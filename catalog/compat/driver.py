"""Installed driver ↔ the CUDA version a workload needs (NVIDIA CUDA Toolkit Release Notes, Tables 2 and 3).

Two floors: the toolkit's own driver (Table 3: the full feature set, PTX JIT included) and the family floor
for minor-version compatibility (Table 2: prebuilt binaries only; 13.x ≥ 580, 12.x ≥ 525.60.13, 11.x ≥
450.80.02). Sources: ``research/catalog-and-compat.md`` §B1 and ``data/cuda_driver.json``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..units import version_key
from .base import CompatError, Reason, cuda_key, cuda_minor, driver_key, get_field

if TYPE_CHECKING:
    from .configuration import Facts, Requirements


class CudaSupport(enum.Enum):
    FULL = "full"  # driver ≥ the toolkit's own driver (Table 3): every feature, PTX JIT included
    MINOR_COMPAT = "minor_compat"  # driver ≥ the family floor (Table 2): prebuilt binaries only
    NONE = "none"


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
        """From a mapping (``CudaToolkit.objects.values(...)``) or anything with those attributes."""
        return cls(
            version=str(get_field(row, "version")),
            family=str(get_field(row, "family", "") or ""),
            min_driver_linux=str(get_field(row, "min_driver_linux")),
            minor_compat_min_driver_linux=str(get_field(row, "minor_compat_min_driver_linux", "") or ""),
            uncertain=bool(get_field(row, "uncertain", False)),
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


# Table 2, minor-version compatibility floors per family (Linux). 13.x: any R580 driver; 12.x: the 12.0 GA
# driver; 11.x: the Tesla Recommended Driver 450.80.02 (NVIDIA CUDA Toolkit Release Notes, Table 2).
FAMILY_MINOR_COMPAT_FLOORS: dict[int, str] = {13: "580", 12: "525.60.13", 11: "450.80.02"}


def _family_floor(major: int, toolkits: Iterable[Any]) -> str | None:
    for row in toolkits:
        toolkit = row if isinstance(row, Toolkit) else Toolkit.from_row(row)
        if toolkit.major == major and toolkit.minor_compat_min_driver_linux:
            return toolkit.minor_compat_min_driver_linux.lstrip(">= ")
    return FAMILY_MINOR_COMPAT_FLOORS.get(major)


def toolkit_table(toolkits: Iterable[Any]) -> list[Toolkit]:
    """Toolkits (rows or Toolkit values) sorted oldest first."""
    return sorted((t if isinstance(t, Toolkit) else Toolkit.from_row(t) for t in toolkits), key=lambda t: t.key)


def _full_support_toolkit(cuda_version_key: int, toolkits: list[Toolkit]) -> Toolkit | None:
    """The earliest known release at or after the requested version: its driver runs that version fully.

    ``"12.4"`` → 12.4 GA (550.54.14); ``"12.4.1"`` → 12.4 Update 1. A version past the end of the table has
    no known toolkit driver, so only minor-version compatibility can be decided for it.
    """
    for toolkit in toolkits:
        if toolkit.key >= cuda_version_key:
            return toolkit
    return None


def _check_family(cuda_version: str, major: int, toolkits: list[Toolkit]) -> None:
    known = {t.major for t in toolkits} | set(FAMILY_MINOR_COMPAT_FLOORS)
    if major not in known:
        raise CompatError(
            f"CUDA {cuda_version}: unknown major version; the toolkit table covers "
            f"{', '.join(f'{m}.x' for m in sorted(known))}."
        )


def cuda_support(driver_version: str, cuda_version: str, toolkits: Iterable[Any]) -> CudaSupport:
    """How a host driver runs a CUDA version: FULL, MINOR_COMPAT or NONE.

    535.247.01 + 12.2 → FULL (≥ 535.54.03); 535.247.01 + 12.4 → MINOR_COMPAT (≥ 525.60.13);
    535.247.01 + 13.0 → NONE (13.x needs ≥ 580).
    """
    rows = toolkit_table(toolkits)
    major, wanted = cuda_key(cuda_version)
    _check_family(cuda_version, major, rows)
    installed = driver_key(driver_version)
    full = _full_support_toolkit(wanted, rows)
    if full is not None and installed >= full.driver_key:
        return CudaSupport.FULL
    floor = _family_floor(major, rows)
    if floor is not None and installed >= version_key(floor):
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
    rows = toolkit_table(toolkits)
    major, wanted = cuda_key(cuda_version)
    _check_family(cuda_version, major, rows)
    full = _full_support_toolkit(wanted, rows)
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
    rows = toolkit_table(toolkits)
    installed = driver_key(driver_version)
    best: Toolkit | None = None
    for toolkit in rows:
        ok = installed >= toolkit.driver_key
        if not ok and allow_minor_compat:
            floor = _family_floor(toolkit.major, rows)
            ok = floor is not None and installed >= version_key(floor)
        if ok and (best is None or toolkit.key > best.key):
            best = toolkit
    return best.version if best else None


def check_driver(requirements: Requirements, facts: Facts) -> list[Reason]:
    """The workload's CUDA version needs the toolkit's own driver (full support).

    Minor-version compatibility is not enough here: it runs prebuilt binaries but not JIT of newer PTX
    (research §B1), and Triton and ``torch.compile`` JIT-compile — so a CUDA 12.8 workload needs ≥ 570.26.
    """
    if requirements.device != "cuda" or not facts.is_nvidia_gpu:
        return []
    if not facts.driver_version:
        return [Reason("driver", "the configuration lists no driver version", "record the installed NVIDIA driver")]
    if requirements.cuda_version is None:
        return []
    cuda = requirements.cuda_version
    if cuda_support(facts.driver_version, cuda, facts.toolkits) is CudaSupport.FULL:
        return []
    needed = min_driver_for_cuda(cuda, facts.toolkits, allow_minor_compat=False)
    newest = max_cuda_for_driver(facts.driver_version, facts.toolkits)
    supports = f"supports CUDA ≤ {cuda_minor(newest)}" if newest else "supports no listed CUDA toolkit"
    return [
        Reason(
            "driver",
            f"driver {facts.driver_version} {supports}; this workload needs {cuda_minor(cuda)}",
            f"upgrade the driver to ≥ {needed}, or set runtime.cuda_version to one it supports",
        )
    ]
