"""Implementation profiles: what one library version allocates on top of the general model
(`components/`), chosen by engine and `runtime.engine_version` (default: the current release).
`generic` is the general model only; `litgpt` is lit-gpt's training code (training.framework);
transformers' generate differs by release (`transformers.py`: its rules per release read);
vLLM's profiles live in `vllm.py`."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from .. import vllm
from ..vllm import parse_version
from .generic import GENERIC, GenericProfile
from .litgpt import LITGPT
from .transformers import (
    DEFAULT_TRANSFORMERS_VERSION,
    FIRST_RELEASE,
    NEWEST_RELEASE,
    TRANSFORMERS_5,
    TRANSFORMERS_PROFILES,
    GenerateRules,
    version_refusal,
    version_rules,
)

if TYPE_CHECKING:
    from ..schema import Workload

DEFAULT_RULES = (GenerateRules(), GenerateRules(), GenerateRules())


@lru_cache(maxsize=64)
def profile_for(engine: str, version: str | None) -> GenericProfile:
    """The profile of a generate or training engine at a version (None: the current release). A transformers release
    outside the ones budgeted (the schema refuses them for generate) gets the transformers 5 profile."""
    if engine == "vllm":
        raise ValueError("vLLM's profiles are chosen in budgets/engine/vllm.py")
    if engine == "litgpt":
        return LITGPT
    if engine != "transformers":
        return GENERIC
    v = parse_version(version or DEFAULT_TRANSFORMERS_VERSION)
    if not FIRST_RELEASE <= v[:2] <= NEWEST_RELEASE:
        return TRANSFORMERS_5
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
    """The workload's profile. Training under transformers runs the layers read at 5.24.0 whatever the release (the
    releases' profiles differ in generate only)."""
    engine, version = workload_engine(w)
    if engine == "transformers" and w.task != "inference":
        return TRANSFORMERS_5
    return profile_for(engine, version)


def generate_rules(w: Workload) -> tuple[GenerateRules, GenerateRules, GenerateRules]:
    """(low, expected, high) rules of the workload's generate: transformers' by release and model type
    (`transformers.version_rules`); the defaults (transformers 5's) for any other engine."""
    engine, version = workload_engine(w)
    if engine != "transformers" or version is None:
        return DEFAULT_RULES
    return version_rules(version, w.spec.model_type)


def release_refusal(engine: str, version: str, layout: str) -> str | None:
    """Why an engine's release cannot be budgeted (None when it can): transformers' releases outside the ones read,
    and its 4.x releases with a layout other than the dynamic cache (`transformers.version_refusal`); vLLM's releases
    outside the ones read (`vllm.version_refusal`). SGLang refuses through its engine entry (engines.py)."""
    if engine == "transformers":
        return version_refusal(version, layout)
    if engine == "vllm":
        return vllm.version_refusal(version)
    return None


__all__ = [
    "DEFAULT_TRANSFORMERS_VERSION",
    "GenerateRules",
    "GenericProfile",
    "generate_rules",
    "profile_for",
    "release_refusal",
    "workload_engine",
    "workload_profile",
]
