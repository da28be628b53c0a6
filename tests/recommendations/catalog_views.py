"""Configuration views of the committed catalog (no database) and the issue's workloads, for the pure tests."""

from __future__ import annotations

from functools import cache
from typing import Any

from benchmarks.recommend_speed import WORKLOAD, fixture_views
from budgets.engine import Workload
from recommendations.plans import ConfigurationView


@cache
def _views() -> dict[str, ConfigurationView]:
    return {view.slug: view for view in fixture_views()}


def view(slug: str) -> ConfigurationView:
    return _views()[slug]


def _merge(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in changes.items():
        out[key] = _merge(out.get(key, {}), value) if isinstance(value, dict) else value
    return out


def llama70b(**changes: Any) -> Workload:
    """Llama-3.1-70B bf16 on vLLM, 16 sessions of 8,192 + 1,024 tokens, with ``changes`` merged in."""
    return Workload.model_validate(_merge(WORKLOAD, changes))
