"""workers.runner.sglang_log: SGLang's start-up memory report, read from published lines and SGLang's own formats.

Three kinds of input: the lines quoted by the SGLang records of benchmarks/sglang_published (read from its
records.json), the verbatim excerpts of public reports in tests/workers/data/sglang_logs/ (each headed by
its source), and lines built from SGLang 0.5.10.post1's format strings (file:line in the sdist's
sglang/srt/, as in the module's FORMATS), for wordings no public excerpt was found for.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from measurements.document import MeasurementDocument
from workers.runner.engine_log import MAX_LOG_CHARS
from workers.runner.sglang_log import (
    FORMATS,
    MEMORY_ERROR_KINDS,
    SglangMemoryReport,
    parse_sglang_memory_report,
    report_fields,
    serving_memory_failure,
)

REPO = Path(__file__).resolve().parents[2]
RECORDS = REPO / "benchmarks" / "sglang_published" / "records.json"
LOGS = Path(__file__).parent / "data" / "sglang_logs"
HEADER = re.compile(r"^# (source|sglang version|gpu|note): (.+)$")


def G(figure: str) -> int:
    """A printed GB figure (SGLang's GB are GiB) in bytes."""
    return round(float(figure) * 2**30)


def load(name: str) -> tuple[dict[str, str], str]:
    header_text, _, body = (LOGS / name).read_text().partition("\n\n")
    header: dict[str, str] = {}
    for line in header_text.splitlines():
        match = HEADER.match(line)
        assert match, f"{name}: header line {line!r} is not '# source|sglang version|gpu|note: …'"
        header[match.group(1)] = match.group(2)
    return header, body


def parse(*lines: str) -> SglangMemoryReport:
    return parse_sglang_memory_report("\n".join(lines))


def _formats_known(report: SglangMemoryReport) -> None:
    assert set(report.formats) <= set(FORMATS), set(report.formats) - set(FORMATS)


# --- benchmarks/sglang_published: the quoted lines -----------------------------------------------


def _records() -> list[dict[str, Any]]:
    return json.loads(RECORDS.read_text())["records"]


def _quoted(record: dict[str, Any]) -> str:
    return "\n".join(record["quote"].split(" | "))  # several quoted lines are joined with " | "


@pytest.mark.parametrize("record", _records(), ids=lambda r: r["id"])
def test_every_published_quote_gives_the_pool_its_record_says_was_printed(record: dict[str, Any]) -> None:
    report = parse_sglang_memory_report(_quoted(record))
    _formats_known(report)
    printed = record["printed"]
    if printed.get("kv_tokens") is not None:
        assert report.kv_cache_tokens == printed["kv_tokens"]
        assert report.kv_cache_bytes is not None
        assert abs(report.kv_cache_bytes / 2**30 - printed["kv_gib"]) < 0.011
    else:
        assert report.kv_cache_tokens is None  # prose and summaries are not read as pool lines
    assert report.startup_error is None


def test_the_published_weight_lines() -> None:
    by_id = {r["id"]: r for r in _records()}
    gemma = parse_sglang_memory_report(_quoted(by_id["sglang4895-gemma3-27b-awq-4090-oom"]))
    assert gemma.weights_bytes == G("18.82") and gemma.avail_after_load_bytes == G("3.64")
    assert gemma.model_class == "Gemma3ForConditionalGeneration" and gemma.formats == ["load_weight_end"]
    qwen = parse_sglang_memory_report(_quoted(by_id["xinference3481-qwen3-14b-1gpu"]))
    assert (qwen.weights_bytes, qwen.avail_after_load_bytes) == (G("27.57"), G("19.67"))
    assert (qwen.k_cache_bytes, qwen.v_cache_bytes, qwen.kv_cache_bytes) == (G("7.00"), G("7.00"), 2 * G("7.00"))
    assert qwen.avail_after_pool_bytes == G("5.27")
    assert qwen.avail_before_cuda_graph_bytes == G("4.64")  # "Capture cuda graph begin. ... avail mem=4.64 GB"
    assert qwen.ranks == {}  # one GPU: the top level is its figures


def test_the_published_server_args_line() -> None:
    by_id = {r["id"]: r for r in _records()}
    report = parse_sglang_memory_report(_quoted(by_id["sglangpr13023-llama31-8b-l40s-default-mfs"]))
    assert (
        report.mem_fraction_static == 0.851 == by_id["sglangpr13023-llama31-8b-l40s-default-mfs"]["mem_fraction_static"]
    )
    assert report.server_args == {"model_path": "meta-llama/Meta-Llama-3.1-8B-Instruct", "kv_cache_dtype": "auto",
                                  "mem_fraction_static": 0.851, "max_running_requests": None}  # fmt: skip


# --- public excerpts -----------------------------------------------------------------------------


def test_eight_ranks_keep_their_own_figures_and_the_tightest_gpu_decides() -> None:
    header, body = load("pr11716_tp8_kv-pool.log")
    assert header["source"].endswith("/pull/11716")
    report = parse_sglang_memory_report(body)
    assert report.kv_cache_tokens == 2795207
    assert report.kv_cache_bytes == 2 * G("53.31")  # per GPU, K + V
    assert report.avail_after_pool_bytes == G("11.87")
    assert report.avail_before_cuda_graph_bytes == G("11.78")  # TP2, the least free of TP7/TP2/TP0
    assert set(report.ranks) == {"TP0", "TP1", "TP2", "TP3", "TP5", "TP6", "TP7"}
    assert report.ranks["TP7"] == {"avail_before_cuda_graph_bytes": G("12.01")}
    assert report.ranks["TP5"]["kv_cache_tokens"] == 2795207 and report.warnings == []


def test_a_whole_single_gpu_start_up_with_cuda_graphs() -> None:
    _, body = load("pr11830_b200_cuda-graph.log")
    report = parse_sglang_memory_report(body)
    assert report.kv_cache_torch_dtype == "bfloat16"
    assert (report.kv_cache_tokens, report.kv_cache_bytes) == (2243474, 2 * G("59.91"))
    assert report.avail_after_pool_bytes == G("40.03")
    assert report.avail_before_cuda_graph_bytes == G("39.48")  # not the progress bar's "avail_mem=38.07 GB"
    assert (report.cuda_graph_bytes, report.avail_after_cuda_graph_bytes) == (G("1.44"), G("38.05"))
    assert report.cuda_graph_seconds == 5.37
    assert report.formats == ["kv_cache_dtype", "kv_cache_allocated", "memory_pool_end", "cuda_graph_begin",
                              "cuda_graph_end"]  # fmt: skip


def test_cuda_graphs_on_two_ranks_keep_the_largest_use_and_the_least_free() -> None:
    _, body = load("pr12978_tp2_cuda-graph-end.log")
    report = parse_sglang_memory_report(body)
    assert report.cuda_graph_bytes == G("1.04") and report.avail_after_cuda_graph_bytes == G("11.17")
    assert report.ranks["TP0"]["cuda_graph_bytes"] == G("1.00")
    assert report.ranks["TP1"]["cuda_graph_seconds"] == 11.35


def test_a_later_builds_pool_line_with_its_dtype() -> None:
    _, body = load("pr27537_musa_kv-dtype.log")
    report = parse_sglang_memory_report(body)
    assert (report.kv_cache_tokens, report.k_cache_bytes) == (1106304, G("25.32"))
    assert report.avail_before_cuda_graph_bytes == G("11.99")


def test_the_scheduler_limits() -> None:
    _, body = load("issue29575_scheduler-limits.log")
    report = parse_sglang_memory_report(body)
    assert (report.max_total_num_tokens, report.chunked_prefill_size, report.max_prefill_tokens) == (2086558, 8192,
                                                                                                    16384)  # fmt: skip
    assert (report.max_running_requests, report.context_len) == (33, 256000)
    assert report.available_gpu_mem_bytes == G("17.22")
    assert report.pool_limits_requests is False  # 2.09 M tokens hold a 256 K context


def test_a_negative_profiled_pool_on_data_parallel_ranks() -> None:
    _, body = load("issue7691_rocm_negative-profile.log")
    report = parse_sglang_memory_report(body)
    assert report.profiled_token_capacity == -561981
    assert report.weights_bytes == G("166.59") and report.model_class == "DeepseekV3ForCausalLM"
    assert set(report.ranks) == {"DP0 TP0", "DP6 TP6", "DP7 TP7"}


def test_a_prompt_refused_by_the_pool_is_remembered() -> None:
    _, body = load("issue4048_input-too-long.log")
    report = parse_sglang_memory_report(body)
    assert report.max_allowed_input_tokens == 59862
    assert report.startup_error is None and report.formats == ["request_too_long"]


def test_the_published_refusal_to_start_is_a_memory_refusal() -> None:
    header, body = load("issue4330_not-enough-memory.log")
    assert header["sglang version"] == "0.4.3.post2"
    report = parse_sglang_memory_report(body)
    assert report.startup_error_kind == "not_enough_memory" and report.refused_for_memory
    assert report.startup_error == "Not enough memory. Please try to increase --mem-fraction-static."


@pytest.mark.parametrize("name", sorted(p.name for p in LOGS.glob("*.log")))
def test_every_excerpt_has_a_source_and_only_known_formats_and_is_uploadable(name: str) -> None:
    header, body = load(name)
    assert header["source"].startswith("https://github.com/")
    report = parse_sglang_memory_report(body)
    assert report.formats and not any("not believable" in w for w in report.warnings)
    _formats_known(report)
    # the report travels in the measurement: every figure within the bounds its key gives (a negative profiled
    # pool included)
    MeasurementDocument.model_validate({
        "schema": "vramplan-measurement/1", "run_id": "sglang-log-test", "outcome": "oom", "duration_seconds": 1,
        "peaks": {}, "program_report": {"engine": "sglang", "engine_report": report.as_dict()},
    })  # fmt: skip


# --- SGLang 0.5.10.post1's format strings --------------------------------------------------------

P = "[2026-01-05 10:00:00 TP0]"


def test_the_load_lines_of_the_release() -> None:
    report = parse(
        # model_runner.py:1020-1023, 1074-1076, 1246-1253 (a quantization string between type and avail)
        f"{P} Init torch distributed ends. elapsed=1.23 s, mem usage=0.55 GB",
        f"{P} Load weight begin. avail mem=78.44 GB",
        f"{P} Load weight end. elapsed=12.34 s, type=LlamaForCausalLM, quant=fp8, avail mem=63.40 GB, "
        "mem usage=15.04 GB.",
        # model_executor/model_runner_kv_cache_mixin.py:905-908; model_runner.py:2565-2567, 2573-2576
        f"{P} Memory pool end. avail mem=10.00 GB",
        f"{P} Capture piecewise CUDA graph begin. avail mem=9.50 GB",
        f"{P} Capture piecewise CUDA graph end. Time elapsed: 20.00 s. mem usage=0.75 GB. avail mem=8.75 GB.",
    )
    assert report.torch_distributed_bytes == G("0.55")
    assert (report.avail_before_load_bytes, report.avail_after_load_bytes) == (G("78.44"), G("63.40"))
    assert (report.weights_bytes, report.load_seconds, report.model_class) == (G("15.04"), 12.34, "LlamaForCausalLM")
    assert report.piecewise_cuda_graph_bytes == G("0.75")
    assert report.avail_after_piecewise_cuda_graph_bytes == G("8.75")
    assert report.cuda_graph_bytes is None  # the piecewise graphs are their own figure
    _formats_known(report)


def test_an_mla_pool_and_a_mamba_pool() -> None:
    report = parse(
        f"{P} KV Cache is allocated. #tokens: 500000, KV size: 32.53 GB",  # mem_cache/memory_pool.py:701-703
        # mem_cache/memory_pool.py:320-324 (its trailing space kept)
        f"{P} Mamba Cache is allocated. max_mamba_cache_size: 512, conv_state size: 0.25GB, ssm_state size: 4.50GB ",
    )
    assert (report.kv_cache_tokens, report.kv_cache_bytes) == (500000, G("32.53"))
    assert report.k_cache_bytes == 0 and report.v_cache_bytes == 0
    assert (report.mamba_cache_bytes, report.max_mamba_cache_size) == (G("0.25") + G("4.50"), 512)


def test_a_hybrid_sliding_window_model_has_two_pools_on_one_gpu() -> None:
    report = parse(  # SWAKVPool: a full pool and a sliding-window pool, each logging its allocation
        f"{P} KV Cache is allocated. #tokens: 200000, K size: 4.00 GB, V size: 4.00 GB",
        f"{P} KV Cache is allocated. #tokens: 160000, K size: 12.00 GB, V size: 12.00 GB",
    )
    assert report.kv_cache_tokens == 200000  # the first pool's
    assert report.kv_cache_bytes == G("4.00") * 2 + G("12.00") * 2 and report.k_cache_bytes == G("16.00")
    assert report.warnings == []


def test_the_settings_in_force_from_the_server_args_line() -> None:
    line = (  # entrypoints/engine.py:648: f"{server_args=}", a dataclass repr (shortened)
        f"{P} server_args=ServerArgs(model_path='Qwen/Qwen3-8B', tokenizer_path='Qwen/Qwen3-8B', context_length=8192, "
        "dtype='bfloat16', quantization=None, kv_cache_dtype='fp8_e4m3', mem_fraction_static=0.83, "
        "max_running_requests=64, max_total_tokens=None, chunked_prefill_size=8192, page_size=1, tp_size=2, "
        "pp_size=1, cuda_graph_bs=[1, 2, 4], cuda_graph_max_bs=256, disable_cuda_graph=False, dp_size=1)"
    )
    report = parse(line, line.replace("0.83", "0.5"))
    assert report.mem_fraction_static == 0.83  # the first launch in the log
    assert report.server_args == {
        "model_path": "Qwen/Qwen3-8B", "context_length": 8192, "dtype": "bfloat16", "quantization": None,
        "kv_cache_dtype": "fp8_e4m3", "mem_fraction_static": 0.83, "max_running_requests": 64,
        "max_total_tokens": None, "chunked_prefill_size": 8192, "page_size": 1, "tp_size": 2, "pp_size": 1,
        "cuda_graph_max_bs": 256, "disable_cuda_graph": False, "dp_size": 1,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("lines", "kind", "memory"),
    [
        # model_executor/model_runner_kv_cache_mixin.py:55-60, raised in the scheduler (managers/scheduler.py:3620)
        ([f"{P} Scheduler hit an exception: Traceback (most recent call last):",
          "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: "
          "mem_fraction_static=0.5",
          "[2026-01-05 10:00:01] Received sigquit from a child process. It usually means the child failed."],
         "not_enough_memory", True),
        (["AssertionError: Memory pool size is too small"], "pool_too_small", True),  # managers/tp_worker.py:306-308
        (["AssertionError: max_running_request is zero"], "no_request_slots", True),  # managers/tp_worker.py:296
        # model_executor/cuda_graph_runner.py:655-657 with a CUDA OOM inside: the OOM is what counts
        (["Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
          "capacity of 79.11 GiB of which 1.06 GiB is free.", "Possible solutions:",
          "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)"], "cuda_oom", True),
        (["Exception: Capture cuda graph failed: an illegal memory access was encountered"],
         "cuda_graph_capture_failed", False),
        # configs/model_config.py:384-404
        (["ValueError: Warning: User-specified context_length (200000) is greater than the derived context_length "
          "(131072). This may lead to incorrect model outputs or CUDA errors."], "context_length_exceeds_model", False),
        # entrypoints/engine.py:1182-1190: the OS OOM killer, host memory, not the GPU's
        (["RuntimeError: Rank 0 scheduler died during initialization (exit code: -9). If exit code is -9 (SIGKILL), "
          "a common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check."], "scheduler_died", False),
        (["[2026-01-05 10:00:01] Received sigquit from a child process. It usually means the child failed.",
          "RuntimeError: Initialization failed. Please see the error messages above."], "engine_failed", False),
    ],
)  # fmt: skip
def test_why_sglang_refused_to_start(lines: list[str], kind: str, memory: bool) -> None:
    report = parse(f"{P} Load weight end. elapsed=3.00 s, type=X, avail mem=1.00 GB, mem usage=70.00 GB.", *lines)
    assert report.startup_error_kind == kind
    assert report.refused_for_memory is memory is (kind in MEMORY_ERROR_KINDS)
    assert report.startup_error is not None and report.startup_error in "\n".join(lines)
    assert not report.startup_complete
    _formats_known(report)


def test_failures_after_ready_are_serving_failures_not_refusals() -> None:
    report = parse(
        f"{P} The server is fired up and ready to roll!",  # entrypoints/http_server.py:1929
        # managers/scheduler.py:2595-2605, twice
        f"{P} KV cache pool is full. Retract requests. #retracted_reqs: 3, #new_tokens_gained: 1200, "
        "#new_token_ratio: 0.7000 -> 0.9000",
        f"{P} KV cache pool is full. Retract requests. #retracted_reqs: 1, #new_tokens_gained: 400, "
        "#new_token_ratio: 0.9000 -> 1.0000",
        f"{P} Scheduler hit an exception: Traceback (most recent call last):",
        "RuntimeError: Decode out of memory. Try to lower your batch size.",  # mem_cache/common.py:410-416
    )
    assert report.startup_complete and report.retractions == 2
    assert report.pool_exhausted == "Decode out of memory. Try to lower your batch size."
    assert report.startup_error is None and not report.refused_for_memory and not report.cuda_oom
    assert serving_memory_failure(report, []) == (
        "ran out of its KV pool while serving the requests: Decode out of memory. Try to lower your batch size."
    )


def test_a_cuda_oom_while_serving() -> None:
    report = parse(
        f"{P} The server is fired up and ready to roll!",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB.",
    )
    assert report.cuda_oom and report.startup_error is None
    assert serving_memory_failure(report, ["RemoteDisconnected: Remote end closed connection"]) == (
        "ran out of GPU memory while serving the requests"
    )


REFUSED = (  # managers/utils.py:136-140, as the client gets it in the stream (serving_completions.py:296-308)
    'server error in stream: {"error": {"object": "error", "message": "Input length (48 tokens) exceeds the '
    'maximum allowed length (34 tokens). Use a shorter input or enable --allow-auto-truncate.", "code": 400}}'
)


def test_a_prompt_refused_because_the_pool_is_short_is_a_memory_failure() -> None:
    short = parse(f"{P} max_total_num_tokens=40, chunked_prefill_size=8192, max_prefill_tokens=16384, "
                  "max_running_requests=20, context_len=62, available_gpu_mem=1.00 GB")  # fmt: skip
    assert short.pool_limits_requests
    assert serving_memory_failure(short, [REFUSED]) == (
        "refused the requests: its KV pool holds 40 tokens, fewer than the context length 62 "
        '("Input length (48 tokens) exceeds the maximum allowed length (34 tokens)")'
    )
    assert serving_memory_failure(short, ["HTTP 400: something else"]) is None


def test_a_prompt_refused_by_the_context_length_is_not_a_memory_failure() -> None:
    roomy = parse(f"{P} max_total_num_tokens=90000, chunked_prefill_size=8192, max_prefill_tokens=16384, "
                  "max_running_requests=2048, context_len=40, available_gpu_mem=1.00 GB")  # fmt: skip
    assert not roomy.pool_limits_requests
    assert serving_memory_failure(roomy, [REFUSED]) is None
    assert serving_memory_failure(parse(""), [REFUSED]) is None  # no pool known: not claimed


# --- robustness ----------------------------------------------------------------------------------


def test_unknown_text_gives_an_empty_report() -> None:
    report = parse("hello", "INFO:     Uvicorn running on http://127.0.0.1:30000", "avail mem=3 GB")
    assert report.formats == [] and report.warnings == [] and not report.startup_complete
    assert all(getattr(report, name) is None for name in ("weights_bytes", "kv_cache_tokens", "startup_error"))
    assert parse_sglang_memory_report(None).warnings == ["the log is not text"]


def test_colour_codes_are_stripped() -> None:
    report = parse(f"\x1b[32m{P} Memory pool end. avail mem=5.27 GB\x1b[0m")
    assert report.avail_after_pool_bytes == G("5.27")


def test_an_unbelievable_figure_is_ignored_with_a_warning() -> None:
    report = parse(f"{P} Load weight end. elapsed=1.00 s, type=X, avail mem=1.00 GB, mem usage=999999999.00 GB.")
    assert report.weights_bytes is None and report.avail_after_load_bytes == G("1.00")
    assert any("not believable" in w for w in report.warnings)


def test_one_rank_printing_a_figure_twice_keeps_the_first_and_says_so() -> None:
    report = parse(f"{P} Memory pool end. avail mem=5.00 GB", f"{P} Memory pool end. avail mem=6.00 GB")
    assert report.avail_after_pool_bytes == G("5.00")
    assert report.warnings == [f"avail_after_pool_bytes: rank TP0 printed 2 values ({G('5.00')}, {G('6.00')}); "
                               "kept the first"]  # fmt: skip


def test_a_huge_log_is_read_head_and_tail_and_quickly() -> None:
    head = f"{P} Load weight end. elapsed=1.00 s, type=X, avail mem=1.00 GB, mem usage=15.00 GB.\n"
    tail = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\n"
    text = head + ("x" * 199 + "\n") * (MAX_LOG_CHARS // 100) + tail
    started = time.monotonic()
    report = parse_sglang_memory_report(text)
    assert time.monotonic() - started < 20
    assert report.weights_bytes == G("15.00") and report.startup_error_kind == "not_enough_memory"
    assert report.warnings[0].startswith(f"the log has {len(text)} characters")


def test_a_pathological_line_does_not_hang() -> None:
    line = "Load weight end. " + "type=A, " * 5000 + "avail mem=" + "9" * 5000
    started = time.monotonic()
    parse(line, "KV Cache is allocated. #tokens: " + "1" * 10000)
    assert time.monotonic() - started < 5


def test_the_dict_has_every_field() -> None:
    assert list(SglangMemoryReport().as_dict()) == report_fields()
    assert json.loads(json.dumps(SglangMemoryReport().as_dict()))["refused_for_memory"] is False
