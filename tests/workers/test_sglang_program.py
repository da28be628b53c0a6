"""workers.runner.programs.sglang_serve against a stand-in SGLang (tests/workers/data/fake_sglang): no GPU needed.

The stand-in takes SGLang 0.5.10.post1's flags (and refuses others), starts a child in its group as SGLang
starts its scheduler, prints SGLang start-up lines, answers /health 503 while it "warms up", serves
/server_info and a streaming /v1/completions, and can refuse to start, run its pool dry, or refuse prompts
longer than a short pool, as SGLang does.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from measurements.document import MeasurementDocument
from workers.runner.plan import PLACEHOLDERS, PlaceholderError, placeholder_values, program_argv, template_placeholders
from workers.runner.programs import PROGRAMS, SGLANG_SERVE_TEMPLATE
from workers.runner.programs.sglang_serve import (
    DTYPES,
    EXIT_OOM,
    KV_CACHE_DTYPES,
    needed_context_length,
    parse_options,
    sglang_command,
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

FAKE_SGLANG = DATA / "fake_sglang"
MODULE = "workers.runner.programs.sglang_serve"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    files = {"FAKE_SGLANG_RECORD": "requests.jsonl", "FAKE_SGLANG_PIDFILE": "server.pid",
             "FAKE_SGLANG_CHILD_PIDFILE": "scheduler.pid", "FAKE_SGLANG_ARGV": "argv.json"}  # fmt: skip
    return program_env(FAKE_SGLANG, "FAKE_SGLANG_", **{k: str(tmp_path / v) for k, v in files.items()}, **extra)


def _run(tmp_path: Path, *args: str, **env: str) -> tuple[int, dict[str, Any], list[dict]]:
    options = ["--model-path", "fake/model", "--startup-timeout", "30", "--request-timeout", "30", "--stop-grace", "5"]
    return run_program(MODULE, [*options, *args], _env(tmp_path, **env), tmp_path)


def _group_gone(tmp_path: Path) -> bool:
    """The server and the child it started (SGLang's scheduler) have both exited."""
    return gone(read_pid(tmp_path / "server.pid")) and gone(read_pid(tmp_path / "scheduler.pid"))


@pytest.mark.slow
def test_serves_concurrent_streaming_requests_and_reports(tmp_path: Path) -> None:
    code, result, messages = _run(
        tmp_path, "--context-length", "60", "--max-input-tokens", "48", "--max-output-tokens", "12",
        "--concurrency", "4", "--mem-fraction-static", "0.8", "--max-running-requests", "auto",
        "--kv-cache-dtype", "fp8_e4m3", "--tp-size", "1", "--pp-size", "1",
        FAKE_SGLANG_WARMUP="1.0", http_proxy="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9",
    )  # fmt: skip
    assert code == 0, result.get("log_tail")
    assert result["engine"] == "sglang" and result["outcome"] == "succeeded" and result["message"] is None
    engine = result["engine_report"]
    assert engine["weights_bytes"] == round(27.57 * 2**30)  # xinference#3481's lines, printed by the stand-in
    assert engine["kv_cache_tokens"] == 91749 and engine["kv_cache_bytes"] == 2 * round(7.00 * 2**30)
    assert engine["cuda_graph_bytes"] == round(1.44 * 2**30)
    assert (engine["max_total_num_tokens"], engine["context_len"]) == (91749, 62)
    assert engine["mem_fraction_static"] == 0.8 and engine["server_args"]["kv_cache_dtype"] == "fp8_e4m3"
    assert engine["startup_complete"] is True and engine["startup_error"] is None
    assert result["server_info"]["version"] == "0.0.0+fake" and result["server_info"]["max_req_input_len"] == 56
    assert result["requests"] == {"sent": 4, "succeeded": 4, "failed": 0, "errors": []}
    assert result["latency"]["output_tokens_total"] == 4 * 12 and result["latency"]["ms_per_output_token_p50"] > 0
    assert result["startup_seconds"] >= 1.0  # /health answered 503 during the warm-up, and the program waited

    argv = json.loads((tmp_path / "argv.json").read_text())
    assert argv[argv.index("--context-length") + 1] == "62"  # 48 + 12 + 2: SGLang's room for the request
    assert argv[argv.index("--mem-fraction-static") + 1] == "0.8"
    assert "--max-running-requests" not in argv and "--pp-size" not in argv  # auto, and the default
    settings = result["settings"]
    assert (settings["context_length"], settings["context_length_asked"]) == (62, 60)
    assert settings["sglang_command"][1:4] == ["-m", "sglang.launch_server", "--model-path"]
    assert "log_tail" not in result

    assert_requests(tmp_path / "requests.jsonl", count=4, prompt_len=48, max_tokens=12)

    assert [m["name"] for m in messages if m["type"] == "checkpoint"] == ["server_ready", "load_done"]
    startup = [m["percent"] for m in messages if m["type"] == "progress" and m["phase"] == "startup"]
    assert startup[0] == 5.0 and startup[-1] == 100.0 and 40.0 in startup
    final = [m for m in messages if m["type"] == "result"]
    assert len(final) == 1 and final[0]["oom"] is False and final[0]["phase"] == "load"
    assert final[0]["versions"] == {"sglang": "0.0.0+fake"}
    assert final[0]["conditions"]["engine"] == "sglang" and final[0]["conditions"]["concurrency"] == 4
    assert _group_gone(tmp_path)


@pytest.mark.slow
def test_sglang_refusing_to_start_for_memory_exits_3_with_its_reason(tmp_path: Path) -> None:
    code, result, messages = _run(tmp_path, "--max-input-tokens", "8", "--max-output-tokens", "4",
                                  "--mem-fraction-static", "0.3", FAKE_SGLANG_MODE="not_enough_memory")  # fmt: skip
    assert code == EXIT_OOM == 3
    assert result["outcome"] == "refused_for_memory"
    assert result["engine_report"]["startup_error_kind"] == "not_enough_memory"
    assert result["message"] == (
        "SGLang refused to start: Not enough memory. Please try to increase --mem-fraction-static. "
        "Current value: mem_fraction_static=0.3"
    )
    assert result["requests"]["sent"] == 0 and result["startup_seconds"] is None
    assert "Received sigquit from a child process" in result["log_tail"]
    final = next(m for m in messages if m["type"] == "result")
    assert final["oom"] is True and final["phase"] == "startup" and final["versions"] == {}
    assert _group_gone(tmp_path)


@pytest.mark.slow
def test_a_pool_that_runs_dry_while_serving_exits_3(tmp_path: Path) -> None:
    code, result, _ = _run(tmp_path, "--max-input-tokens", "8", "--max-output-tokens", "4", "--concurrency", "2",
                           FAKE_SGLANG_MODE="pool_exhausted")  # fmt: skip
    assert code == 3 and result["outcome"] == "oom"
    assert result["engine_report"]["pool_exhausted"] == "Prefill out of memory. Try to lower your batch size."
    assert result["message"].startswith("SGLang ran out of its KV pool while serving the requests: Prefill out")
    assert result["requests"]["failed"] == 2
    assert _group_gone(tmp_path)


@pytest.mark.slow
def test_prompts_longer_than_a_short_pool_are_a_memory_failure(tmp_path: Path) -> None:
    code, result, _ = _run(tmp_path, "--context-length", "60", "--max-input-tokens", "48", "--max-output-tokens", "4",
                           FAKE_SGLANG_MODE="short_pool")  # fmt: skip
    assert code == 3 and result["outcome"] == "oom"
    assert result["engine_report"]["pool_limits_requests"] is True
    assert result["message"] == (
        "SGLang refused the requests: its KV pool holds 40 tokens, fewer than the context length 60 "
        '("Input length (48 tokens) exceeds the maximum allowed length (34 tokens)")'
    )
    assert "exceeds the maximum allowed length" in result["requests"]["errors"][0]


@pytest.mark.slow
def test_sigterm_stops_the_server_and_its_children(tmp_path: Path) -> None:
    args = ["--model-path", "fake/model", "--max-input-tokens", "8", "--max-output-tokens", "4", "--stop-grace", "5"]
    env = _env(tmp_path, FAKE_SGLANG_STARTUP_DELAY="30")
    code = sigterm_while_starting(MODULE, args, env, tmp_path, tmp_path / "scheduler.pid")  # the whole group is up
    assert code == 128 + signal.SIGTERM
    assert _group_gone(tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "outcome", "exit_code"), [("ok", "succeeded", 0), ("not_enough_memory", "oom", 3)])
