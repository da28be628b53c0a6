"""Registered programs' argv: placeholders filled per argument from the validated workload, nothing else."""

from __future__ import annotations

import re

import pytest

from workers.runner.plan import (
    PLACEHOLDERS,
    PlaceholderError,
    launch_values,
    placeholder_values,
    program_argv,
    template_placeholders,
    with_launch,
)

ARCH = {"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 256}


def _hf(name: str) -> dict:
    return {"model": {"hf_config": {"model_type": "llama", "_name_or_path": name, "hidden_size": 64,
                                    "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
                                    "vocab_size": 256}}}  # fmt: skip


@pytest.mark.parametrize("name", ["--trust-remote-code", "/etc/passwd", "../../secrets", "~/model", "a b", "x/y/z",
                                  "org/model\n"])  # fmt: skip
def test_a_model_name_from_a_users_config_is_never_an_option_or_a_path(name: str) -> None:
    values = placeholder_values(_hf(name), device_count=1)
    assert "model" not in values
    with pytest.raises(PlaceholderError, match=re.escape("gives no value for {model}")):
        program_argv(["prog", "--model", "{model}"], values)


def test_a_repository_id_is_a_model_value() -> None:
    assert placeholder_values(_hf("Qwen/Qwen2.5-0.5B"), device_count=1)["model"] == "Qwen/Qwen2.5-0.5B"


def test_each_argument_is_filled_on_its_own_with_no_shell() -> None:
    values = placeholder_values({"model": {"architecture": ARCH}, "inference": {"max_input_tokens": 100,
                                "max_output_tokens": 28, "concurrent_sessions": 3}}, device_count=2)  # fmt: skip
    argv = program_argv(["run", "--len={max_model_len}", "{max_num_seqs}; rm -rf /", "{device_count}"], values)
    assert argv == ["run", "--len=128", "3; rm -rf /", "2"]  # the literal stays one argument, never a command


def test_unknown_or_formatted_placeholders_are_refused() -> None:
    with pytest.raises(PlaceholderError, match="allowed placeholders"):
        template_placeholders(["{cmd}"])
    with pytest.raises(PlaceholderError, match="allowed placeholders"):
        template_placeholders(["{model!r}"])
    with pytest.raises(PlaceholderError, match="literal brace"):
        template_placeholders(["{"])


def test_vllm_knobs_the_workload_sets_reach_the_program() -> None:
    workload = {"model": {"architecture": ARCH}, "inference": {"max_input_tokens": 100, "max_output_tokens": 28,
                "concurrent_sessions": 3, "engine": "vllm", "max_model_len": 4096, "max_num_seqs": 64}}  # fmt: skip
    values = placeholder_values(workload, device_count=1)
    assert (values["max_model_len"], values["max_num_seqs"], values["concurrency"]) == ("4096", "64", "3")


VLLM_LAUNCH = ["vllm", "serve", "meta-llama/Llama-3.1-8B", "--tensor-parallel-size", "1", "--pipeline-parallel-size",
               "1", "--data-parallel-size", "2", "--max-model-len", "8192", "--max-num-seqs", "1024",
               "--max-num-batched-tokens", "8192", "--gpu-memory-utilization", "0.9", "--dtype", "bfloat16",
               "--block-size", "16"]  # fmt: skip
SGLANG_LAUNCH = ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-30B-A3B", "--tp-size", "2",
                 "--context-length", "8192", "--mem-fraction-static", "0.828", "--max-running-requests", "4096",
                 "--chunked-prefill-size", "8192", "--cuda-graph-max-bs", "256", "--page-size", "1", "--dtype",
                 "bfloat16", "--kv-cache-dtype", "bfloat16", "--quantization", "fp8"]  # fmt: skip


def test_a_launch_fills_the_placeholders_of_its_flags_and_its_defaults_where_it_names_none() -> None:
    vllm = launch_values("vllm", VLLM_LAUNCH)
    assert vllm["model"] == "meta-llama/Llama-3.1-8B"  # vLLM's positional model
    assert (vllm["data_parallel_size"], vllm["max_num_seqs"], vllm["block_size"]) == ("2", "1024", "16")
    assert (vllm["kv_cache_dtype"], vllm["quantization"]) == ("auto", None)  # left out: vLLM's defaults
    sglang = launch_values("sglang", SGLANG_LAUNCH)
    assert (sglang["model"], sglang["tensor_parallel_size"], sglang["mem_fraction_static"]) == (
        "Qwen/Qwen3-30B-A3B", "2", "0.828")  # fmt: skip
    assert (sglang["pipeline_parallel_size"], sglang["data_parallel_size"]) == ("1", None)  # absent: one server
    assert (sglang["sglang_kv_cache_dtype"], sglang["quantization"]) == ("bfloat16", "fp8")
    assert set(vllm) | set(sglang) <= set(PLACEHOLDERS)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([*VLLM_LAUNCH, "--enforce-eager", "true"], "sets --enforce-eager, which no placeholder carries"),
        ([*VLLM_LAUNCH, "--max-num-seqs"], "a flag without its value"),
        ([*VLLM_LAUNCH[:-1], "16; rm -rf /"], "--block-size is not a safe argument"),
    ],
)
def test_a_launch_no_program_could_run_is_refused(argv: list[str], message: str) -> None:
    with pytest.raises(PlaceholderError, match=re.escape(message)):
        launch_values("vllm", argv)
    with pytest.raises(PlaceholderError, match="no placeholders carry a torchtune launch"):
        launch_values("torchtune", ["tune", "run"])


def test_an_optional_placeholder_without_a_value_leaves_its_argument_out() -> None:
    template = ["prog", "--n", "{max_num_seqs}", "--extra-arg=--block-size={block_size}",
                "--extra-arg=--quantization={quantization}"]  # fmt: skip
    assert program_argv(template, {"max_num_seqs": "8", "block_size": "16"}) == [
        "prog", "--n", "8", "--extra-arg=--block-size=16"]  # fmt: skip
    with pytest.raises(PlaceholderError, match=re.escape("no value for {max_num_seqs}")):
        program_argv(template, {"block_size": "16"})  # a placeholder that is not optional still has to be there


def test_a_recorded_launch_lays_its_values_over_the_workloads() -> None:
    inference = {"max_input_tokens": 100, "max_output_tokens": 28, "concurrent_sessions": 3, "engine": "vllm"}
    description = {"model": {"preset": "llama-3.1-8b"}, "precision": {"weights": "fp8"}, "inference": inference}
    workload = placeholder_values(description, device_count=1)
    assert (workload["max_num_seqs"], workload["quantization"], workload["block_size"]) == ("3", "fp8", "16")
    merged = with_launch(workload, {"max_num_seqs": "1024", "quantization": None, "python": "/bin/sh", "x": "1"})
    assert merged["max_num_seqs"] == "1024" and "quantization" not in merged
    assert merged["python"] == workload["python"] and "x" not in merged  # never the interpreter, never a stranger
