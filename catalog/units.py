"""Memory quantities and version strings: parsed once, compared as integers. Pure Python.

GB/MB/KB/TB are decimal (1e9 B), GiB/MiB/KiB/TiB binary (2**30 B); a number without a unit is bytes.
"""

from __future__ import annotations

import re

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

_MEMORY = re.compile(r"^\s*(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[a-zA-Z]*)\s*$")
_VERSION = re.compile(r"^\s*[vR]?(?P<parts>\d+(?:\.\d+){0,3})\s*$")


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
    scale = 10 ** len(frac)
    value = (int(whole) * scale + int(frac or 0)) * UNITS[unit] // scale
    if value > MAX_MEMORY_BYTES:
        raise UnitError(f"{text!r} is larger than any device or host memory (limit 1 EiB).")
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