def test_under_the_runner_the_measurement_carries_the_programs_report(
    tmp_path: Path, mode: str, outcome: str, exit_code: int
) -> None:
    from workers.runner.execute import RunOptions, run_measured

    argv = [sys.executable, "-m", MODULE, "--model-path", "fake/model", "--max-input-tokens", "16",
            "--max-output-tokens", "8", "--concurrency", "2"]  # fmt: skip
    extra = {"PYTHONPATH": program_env(FAKE_SGLANG, "FAKE_SGLANG_")["PYTHONPATH"], "FAKE_SGLANG_MODE": mode}
    document = run_measured(RunOptions(argv=argv, extra_env=extra, time_limit_s=60, cwd=str(tmp_path)))
    MeasurementDocument.model_validate(document)  # what the worker uploads: within every bound
    assert document["outcome"] == outcome and document["exit_code"] == exit_code
    assert document["program_report"]["engine"] == "sglang"
    assert document["conditions"]["engine"] == "sglang" and document["conditions"]["concurrency"] == 2
    if mode == "ok":
        assert document["timing"]["ms_per_output_token"] > 0
        assert set(document["sampling"]["checkpoints"]) == {"server_ready", "load_done"}
        assert document["versions"]["child_sglang"] == "0.0.0+fake"
    else:
        assert document["program_report"]["message"].startswith("SGLang refused to start: Not enough memory.")


