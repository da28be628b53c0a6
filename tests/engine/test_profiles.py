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
    assert profile_for("transformers", "4.46.0").name == "transformers 4.45"  # releases by what generate keeps
    assert profile_for("transformers", "5.10.0").name == "transformers 5"
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
    one_position = sessions * kv.kv_bytes_per_token(spec, 1, 0, spec.num_layers, "bf16")
    assert generic.component("kv_cache").bytes - hf.component("kv_cache").bytes == one_position
    assert hf.component("activations").bytes > generic.component("activations").bytes
    phases = {p.name: p.bytes for p in generic.phases}
    for p in hf.phases:
        assert p.bytes + one_position > phases[p.name], p.name


def _sampling(eos: int | None) -> dict:
    # a sampling-bound generate: short prompt, many sessions, a large vocabulary (the measured round-5 qwen3
    # shape, benchmarks/accuracy r5-qwen3-gen-dynamic-bf16-eager-b6)
    config = {
        "model_type": "qwen3",
        "num_hidden_layers": 2,
        "hidden_size": 256,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "intermediate_size": 512,
        "vocab_size": 50000,
        "tie_word_embeddings": False,
    } | ({"eos_token_id": eos} if eos is not None else {})
    workload = {
        "task": "inference",
        "model": {"hf_config": config},
        "precision": {"weights": "bf16"},
        "inference": {
            "engine": "transformers",
            "max_input_tokens": 16,
            "max_output_tokens": 8,
            "concurrent_sessions": 6,
        },
        "runtime": {"device": "cpu"},
    }
    return estimate(Workload.model_validate(workload)).as_contract()["per_device"]


def test_logits_processors_only_with_an_eos_token() -> None:
    # transformers adds its eos-suppressing processors (fp32 clones of the scores) only when the generation
    # config has an eos token; Qwen3Config has none by default, so without one sampling holds the logits and
    # one fp32 copy, and the high end still covers a caller that passes one
    without, with_eos = _sampling(None), _sampling(151645)
    assert with_eos["peak_phase"] == "sample"
    scores = 6 * 50000 * 4  # one fp32 [b, V] tensor
    assert with_eos["total"]["bytes"] - without["total"]["bytes"] >= 3 * scores
    assert without["total"]["high"] >= with_eos["total"]["bytes"]
