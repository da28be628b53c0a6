"""Multimodal towers (vision/audio encoders and their projectors): counted in the weights."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Towers:
    params: int
    note: str


def count_towers(config: Mapping[str, Any], model_type: str) -> Towers | None:
    return None