# --- options, command, template ------------------------------------------------------------------


def _options(*args: str) -> Any:
    return parse_options(["--model-path", "org/model", *args])


@pytest.mark.parametrize(
    "args",
    [
        ["--mem-fraction-static", "0"],
        ["--mem-fraction-static", "1.5"],
        ["--mem-fraction-static", "nan"],
        ["--max-running-requests", "0"],
        ["--page-size", "0"],
        ["--context-length", "8"],
        ["--kv-cache-dtype", "fp8"],  # SGLang has no plain fp8: the template maps fp8 to fp8_e4m3
        ["--dtype", "int3"],
        ["--tp-size", "auto"],
        ["--extra-arg=--port=1"],
        ["--python", "/nonexistent/python3"],
    ],
)
def test_invalid_options_are_refused(args: list[str]) -> None:
    assert_refused(parse_options, ["--model-path", "org/model", *args])


def test_invalid_model_paths_are_refused() -> None:
    for model in ("-rf", "a b", "m;ls", "org/model\n"):
        with pytest.raises(SystemExit):
            parse_options(["--model-path", model])


@pytest.mark.parametrize(("given", "prompt", "output", "served"), [
    ("60", 48, 12, 62),  # input + output + 2
    ("107", 100, 1, 107),  # a prompt needs 7 tokens of room (the scheduler's max_req_input_len)
    ("40", 100, 1, 107),
    ("8192", 100, 28, 8192),  # enough already: kept
])  # fmt: skip
def test_the_context_length_leaves_sglang_room_for_the_request(
    given: str, prompt: int, output: int, served: int
) -> None:
    args = _options("--context-length", given, "--max-input-tokens", str(prompt), "--max-output-tokens", str(output))
    assert args.context_length == served == max(int(given), needed_context_length(prompt, output))
    assert args.context_length_asked == int(given)


def test_auto_leaves_sglangs_default_and_the_command_carries_only_given_options() -> None:
    args = _options("--mem-fraction-static", "0.85", "--max-running-requests", "auto", "--chunked-prefill-size", "4096",
                    "--cuda-graph-max-bs", "auto", "--page-size", "16", "--pp-size", "2", "--context-length", "auto",
                    "--extra-arg=--disable-radix-cache")  # fmt: skip
    assert args.max_running_requests is None and args.cuda_graph_max_bs is None and args.context_length is None
    command = sglang_command(args, 30123)
    assert command[:9] == [sys.executable, "-m", "sglang.launch_server", "--model-path", "org/model",
                           "--host", "127.0.0.1", "--port", "30123"]  # fmt: skip
    flags = dict(zip(command[9:-1:2], command[10:-1:2], strict=True))
    assert flags == {"--tp-size": "1", "--pp-size": "2", "--mem-fraction-static": "0.85",
                     "--chunked-prefill-size": "4096", "--page-size": "16"}  # fmt: skip
    assert command[-1] == "--disable-radix-cache"


