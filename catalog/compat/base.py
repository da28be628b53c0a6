"""What every rule family shares: the error, the verdict types and the parsing of versions and capabilities."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..units import UnitError, version_key


class CompatError(ValueError):
    """A version, capability or precision that cannot be read; the message names what was expected."""


@dataclass(frozen=True)
class Check:
    """A verdict and its reason (``reason`` is written for a person: what is needed and what was found)."""

    ok: bool
    reason: str

    def __bool__(self) -> bool:
        return self.ok


@dataclass(frozen=True)
class Reason:
    """One failed rule, for a person: which rule, what is wrong, and what to do about it."""

    rule: str  # "precision", "driver", "cuda_arch", "wheels", "flash_attention", "vllm", "host", "device"
    message: str  # "driver 535.247.01 supports CUDA ≤ 12.2; this workload needs 12.8"
    action: str  # "upgrade the driver to ≥ 570.26"


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


def get_field(row: Any, name: str, default: Any = None) -> Any:
    """``row[name]`` for a mapping (``.values()`` rows), ``row.name`` for anything else (model instances)."""
    if isinstance(row, Mapping):
        return row.get(name, default)
    return getattr(row, name, default)


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


def cuda_key(text: str) -> tuple[int, int]:
    """(major, version key) of a CUDA version string."""
    version = parse_cuda_version(text)
    return int(version.split(".")[0]), version_key(version)


def cuda_minor(text: str) -> str:
    """``"12.4.1"`` → ``"12.4"``: the release family a person names."""
    return ".".join(parse_cuda_version(text).split(".")[:2])


def driver_key(text: str) -> int:
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
