"""PyTorch wheels that include the GPU's compute capability (``research/catalog-and-compat.md`` §B4).

SASS for X.Y runs on X.Z with Z ≥ Y, except where PyTorch says otherwise; arch-specific targets
(``9.0a``) run on that architecture only; embedded PTX reaches newer GPUs through JIT.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..units import version_key
from .base import ComputeCapability, Reason, cuda_key, cuda_minor, get_field, parse_compute_capability
from .cuda_arch import check_cuda_for_compute_capability
from .driver import CudaSupport, cuda_support, toolkit_table

if TYPE_CHECKING:
    from .configuration import Facts, Requirements


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
        """From a mapping (``PyTorchWheel.objects.values(...)``) or anything with those attributes."""
        return cls(
            torch_versions=str(get_field(row, "torch_versions")),
            variant=str(get_field(row, "variant")),
            cuda_version=str(get_field(row, "cuda_version")),
            compute_capabilities=tuple(str(c) for c in (get_field(row, "compute_capabilities") or ())),
            embeds_ptx=bool(get_field(row, "embeds_ptx", False)),
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


def _as_wheel(row: Any) -> Wheel:
    return row if isinstance(row, Wheel) else Wheel.from_row(row)


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
    rows = toolkit_table(toolkits)
    chosen: list[Wheel] = []
    for wheel in map(_as_wheel, wheels):
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
    chosen.sort(key=_newest_first_key, reverse=True)
    return chosen


def _newest_first_key(wheel: Wheel) -> tuple[int, int]:
    return wheel.torch_range[1], version_key(wheel.cuda_version)


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
        cc, driver_version, wheels, toolkits, cpu_architecture=cpu_architecture, allow_minor_compat=allow_minor_compat
    )
    return found[0] if found else None


def wheels_for_cuda(cuda_version: str, wheels: Iterable[Any], *, cpu_architecture: str) -> list[Wheel]:
    """Wheels a CUDA ``cuda_version`` stack can use: the same CUDA major, built with that version or an
    older one (a newer toolkit driver runs them), for the host's CPU architecture; newest first."""
    major, wanted = cuda_key(cuda_version)
    usable = [
        wheel
        for wheel in map(_as_wheel, wheels)
        if wheel.cpu_architecture == cpu_architecture and cuda_key(wheel.cuda_version)[0] == major
        and cuda_key(wheel.cuda_version)[1] <= wanted
    ]  # fmt: skip
    return sorted(usable, key=_newest_first_key, reverse=True)


def _nearest_wheel_with(
    cc: ComputeCapability, cuda_version: str, wheels: Iterable[Any], *, cpu_architecture: str
) -> Wheel | None:
    """The wheel including ``cc`` whose CUDA is the smallest change from ``cuda_version``: the oldest CUDA
    at or above it (newest torch first), else the newest below it."""
    including = [
        w for w in map(_as_wheel, wheels)
        if w.cpu_architecture == cpu_architecture and wheel_supports_compute_capability(w, cc)
    ]  # fmt: skip
    wanted = cuda_key(cuda_version)[1]
    above = sorted(
        (w for w in including if version_key(w.cuda_version) >= wanted),
        key=lambda w: (version_key(w.cuda_version), -w.torch_range[1]),
    )
    below = sorted((w for w in including if version_key(w.cuda_version) < wanted), key=_newest_first_key)
    return above[0] if above else (below[-1] if below else None)


def check_wheels(requirements: Requirements, facts: Facts) -> list[Reason]:
    """Some PyTorch wheel the workload's CUDA version can use must include the GPU's compute capability."""
    cc = facts.compute_capability
    if requirements.cuda_version is None or cc is None or not facts.wheels:
        return []
    arch = facts.host_cpu_architecture
    candidates = wheels_for_cuda(requirements.cuda_version, facts.wheels, cpu_architecture=arch)
    if any(wheel_supports_compute_capability(w, cc) for w in candidates):
        return []
    nearest = _nearest_wheel_with(cc, requirements.cuda_version, facts.wheels, cpu_architecture=arch)
    cuda = cuda_minor(requirements.cuda_version)
    message = f"no listed PyTorch wheel for CUDA ≤ {cuda} ({arch}) includes compute capability {cc.major}.{cc.minor}"
    if nearest:
        action = f"set runtime.cuda_version to {cuda_minor(nearest.cuda_version)} ({nearest} includes it)"
    else:
        action = f"no listed {arch} wheel includes it: build PyTorch from source for sm_{cc.major}{cc.minor}"
    return [Reason("wheels", f"{facts.label}: {message}", action)]
