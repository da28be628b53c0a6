"""Implementation profiles: chosen by engine and version, named in the assumptions; `generic` adds nothing."""

from __future__ import annotations

import pytest

from budgets.engine import Workload, estimate
from budgets.engine.components import kv_cache as kv
from budgets.engine.profiles import profile_for


def _generate(engine: str, layout: str = "contiguous", version: str | None = None) -> Workload:
    runtime = {"device": "cpu"} | ({"engine_version": version} if version else {})
    return Workload.model_validate(
        {
            "task": "inference",
            "model": {"preset": "mistral-7b-v0.3"},
            "precision": {"weights": "bf16"},
            "inference": {
                "engine": engine,
                "kv_cache_layout": layout,
                "max_input_tokens": 512,
                "max_output_tokens": 64,
                "concurrent_sessions": 4,
            },
            "runtime": runtime,
        }
    )


def test_profile_by_engine_and_version() -> None:
    assert profile_for("transformers", None) is profile_for("transformers", "5.24.0")
    assert profile_for("transformers", "4.46.0").name == "transformers 5"  # the only release range known
    assert profile_for("generic", "5.24.0").name == "generic"
    with pytest.raises(ValueError):
        profile_for("vllm", "0.11.0")


@pytest.mark.parametrize(
    ("engine", "version", "named"),
    [
        ("transformers", None, "implementation profile transformers 5 for transformers 5.24.0"),
        ("transformers", "5.10.0", "implementation profile transformers 5 for transformers 5.10.0"),
        ("generic", None, "implementation profile generic"),
    ],
)
def test_assumptions_name_the_profile_and_version(engine: str, version: str | None, named: str) -> None:
    assert any(a.startswith(named) for a in estimate(_generate(engine, version=version)).assumptions)


def test_training_runs_the_transformers_profile() -> None:
    w = Workload.model_validate({"task": "training", "model": {"preset": "llama-3.2-1b"}, "runtime": {"device": "cpu"}})
    assert any(a.startswith("implementation profile transformers 5 for") for a in estimate(w).assumptions)


def test_generic_is_the_general_model_under_transformers() -> None:
    """transformers adds generate's bookkeeping to the activations; its StaticCache holds one position less."""
    generic, hf = (estimate(_generate(engine)).per_device for engine in ("generic", "transformers"))
    spec = _generate("generic").spec
    sessions = 4
    one_position = sessions * kv.kv_bytes_per_token(spec, spec.num_kv_heads, spec.num_layers, "bf16")
    assert generic.component("kv_cache").bytes - hf.component("kv_cache").bytes == one_position
    assert hf.component("activations").bytes > generic.component("activations").bytes
    phases = {p.name: p.bytes for p in generic.phases}
    for p in hf.phases:
        assert p.bytes + one_position > phases[p.name], p.name
