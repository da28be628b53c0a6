"""Memory quantities and version strings: parsed once, compared as integers. Pure Python.

GB/MB/KB/TB are decimal (1e9 B), GiB/MiB/KiB/TiB binary (2**30 B); a number without a unit is bytes.
"""

from __future__ import annotations

import re

#: Hours in a month, as the AWS Pricing Calculator counts them: "The Calculator assumes 730 hours in a month,
#: (365 days in a year x 24 hours in a day / 12 months in year)" (https://aws.amazon.com/calculator/calculator-assumptions).
HOURS_PER_MONTH = 730

UNITS: dict[str, int] = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
MEMORY_HELP = "a number of bytes, or a number with a unit: B, KB, MB, GB, TB (decimal) or KiB, MiB, GiB, TiB (binary)"
MAX_MEMORY_BYTES = 2**60  # no single quantity in this domain comes close to an exbibyte

# Bounded, ASCII-only digit runs: int() of an unbounded run raises ValueError past 4300 digits, and \d
# would otherwise accept non-ASCII digits ("²") that int() cannot read.
_MEMORY = re.compile(r"^\s*(?P<number>\d{1,20}(?:\.\d{1,20})?)\s*(?P<unit>[a-zA-Z]*)\s*$", re.ASCII)
_VERSION = re.compile(r"^\s*[vR]?(?P<parts>\d{1,9}(?:\.\d{1,9}){0,3})\s*$", re.ASCII)
_DRIVER_BRANCH = re.compile(r"R?(?P<branch>\d{1,4})", re.ASCII)
DRIVER_BRANCH_SPAN = 10**9  # version_key of N.x.y.z lies in [N * SPAN, (N + 1) * SPAN)


class UnitError(ValueError):
    """A quantity that cannot be read; the message says what was expected."""


def parse_memory(text: str) -> int:
    """``"80GB"`` → 80_000_000_000; ``"79GiB"`` → 84_825_604_096; ``"1024"`` → 1024."""
    match = _MEMORY.match(str(text))
    if not match:
        raise UnitError(f"{text!r} is not a memory size; expected {MEMORY_HELP}, e.g. 80GB, 79GiB or 81920MiB.")
    unit = match["unit"].lower() or "b"
    if unit not in UNITS:
        raise UnitError(f"unknown unit {match['unit']!r}; expected one of B, KB, MB, GB, TB, KiB, MiB, GiB, TiB.")
    number = match["number"]
    # Exact arithmetic: "79.5GiB" must not lose bytes to float rounding.
    whole, _, frac = number.partition(".")
    scale: int = 10 ** len(frac)  # int ** int is Any to mypy (a negative exponent gives a float)
    value = (int(whole) * scale + int(frac or 0)) * UNITS[unit] // scale
    if value > MAX_MEMORY_BYTES:
        raise UnitError(f"{text!r} is larger than any device or host memory (limit 1 EiB).")
    return value


def parse_device_memory(text: str) -> int:
    """`parse_memory` for a device's memory: a bare number below 1 MiB (``"80"``) is refused with the units it probably
    meant, since no device has that little memory and 80 bytes is never what was asked."""
    value = parse_memory(text)
    bare = str(text).strip()
    if bare.isdecimal() and value < 2**20:
        raise UnitError(
            f"{text!r} without a unit is read as {value} bytes, less than any device's memory; give a unit,"
            f" e.g. {bare}GB or {bare}GiB"
        )
    return value


def format_bytes(value: int) -> str:
    """``80_000_000_000`` → ``"80.0 GB (74.5 GiB)"``: both conventions, always labelled."""
    return f"{value / 1e9:.1f} GB ({value / 2**30:.1f} GiB)"


def version_key(text: str) -> int:
    """A driver or toolkit version as a comparable integer: ``"550.54.15"`` → 550_054_015_000.

    Up to four dot-separated parts, each below 1000; ``"12.4"`` and ``"12.4.0"`` compare equal.
    Leading ``>=``, ``v`` or ``R`` (driver branch) are accepted.
    """
    cleaned = str(text).strip().lstrip(">=").strip()
    cleaned = cleaned.split(" ", 1)[0]
    match = _VERSION.match(cleaned)
    if not match:
        raise UnitError(f"{text!r} is not a version; expected numbers separated by dots, e.g. 12.4 or 550.54.15.")
    parts = [int(p) for p in match["parts"].split(".")]
    if any(p >= 1000 for p in parts):
        raise UnitError(f"{text!r}: each version part must be below 1000.")
    parts += [0] * (4 - len(parts))
    key = 0
    for part in parts:
        key = key * 1000 + part
    return key


def driver_branch(version: str | None) -> int | None:
    """The NVIDIA driver branch of a version: ``"550.54.15"`` → 550, ``"R550"`` → 550; None when blank or unreadable.

    The branch is the first part of :func:`version_key`, so configurations of branch N are exactly those with
    ``N * DRIVER_BRANCH_SPAN <= driver_version_key < (N + 1) * DRIVER_BRANCH_SPAN`` (see
    :func:`driver_branch_key_range`).
    """
    if not version or not str(version).strip():
        return None
    try:
        return version_key(version) // DRIVER_BRANCH_SPAN
    except UnitError:
        return None


def parse_driver_branch(text: str) -> int:
    """A branch as a person writes it, ``"R550"`` or ``"550"`` → 550; anything else is a UnitError."""
    match = _DRIVER_BRANCH.fullmatch(str(text).strip().upper())
    if not match:
        raise UnitError(f"{text!r} is not a driver branch; expected e.g. R550 or 550.")
    return int(match["branch"])


def driver_branch_key_range(branch: int) -> tuple[int, int]:
    """``[low, high)`` of the version keys in driver branch ``branch`` (550 → [550·10⁹, 551·10⁹))."""
    return branch * DRIVER_BRANCH_SPAN, (branch + 1) * DRIVER_BRANCH_SPAN
