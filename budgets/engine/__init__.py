"""The pure budget engine: workload schema, model specs, components, parallel plans, estimate.

Imports no Django, DRF or Celery (an import-linter contract enforces it).
"""

from __future__ import annotations

from .budget import Budget, ComponentBudget, DeviceBudget, HostBudget, PhasePeak, ServingPlan, render_table
from .device import Device
from .errors import validation_errors
from .estimate import estimate, model_weight_bytes, pool_cannot_hold
from .models.hf_config import SUPPORTED_MODEL_TYPES, UnsupportedModelError, from_hf_config
from .models.parameters import ParameterCount, parameter_count
from .models.presets import Preset, load_presets
from .models.spec import ModelSpec
from .schema import Workload, workload_json_schema

__all__ = [
    "SUPPORTED_MODEL_TYPES",
    "Budget",
    "ComponentBudget",
    "Device",
    "DeviceBudget",
    "HostBudget",
    "ModelSpec",
    "ParameterCount",
    "PhasePeak",
    "Preset",
    "ServingPlan",
    "UnsupportedModelError",
    "Workload",
    "estimate",
    "from_hf_config",
    "load_presets",
    "model_weight_bytes",
    "parameter_count",
    "pool_cannot_hold",
    "render_table",
    "validation_errors",
    "workload_json_schema",
]
