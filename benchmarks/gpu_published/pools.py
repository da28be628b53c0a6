"""What the KV-pool benchmarks share (vLLM's start-up reports here, SGLang's in ``benchmarks.sglang_published``): the
target and the error of one record's pool."""

from __future__ import annotations

from typing import Any

from budgets.engine import Workload

TARGET_GIB = 1.0
TARGET_PCT = 3.0


def startup_workload(
    name: str,
    model: dict[str, Any],
    precision: dict[str, Any] | None,
    tensor: int,
    context: int,
    inference: dict[str, Any],
    runtime: dict[str, Any] | None = None,
) -> Workload:
    """The workload a start-up log stands for: one request of the context length the engine was started with, its
    settings in ``inference`` (engine included); ``precision`` None: the checkpoint's own, else the defaults."""
    spec: dict[str, Any] = {
        "name": name,
        "task": "inference",
        "model": model,
        "inference": {"max_input_tokens": context - 1, "max_output_tokens": 1, "max_model_len": context, **inference},
        "parallelism": {"tensor": tensor},
        "runtime": runtime or {},
    }
    if precision is not None:
        spec["precision"] = precision
    return Workload.model_validate(spec)


def fmt(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def pool_error(row: dict[str, Any], engine_gib: float, printed_gib: float) -> None:
    """The engine's pool against the printed one, into ``row``: error in GiB and %, and within max(1 GiB, 3 %)."""
    err = engine_gib - printed_gib
    row["error_gib"] = err
    row["error_pct"] = 100 * err / abs(printed_gib) if printed_gib else None
    row["within"] = abs(err) <= TARGET_GIB or (row["error_pct"] is not None and abs(row["error_pct"]) <= TARGET_PCT)