def test_every_flag_and_choice_is_sglangs_own() -> None:
    """Against the flags extracted from SGLang 0.5.10.post1's ServerArgs.add_cli_args (fixtures/engines/)."""
    release = json.loads((REPO / "fixtures" / "engines" / "sglang-0.5.10.post1.json").read_text())
    args = _options("--served-model-name", "m", "--context-length", "4096", "--mem-fraction-static", "0.8",
                    "--max-running-requests", "8", "--chunked-prefill-size", "2048", "--cuda-graph-max-bs", "8",
                    "--page-size", "16", "--tp-size", "2", "--pp-size", "2", "--dtype", "bfloat16",
                    "--kv-cache-dtype", "fp8_e4m3")  # fmt: skip
    command = sglang_command(args, 30000)
    assert command[1:3] == release["command"][1:] and command[3] == release["model_flag"]
    assert {a for a in command if a.startswith("--")} <= set(release["flags"])
    assert tuple(release["choices"]["--dtype"]) == DTYPES
    assert tuple(release["choices"]["--kv-cache-dtype"]) == KV_CACHE_DTYPES


def _sglang_workload(**inference: Any) -> dict[str, Any]:
    base = {"max_input_tokens": 6144, "max_output_tokens": 2048, "concurrent_sessions": 32, "engine": "sglang"}
    return {"model": {"preset": "llama-3.1-8b"}, "inference": {**base, **inference}}


def test_the_registered_template_fills_from_an_sglang_workload_and_parses() -> None:
    assert PROGRAMS["sglang_serve"] == MODULE
    assert template_placeholders(SGLANG_SERVE_TEMPLATE) <= set(PLACEHOLDERS)
    argv = program_argv(SGLANG_SERVE_TEMPLATE, placeholder_values(_sglang_workload(), device_count=1))
    assert argv[1:3] == ["-m", MODULE]
    args = parse_options(argv[3:])
    assert (args.model_path, args.context_length, args.concurrency) == ("meta-llama/Llama-3.1-8B", 8192 + 2, 32)
    assert (args.mem_fraction_static, args.max_running_requests) == (None, None)  # auto: SGLang's by GPU and pool
    assert args.page_size == 1  # SGLang's default page, written into the validated workload as the budget reads it
    assert (args.kv_cache_dtype, args.dtype) == ("auto", "bfloat16")


def test_the_workloads_sglang_settings_reach_the_server() -> None:
    workload = _sglang_workload(gpu_memory_utilization=0.85, max_num_seqs=64, max_num_batched_tokens=4096,
                                cuda_graph_max_bs=48, kv_block_tokens=16)  # fmt: skip
    workload["precision"] = {"kv_cache": "fp8"}
    argv = program_argv(SGLANG_SERVE_TEMPLATE, placeholder_values(workload, device_count=1))
    command = sglang_command(parse_options(argv[3:]), 30000)
    flags = dict(zip(command[9::2], command[10::2], strict=True))
    assert flags["--mem-fraction-static"] == "0.85" and flags["--max-running-requests"] == "64"
    assert flags["--chunked-prefill-size"] == "4096" and flags["--cuda-graph-max-bs"] == "48"
    assert flags["--page-size"] == "16" and flags["--kv-cache-dtype"] == "fp8_e4m3"


def test_a_vllm_workload_cannot_fill_the_sglang_template() -> None:
    values = placeholder_values({**_sglang_workload(), "inference": {"engine": "vllm"}}, device_count=1)
    with pytest.raises(PlaceholderError, match=r"\{mem_fraction_static\}.*SGLang workloads"):
        program_argv(SGLANG_SERVE_TEMPLATE, values)


@pytest.mark.django_db
def test_the_migration_registers_the_shipped_template() -> None:
    from measurements.models import RegisteredProgram

    program = RegisteredProgram.objects.get(slug="sglang-serve")  # data migration 0005
    assert program.argv_template == list(SGLANG_SERVE_TEMPLATE)
    assert program.enabled and not program.allowed_configurations.exists()
    argv = program_argv(program.argv_template, placeholder_values(_sglang_workload(), device_count=1))
    assert argv[argv.index("--context-length") + 1] == "8192"  # the program adds SGLang's 2 tokens of room
