"""Model presets: `fixtures/model_presets.json` (or $VRAMPLAN_FIXTURES_DIR), each a verbatim HF config
resolved to a `ModelSpec` once."""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from .hf_config import from_hf_config
from .spec import ModelSpec


@dataclass(frozen=True, slots=True)
class Preset:
    id: str
    display_name: str
    hf_repo: str
    source: str
    config_verbatim_status: str
    config: Mapping[str, Any]
    parameter_count: int  # exact, measured on the meta device (tied counted once)
    spec: ModelSpec


#: The repository's fixtures, resolved once (``Path.resolve`` costs a few system calls, and presets are looked up
#: on every budget and launch).
_REPOSITORY_FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"


def _fixtures_dir() -> Path:
    override = os.environ.get("VRAMPLAN_FIXTURES_DIR")
    if override:
        return Path(override)
    return _REPOSITORY_FIXTURES


@lru_cache(maxsize=8)
def _load_presets_from(path: str) -> dict[str, Preset]:
    with open(path, encoding="utf-8") as fh:
        raw = json.load(fh)
    entries = raw["presets"] if isinstance(raw, dict) else raw
    out: dict[str, Preset] = {}
    for entry in entries:
        out[entry["id"]] = Preset(
            id=entry["id"],
            display_name=entry.get("display_name", entry["id"]),
            hf_repo=entry.get("hf_repo", ""),
            source=entry.get("source", ""),
            config_verbatim_status=entry.get("config_verbatim_status", ""),
            config=entry["config"],
            parameter_count=int(entry["parameter_count"]),
            # preset configs are stored without token ids: an unknown eos token is taken as present, which
            # budgets the higher sampling instant (transformers' eos-suppressing processors)
            spec=replace(from_hf_config(entry["config"]), eos_token=True),
        )
    return out


def load_presets() -> dict[str, Preset]:
    """Presets from `fixtures/model_presets.json` (or $VRAMPLAN_FIXTURES_DIR), parsed once."""
    return _load_presets_from(str(_fixtures_dir() / "model_presets.json"))


def close_preset_ids(name: str, n: int = 5) -> list[str]:
    ids = list(load_presets())
    close = difflib.get_close_matches(name.lower(), ids, n=n, cutoff=0.4)
    if not close:
        close = [i for i in ids if name.lower().split("-")[0] in i][:n]
    return close
