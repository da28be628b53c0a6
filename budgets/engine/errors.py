"""Validation errors as {dotted field path: [messages]} with the allowed values or range."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

_RANGE_KEYS = (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"))


def _path(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if not (isinstance(p, str) and ("[" in p or p.startswith("function-")))]
    return ".".join(parts) or "__root__"


def _message(err: Any) -> str:
    msg = str(err.get("msg", "invalid"))
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    ctx = err.get("ctx") or {}
    etype = err.get("type", "")
    if etype == "extra_forbidden":
        return "unknown field (not part of the workload schema)"
    if etype == "literal_error" and "expected" in ctx:
        return f"{msg} (allowed: {ctx['expected']})"
    bounds = [f"{sym} {ctx[k]}" for k, sym in _RANGE_KEYS if k in ctx]
    if bounds:
        return f"{msg} (allowed: {', '.join(bounds)})"
    return msg


def validation_errors(exc: ValidationError) -> dict[str, list[str]]:
    """Map each invalid field ("inference.concurrent_sessions") to messages naming what is allowed."""
    out: dict[str, list[str]] = {}
    for err in exc.errors():
        path = _path(tuple(err.get("loc", ())))
        out.setdefault(path, []).append(f"{path}: {_message(err)}")
    return out
