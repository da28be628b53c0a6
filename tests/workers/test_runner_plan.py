"""Registered programs' argv: placeholders filled per argument from the validated workload, nothing else."""

from __future__ import annotations

import re

import pytest

from workers.runner.plan import PlaceholderError, placeholder_values, program_argv, template_placeholders

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
