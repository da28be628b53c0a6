"""What the KV-pool benchmarks share (vLLM's start-up reports here, SGLang's in ``benchmarks.sglang_published``): the
target and the error of one record's pool."""

from __future__ import annotations

from typing import Any

TARGET_GIB = 1.0
TARGET_PCT = 3.0


def fmt(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def pool_error(row: dict[str, Any], engine_gib: float, printed_gib: float) -> None:
    """The engine's pool against the printed one, into ``row``: error in GiB and %, and within max(1 GiB, 3 %)."""
    err = engine_gib - printed_gib
    row["error_gib"] = err
    row["error_pct"] = 100 * err / abs(printed_gib) if printed_gib else None
    row["within"] = abs(err) <= TARGET_GIB or (row["error_pct"] is not None and abs(row["error_pct"]) <= TARGET_PCT)
