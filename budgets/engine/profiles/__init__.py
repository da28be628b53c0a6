"""Implementation profiles: what one library version allocates on top of the general model
(`components/`), chosen by engine and `runtime.engine_version` (default: the current release).
`generic` is the general model only; `litgpt` is lit-gpt's training code (training.framework);
vLLM's profiles live in `vllm.py`."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from ..vllm import parse_version
from .generic import GENERIC, GenericProfile
from .litgpt import LITGPT
from .transformers import DEFAULT_TRANSFORMERS_VERSION, TRANSFORMERS_PROFILES

if TYPE_CHECKING:
    from ..schema import Workload


@lru_cache(maxsize=64)
def profile_for(engine: str, version: str | None) -> GenericProfile:
    """The profile of a generate or training engine at a version (None: the current release)."""
    if engine == "vllm":
        raise ValueError("vLLM's profiles are chosen in budgets/engine/vllm.py")
    if engine == "litgpt":
        return LITGPT
    if engine != "transformers":
        return GENERIC
    v = parse_version(version or DEFAULT_TRANSFORMERS_VERSION)
    return [p for p in TRANSFORMERS_PROFILES if v >= p.since][-1]


def workload_engine(w: Workload) -> tuple[str, str | None]:
    """(engine, version) of a generate or training workload: training runs `training.framework`."""
    engine: str
    if w.task == "inference" and w.inference is not None:
        engine = w.inference.engine
    else:
        engine = w.training.framework if w.training is not None else "transformers"
    if engine != "transformers":
        return engine, None
    return engine, w.runtime.engine_version or DEFAULT_TRANSFORMERS_VERSION


def workload_profile(w: Workload) -> GenericProfile:
    return profile_for(*workload_engine(w))


__all__ = ["DEFAULT_TRANSFORMERS_VERSION", "GenericProfile", "profile_for", "workload_engine", "workload_profile"]
