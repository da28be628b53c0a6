from __future__ import annotations

import pytest
from pydantic import ValidationError

from budgets.engine import Workload, validation_errors, workload_json_schema

BASE = {"task": "inference", "model": {"preset": "llama-3.1-8b"}}


def _errors(payload: dict) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as exc:
        Workload.model_validate(payload)
    return validation_errors(exc.value)


def test_examples_validate(example_workloads):
    assert len(example_workloads) >= 8
    for name, payload in example_workloads.items():
        Workload.model_validate(payload), name


def test_defaults_are_documented_and_resolved():
    w = Workload.model_validate(BASE)
    assert w.inference is not None and w.inference.engine == "vllm" and w.inference.kv_cache_layout == "paged"
    assert w.inference.gpu_memory_utilization == 0.9
    assert w.precision.compute == "bf16" and w.precision.kv_cache == "bf16"
    assert w.parallelism.tensor == 1 and w.runtime.device == "cuda" and w.acceptance.min_headroom_fraction == 0.10


def test_unknown_field_is_rejected_with_its_path():
    errs = _errors({**BASE, "inference": {"max_input_tokens": 10, "max_input_tokenz": 5}})
    assert "inference.max_input_tokenz" in errs
    assert "unknown field" in errs["inference.max_input_tokenz"][0]


def test_wrong_type_names_the_field():
    errs = _errors({**BASE, "inference": {"concurrent_sessions": "many"}})
    assert "inference.concurrent_sessions" in errs


@pytest.mark.parametrize("value", [0, -3])
def test_zero_or_negative_counts_are_rejected(value):
    errs = _errors({**BASE, "inference": {"concurrent_sessions": value}})
    msg = errs["inference.concurrent_sessions"][0]
    assert "inference.concurrent_sessions" in msg and "≥ 1" in msg


@pytest.mark.parametrize(
    ("section", "field", "value"),
    [
        ("inference", "max_input_tokens", 10**9),
        ("inference", "concurrent_sessions", 10**6),
        ("parallelism", "tensor", 8192),
        ("parallelism", "zero_stage", 4),
    ],
)
def test_absurd_sizes_are_rejected(section, field, value):
    errs = _errors({**BASE, section: {field: value}})
    assert f"{section}.{field}" in errs
    assert "≤" in errs[f"{section}.{field}"][0]


def test_enum_message_lists_allowed_values():
    errs = _errors({**BASE, "precision": {"weights": "fp64"}})
    msg = errs["precision.weights"][0]
    for allowed in ("fp32", "bf16", "fp16", "fp8", "int8", "int4"):
        assert allowed in msg


def test_model_needs_exactly_one_source():
    errs = _errors({"task": "inference", "model": {"preset": "gpt2", "hf_config": {"model_type": "gpt2"}}})
    assert any("exactly one" in m for ms in errs.values() for m in ms)


def test_unknown_preset_lists_close_matches():
    errs = _errors({"task": "inference", "model": {"preset": "llama-3.1-8"}})
    msg = " ".join(errs["model"])
    assert "llama-3.1-8b" in msg


def test_unknown_model_type_without_core_fields_names_the_fields():
    errs = _errors({"task": "inference", "model": {"hf_config": {"model_type": "rwkv"}}})
    msg = " ".join(errs["model"])
    assert "rwkv" in msg and "hidden_size" in msg and "num_hidden_layers" in msg
    assert "llama" not in msg  # never another family suggested


def test_tensor_degree_must_divide_heads():
    errs = _errors({**BASE, "parallelism": {"tensor": 3}})
    assert any("parallelism.tensor" in m for m in errs["__root__"])


def test_custom_task_needs_components():
    errs = _errors({"task": "custom"})
    assert any("custom" in m for m in errs["__root__"])


def test_absurd_hf_config_is_rejected():
    cfg = {
        "model_type": "llama",
        "hidden_size": 10**7,
        "num_hidden_layers": 2,
        "num_attention_heads": 8,
        "intermediate_size": 10,
        "vocab_size": 10,
    }
    errs = _errors({"task": "inference", "model": {"hf_config": cfg}})
    assert any("hidden_size" in m for m in errs["model"])


def test_an_absurd_context_length_in_an_hf_config_is_rejected_by_name():
    # found by tests/test_input_fuzz.py: 10**40 positions made vLLM's rotary cache pass 1 EiB
    cfg = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
           "intermediate_size": 128, "vocab_size": 100, "max_position_embeddings": 10**40}  # fmt: skip
    errs = _errors({"task": "inference", "model": {"hf_config": cfg}})
    assert any("max_position_embeddings" in m for m in errs["model"])


def test_json_schema_comes_from_the_model():
    schema = workload_json_schema()
    assert schema["additionalProperties"] is False
    assert "inference" in schema["properties"] and "InferenceSpec" in schema["$defs"]


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("tensorrt-llm", "free_gpu_memory_fraction (default 0.9) of the memory free after the engine is built"),
        ("TRTLLM", "TensorRT-LLM has no profile here"),
        ("nim", "launches one backend per model profile"),
    ],
)
def test_an_engine_without_a_profile_is_refused_with_why_not_read_as_another(name, says):
    """Issue 17, item 2: TensorRT-LLM / NIM are refused with the reason (SGLang has had a profile since issue 17,
    item 1: tests/engine/test_sglang.py), naming
    the field and the engines that have a profile, never budgeted as 'generic'."""
    with pytest.raises(ValidationError) as raised:
        Workload.model_validate({"model": {"preset": "llama-3.1-8b"}, "inference": {"engine": name}})
    (messages,) = validation_errors(raised.value).values()
    assert list(validation_errors(raised.value)) == ["inference.engine"]
    assert says in messages[0] and "engines with a profile: vllm, sglang, transformers, generic" in messages[0]
