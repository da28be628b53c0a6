"""Model specifications by concern: `spec` (ModelSpec and its features, a directly given architecture),
`parameters` (exact counts), `hf_config` (the Hugging Face config adapter, with `hf_defaults`) and
`presets`. The names below are re-exported for callers outside the engine."""

from __future__ import annotations

from .hf_config import SUPPORTED_MODEL_TYPES, UnsupportedModelError, from_hf_config
from .parameters import ParameterCount, parameter_count
from .presets import Preset, close_preset_ids, load_presets
from .spec import ModelSpec, from_architecture

__all__ = [
    "SUPPORTED_MODEL_TYPES",
    "ModelSpec",
    "ParameterCount",
    "Preset",
    "UnsupportedModelError",
    "close_preset_ids",
    "from_architecture",
    "from_hf_config",
    "load_presets",
    "parameter_count",
]
