"""Helpers for tests that change one field of a JSON document."""

from __future__ import annotations

import json
from typing import Any


def with_value(document: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of `document` with the dotted `path` set to `value`."""
    out = json.loads(json.dumps(document))
    *parents, last = path.split(".")
    target = out
    for key in parents:
        target = target[key]
    target[last] = value
    return out
