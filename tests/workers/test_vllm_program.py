"""workers.runner.programs.vllm_serve against a stand-in vLLM (tests/workers/data/fake_vllm): no GPU needed.

The stand-in prints real vLLM start-up lines, serves /health and a streaming /v1/completions, and can
print a real "No available memory for the cache blocks" refusal or a CUDA OOM while serving.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from workers.runner.plan import PLACEHOLDERS, program_argv, template_placeholders
from workers.runner.programs import VLLM_SERVE_TEMPLATE
from workers.runner.programs.vllm_serve import (
    EXIT_OOM,
    PROMPT_TOKEN_SPAN,
    parse_options,
    prompt_ids,
    vllm_command,
)

from .serving_programs import (
    DATA,
    REPO,
    assert_refused,
    assert_requests,
    gone,
    program_env,
    read_pid,
    run_program,
    sigterm_while_starting,
)

FAKE_VLLM = DATA / "fake_vllm"
MODULE = "workers.runner.programs.vllm_serve"
FAKE_KV_TOKENS = 42656  # "GPU KV cache size: 42,656 tokens", the line the stand-in prints (LMCache#1739)


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return program_env(FAKE_VLLM, "FAKE_VLLM_", FAKE_VLLM_RECORD=str(tmp_path / "requests.jsonl"),
                       FAKE_VLLM_PIDFILE=str(tmp_path / "server.pid"), **extra)  # fmt: skip


def _run(tmp_path: Path, *args: str, timeout: float = 60, **env: str) -> tuple[int, dict[str, Any], list[dict]]:
    """Run the program with a report pipe; (exit status, result JSON, messages sent to the parent)."""
    options = ["--model", "fake/model", "--startup-timeout", "30", "--request-timeout", "30", "--stop-grace", "5"]
    return run_program(MODULE, [*options, *args], _env(tmp_path, **env), tmp_path,
                       timeout)  # fmt: skip


def _server_gone(tmp_path: Path) -> bool:
    return gone(read_pid(tmp_path / "server.pid"))


@pytest.mark.slow
def test_serves_concurrent_streaming_requests_and_reports(tmp_path: Path) -> None:
    code, result, messages = _run(
        tmp_path, "--max-model-len", "256", "--max-input-tokens", "48", "--max-output-tokens", "12",
        "--concurrency", "4", "--gpu-memory-utilization", "0.85", "--port", "0",
        http_proxy="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9",  # loopback must not go through a proxy
    )  # fmt: skip
    assert code == 0, result.get("log_tail")
    assert result["engine"] == "vllm" and result["outcome"] == "succeeded" and result["message"] is None
    engine = result["engine_report"]
    assert engine["kv_cache_tokens"] == FAKE_KV_TOKENS
    assert engine["kv_cache_bytes"] == round(6.51 * 2**30)
    assert engine["weights_bytes"] == round(14.9889 * 2**30)
    assert engine["startup_error"] is None
    assert result["requests"] == {"sent": 4, "succeeded": 4, "failed": 0, "errors": []}
    latency = result["latency"]
    assert latency["ttft_ms_p50"] > 0 and latency["ttft_ms_max"] >= latency["ttft_ms_p50"]
    assert latency["ms_per_output_token_p50"] > 0
    assert latency["ms_per_output_token_max"] >= latency["ms_per_output_token_p50"]
    assert latency["output_tokens_total"] == 4 * 12
    assert result["startup_seconds"] > 0
    settings = result["settings"]
    assert settings["concurrency"] == 4 and settings["max_input_tokens"] == 48 and settings["max_model_len"] == 256
    assert settings["vllm_command"][1:5] == ["-m", "vllm.entrypoints.openai.api_server", "--model", "fake/model"]
    assert "--gpu-memory-utilization" in settings["vllm_command"]
    assert "log_tail" not in result

    assert_requests(tmp_path / "requests.jsonl", count=4, prompt_len=48, max_tokens=12)

    phases = [m["phase"] for m in messages if m["type"] == "progress"]
    assert "startup" in phases and "load" in phases
    assert [m for m in messages if m["type"] == "progress" and m["phase"] == "load"][-1]["percent"] == 100.0
    assert [m["name"] for m in messages if m["type"] == "checkpoint"] == ["server_ready", "load_done"]
    final = [m for m in messages if m["type"] == "result"]
    assert len(final) == 1
    assert final[0]["oom"] is False
    assert final[0]["timing"]["ms_per_output_token"] == latency["ms_per_output_token_p50"]
    assert final[0]["conditions"]["concurrency"] == 4
    assert final[0]["conditions"]["settings"]["gpu_memory_utilization"] == 0.85
    assert _server_gone(tmp_path)


@pytest.mark.slow
def test_vllm_refusing_to_start_for_memory_exits_3_with_its_reason(tmp_path: Path) -> None:
    code, result, messages = _run(tmp_path, "--max-input-tokens", "8", "--max-output-tokens", "4",
                                  FAKE_VLLM_MODE="no_kv_memory")  # fmt: skip
    assert code == EXIT_OOM == 3
    assert result["outcome"] == "refused_for_memory"
    engine = result["engine_report"]
    assert engine["startup_error_kind"] == "no_kv_cache_memory"
    assert engine["startup_error"].startswith("No available memory for the cache blocks.")
    assert result["message"].startswith("vLLM refused to start: No available memory for the cache blocks.")
    assert result["requests"]["sent"] == 0 and result["startup_seconds"] is None
    assert "No available memory for the cache blocks" in result["log_tail"]
    final = next(m for m in messages if m["type"] == "result")
    assert final["oom"] is True and final["phase"] == "startup"


@pytest.mark.slow
def test_an_oom_while_serving_exits_3(tmp_path: Path) -> None:
    code, result, _ = _run(tmp_path, "--max-input-tokens", "8", "--max-output-tokens", "4", "--concurrency", "2",
                           FAKE_VLLM_MODE="oom_on_request")  # fmt: skip
    assert code == 3
    assert result["outcome"] == "oom"
    assert result["engine_report"]["cuda_oom"] is True and result["engine_report"]["startup_error"] is None
    assert result["requests"]["failed"] == 1 and result["requests"]["succeeded"] == 1
    assert result["requests"]["errors"][0].startswith("HTTP 500")


@pytest.mark.slow
def test_a_server_that_never_answers_is_stopped_at_the_startup_timeout(tmp_path: Path) -> None:
    code, result, _ = _run(tmp_path, "--max-input-tokens", "8", "--max-output-tokens", "4", "--startup-timeout", "1",
                           FAKE_VLLM_STARTUP_DELAY="30")  # fmt: skip
    assert code == 1
    assert result["outcome"] == "startup_timeout"
    assert "--startup-timeout" in result["message"]
    assert _server_gone(tmp_path)


@pytest.mark.slow
def test_sigterm_stops_the_server_group(tmp_path: Path) -> None:
    args = ["--model", "fake/model", "--max-input-tokens", "8", "--max-output-tokens", "4", "--stop-grace", "5"]
    env = _env(tmp_path, FAKE_VLLM_STARTUP_DELAY="30")
    code = sigterm_while_starting(MODULE, args, env, tmp_path, tmp_path / "server.pid")
    assert code == 128 + signal.SIGTERM
    assert _server_gone(tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "outcome", "exit_code"), [("ok", "succeeded", 0), ("no_kv_memory", "oom", 3)])
def test_under_the_runner_the_measurement_carries_the_programs_report(
    tmp_path: Path, mode: str, outcome: str, exit_code: int
) -> None:
    from workers.runner.execute import RunOptions, run_measured

    argv = [sys.executable, "-m", "workers.runner.programs.vllm_serve", "--model", "fake/model",
            "--max-input-tokens", "16", "--max-output-tokens", "8", "--concurrency", "2"]  # fmt: skip
    extra = {"PYTHONPATH": os.pathsep.join([str(FAKE_VLLM), str(REPO)]), "FAKE_VLLM_MODE": mode}
    document = run_measured(RunOptions(argv=argv, extra_env=extra, time_limit_s=60, cwd=str(tmp_path)))
    assert document["outcome"] == outcome and document["exit_code"] == exit_code
    assert document["program_report"]["engine"] == "vllm"
    assert document["conditions"]["engine"] == "vllm" and document["conditions"]["concurrency"] == 2
    if mode == "ok":
        assert document["timing"]["ms_per_output_token"] > 0
        assert set(document["sampling"]["checkpoints"]) == {"server_ready", "load_done"}
        assert document["program_report"]["engine_report"]["kv_cache_tokens"] == FAKE_KV_TOKENS
    else:
        assert document["program_report"]["message"].startswith("vLLM refused to start: No available memory")
        assert "No available memory for the cache blocks" in document["error"]


def _options(*args: str) -> Any:
    return parse_options(["--model", "org/model", *args])


@pytest.mark.parametrize(
    "args",
    [
        ["--concurrency", "0"],
        ["--concurrency", "two"],
        ["--gpu-memory-utilization", "0"],
        ["--gpu-memory-utilization", "1.5"],
        ["--gpu-memory-utilization", "nan"],
        ["--port", "70000"],
        ["--dtype", "int3"],
        ["--kv-cache-dtype", "FP8; rm"],
        ["--kv-cache-dtype", "fp8\n"],
        ["--max-model-len", "100", "--max-input-tokens", "90", "--max-output-tokens", "20"],
        ["--served-model-name", "a b"],
        ["--python", "/nonexistent/python3"],
        ["--extra-arg=--host=0.0.0.0"],
        ["--extra-arg", "--port"],
        ["--startup-timeout", "-1"],
    ],
)
def test_invalid_options_are_refused(args: list[str]) -> None:
    assert_refused(parse_options, ["--model", "org/model", *args])


def test_invalid_model_names_are_refused() -> None:
    for model in ("-rf", "a b", "x" * 600, "m;ls", "org/model\n"):
        with pytest.raises(SystemExit):
            parse_options(["--model", model])


def test_vllm_command_is_loopback_and_carries_only_given_options() -> None:
    args = _options("--max-model-len", "4096", "--gpu-memory-utilization", "0.9", "--kv-cache-dtype", "fp8",
                    "--extra-arg=--enforce-eager", "--extra-arg=--swap-space=0")  # fmt: skip
    command = vllm_command(args, 8123)
    assert command[:10] == [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "org/model",
                            "--host", "127.0.0.1", "--port", "8123", "--max-model-len"]  # fmt: skip
    assert command[command.index("--gpu-memory-utilization") + 1] == "0.9"
    assert command[command.index("--kv-cache-dtype") + 1] == "fp8"
    assert command[-2:] == ["--enforce-eager", "--swap-space=0"]
    assert "--max-num-seqs" not in command and "--dtype" not in command and "--pipeline-parallel-size" not in command


def test_prompts_have_the_exact_length_and_differ_between_requests() -> None:
    prompts = [prompt_ids(i, 300, 1000) for i in range(64)]
    assert all(len(p) == 300 for p in prompts)
    assert all(1000 <= t < 1000 + PROMPT_TOKEN_SPAN for p in prompts for t in p)
    assert len({p[0] for p in prompts}) == 64


def test_the_registered_template_uses_known_placeholders_and_parses() -> None:
    names = template_placeholders(VLLM_SERVE_TEMPLATE)
    assert names <= set(PLACEHOLDERS)
    values = {"python": sys.executable, "model": "meta-llama/Llama-3.1-8B-Instruct", "max_model_len": "8192",
              "max_num_seqs": "32", "tensor_parallel_size": "1", "pipeline_parallel_size": "1",
              "gpu_memory_utilization": "0.9", "dtype": "bfloat16", "kv_cache_dtype": "auto",
              "max_input_tokens": "7168", "max_output_tokens": "1024", "concurrency": "32"}  # fmt: skip
    argv = program_argv(VLLM_SERVE_TEMPLATE, values)
    assert argv[1:3] == ["-m", "workers.runner.programs.vllm_serve"]
    args = parse_options(argv[3:])
    assert (args.max_model_len, args.concurrency, args.gpu_memory_utilization) == (8192, 32, 0.9)
    assert args.extra_arg == []  # the optional engine flags without a value are left out, each with its flag
    values |= {"data_parallel_size": "2", "max_num_batched_tokens": "8192", "block_size": "16", "quantization": "fp8"}
    command = vllm_command(parse_options(program_argv(VLLM_SERVE_TEMPLATE, values)[3:]), 8000)
    assert command[-4:] == ["--data-parallel-size=2", "--max-num-batched-tokens=8192", "--block-size=16",
                            "--quantization=fp8"]  # fmt: skip
