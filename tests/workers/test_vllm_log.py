"""workers.runner.vllm_log: vLLM's start-up memory report, read from real logs of many releases.

Every file in tests/workers/data/vllm_logs/ is a verbatim excerpt of a public report, headed by its
source, vLLM version and GPU; the expectations below are the figures printed in those lines.
Lines built from vLLM's own format strings (for wordings no public excerpt was found for) name the
wheel file they come from.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from workers.runner.vllm_log import (
    FORMATS,
    MAX_LOG_CHARS,
    MEMORY_ERROR_KINDS,
    VllmMemoryReport,
    parse_vllm_memory_report,
    report_fields,
)

DATA = Path(__file__).parent / "data" / "vllm_logs"
HEADER = re.compile(r"^# (source|vllm version|gpu|model|note): (.+)$")


def G(figure: str) -> int:
    """A printed GiB figure in bytes."""
    return round(float(figure) * 2**30)


def load(name: str) -> tuple[dict[str, str], str]:
    text = (DATA / name).read_text()
    header_text, _, body = text.partition("\n\n")
    header: dict[str, str] = {}
    for line in header_text.splitlines():
        match = HEADER.match(line)
        assert match, f"{name}: header line {line!r} is not '# source|vllm version|gpu|model|note: …'"
        header[match.group(1)] = match.group(2)
    return header, body


EXPECTED: dict[str, dict[str, Any]] = {
    "v0.6.4.post1_a6000_vllm-issue-10360.log": {
        "total_gpu_memory_bytes": G("47.54"), "initial_memory_usage_bytes": G("18.60"),
        "torch_peak_bytes": G("19.60"), "post_profile_memory_usage_bytes": G("18.62"),
        "non_torch_bytes": G("0.44"), "kv_cache_bytes": G("22.74"), "gpu_memory_utilization": 0.90,
        "weights_bytes": None, "activation_peak_bytes": None, "startup_error": None,
        "formats": ["profile_results_v064"],
    },
    "v0.6.4_rtx3090_vllm-issue-10517_20k.log": {
        "weights_bytes": G("14.9888"), "total_gpu_memory_bytes": G("23.58"), "torch_peak_bytes": G("17.06"),
        "activation_peak_bytes": G("17.06") - G("14.9888"), "non_torch_bytes": G("0.35"),
        "kv_cache_bytes": G("3.81"), "gpu_memory_utilization": 0.90, "gpu_blocks": 1952, "cpu_blocks": 2048,
        "max_concurrency": 1.56, "max_concurrency_request_tokens": 20000, "kv_cache_tokens": None,
        "startup_error": None, "refused_for_memory": False,
    },
    "v0.6.4_rtx3090_vllm-issue-10517_29k-refused.log": {
        "weights_bytes": G("14.9888"), "torch_peak_bytes": G("17.98"), "kv_cache_bytes": G("2.89"),
        "gpu_blocks": 1478, "cpu_blocks": 2048, "kv_cache_tokens": 23648, "block_size": 16, "max_model_len": 29000,
        "max_concurrency": 0.82, "max_concurrency_request_tokens": 29000,
        "startup_error_kind": "max_model_len_exceeds_kv_cache", "refused_for_memory": True,
    },
    "dev-pr10511_h100_vllm-pr-10511.log": {
        "profiling_seconds": 0.75, "total_gpu_memory_bytes": G("79.22"), "gpu_memory_utilization": 0.90,
        "requested_memory_bytes": G("71.29"), "weights_bytes": G("14.96"), "non_torch_bytes": G("1.79"),
        "activation_peak_bytes": G("1.26"), "kv_cache_bytes": G("53.29"), "formats": ["profile_table_pr10511"],
    },
    "v0.6.6_24gb_vllm-issue-11550.log": {
        "weights_bytes": G("7.9692"), "profiling_seconds": 1.46, "total_gpu_memory_bytes": G("23.55"),
        "gpu_memory_utilization": 0.90, "requested_memory_bytes": G("21.19"), "kv_cache_bytes": None,
    },
    "v0.7-dev_h100_vllm-pr-12126.log": {
        "total_gpu_memory_bytes": G("79.22"), "gpu_memory_utilization": 0.90, "requested_memory_bytes": G("71.29"),
        "weights_bytes": G("19.86"), "non_torch_bytes": G("0.16"), "activation_peak_bytes": G("36.63"),
        "kv_cache_bytes": G("14.65"), "gpu_blocks": 6001, "cpu_blocks": 1638,
        "formats": ["profile_summary", "gpu_blocks"],
    },
    "v0.7.1-dev-v1_vllm-pr-12569.log": {
        "weights_bytes": G("67.7229"), "gpu_blocks": 1381, "max_concurrency": 10.79,
        "max_concurrency_request_tokens": 2048, "kv_cache_tokens": None,
    },
    "v0.8.4_v0-engine_24gb_vllm-pr-14447.log": {
        "weights_bytes": G("21.21"), "non_torch_bytes": G("0.20"), "activation_peak_bytes": G("0.37"),
        "kv_cache_bytes": G("1.57"), "profiling_seconds": 17.59, "total_gpu_memory_bytes": G("23.58"),
        "gpu_memory_utilization": 0.99, "requested_memory_bytes": G("23.35"), "warnings": [],
    },
    "v0.8.5-dev-v1_l40s_vllm-pr-17122.log": {
        "weights_bytes": G("14.9889"), "model_loading_seconds": 3.652170, "kv_cache_tokens": 158656,
        "max_concurrency": 4.84, "max_concurrency_request_tokens": 32768, "kv_cache_bytes": None,
    },
    "v0.8.5_v1_sampler-oom_vllm-issue-17939.log": {
        "cuda_oom": True, "startup_error_kind": "cuda_oom", "refused_for_memory": True,
    },
    "v0.10.1_h100_gpt-oss-120b_vllm-issue-23278.log": {
        "weights_bytes": G("65.9651"), "model_loading_seconds": 12.799889, "kv_cache_bytes": G("-2.14"),
        "startup_error_kind": "no_kv_cache_memory", "refused_for_memory": True, "cuda_oom": False,
    },
    "v0.10.2_a100-40gb_lmcache-issue-1739.log": {
        "kv_cache_bytes": G("6.51"), "kv_cache_tokens": 42656, "max_concurrency": 1.30,
        "max_concurrency_request_tokens": 32768, "startup_error": None,
    },
    "v0.10.2_max-model-len-refused_vllm-issue-25350.log": {
        "max_model_len": 221000, "kv_cache_bytes": G("5.59"), "estimated_max_model_len": 122080,
        "startup_error_kind": "max_model_len_exceeds_kv_cache", "refused_for_memory": True,
    },
    "v0.11.0_h100_no-cache-blocks_vllm-issue-27508.log": {
        "startup_error_kind": "no_kv_cache_memory", "refused_for_memory": True, "kv_cache_bytes": None,
    },
    "v0.14.0_h100_no-cache-blocks_vllm-omni-issue-946.log": {
        "startup_error_kind": "no_kv_cache_memory", "refused_for_memory": True,
    },
    "v0.14.1_h100_gpt-oss-120b_vllm-issue-33155.log": {
        "weights_bytes": G("64.38"), "model_loading_seconds": 14.380607, "startup_error": None,
        "formats": ["model_loading"],
    },
    "v0.24.0_rtx5090_club-3090-issue-612.log": {
        "vllm_version": "0.24.0", "kv_cache_bytes": G("5.98"), "kv_cache_tokens": 567978, "max_concurrency": 4.33,
        "max_concurrency_request_tokens": 131072,
    },
    "v0.27.1_tp2_gpustack-runner-pr-251.log": {
        "cuda_graph_estimate_bytes": G("0.36"), "kv_cache_bytes": G("6.87"), "gpu_memory_utilization": 0.82,
        "cuda_graph_bytes": None,
    },
}  # fmt: skip


def test_every_data_file_is_documented_and_expected() -> None:
    files = sorted(p.name for p in DATA.glob("*.log"))
    assert len(files) >= 8
    assert set(files) == set(EXPECTED), "each excerpt needs expectations (and each expectation its excerpt)"
    versions = set()
    for name in files:
        header, body = load(name)
        assert {"source", "vllm version", "gpu"} <= set(header), name
        assert header["source"].startswith("https://github.com/"), name
        assert body.strip(), name
        versions.add(header["vllm version"].split()[0])
    assert len(versions) >= 8  # 0.6.4 → 0.27


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_excerpt_parses_to_its_printed_figures(name: str) -> None:
    _, body = load(name)
    report = parse_vllm_memory_report(body)
    result = report.as_dict()
    for key, expected in EXPECTED[name].items():
        assert result[key] == expected, f"{name}: {key} = {result[key]!r}, expected {expected!r}"
    assert set(report.formats) <= set(FORMATS)
    json.dumps(result, allow_nan=False)  # JSON-ready


def test_refusal_messages_quote_vllm() -> None:
    def error(name: str) -> str:
        return parse_vllm_memory_report(load(name)[1]).startup_error or ""

    assert error("v0.14.0_h100_no-cache-blocks_vllm-omni-issue-946.log").startswith(
        "No available memory for the cache blocks. Try increasing `gpu_memory_utilization`"
    )
    assert error("v0.11.0_h100_no-cache-blocks_vllm-issue-27508.log") == "No available memory for the cache blocks."
    assert error("v0.6.4_rtx3090_vllm-issue-10517_29k-refused.log").startswith(
        "The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV cache "
        "(23648)."
    )
    assert error("v0.10.2_max-model-len-refused_vllm-issue-25350.log").startswith(
        "To serve at least one request with the models's max seq len (221000)"
    )
    assert "warming up sampler with 256 dummy requests" in error("v0.8.5_v1_sampler-oom_vllm-issue-17939.log")
    # the 0.10.1 excerpt stops before the exception: the negative budget is the reason given
    assert error("v0.10.1_h100_gpt-oss-120b_vllm-issue-23278.log") == (
        "Available KV cache memory: -2.14 GiB (no room for the cache blocks)"
    )


def test_tp_ranks_repeating_the_same_figures_give_no_warning_and_different_ones_keep_the_tightest() -> None:
    same = parse_vllm_memory_report(load("v0.27.1_tp2_gpustack-runner-pr-251.log")[1])
    assert same.warnings == []
    differing = parse_vllm_memory_report(
        "(Worker_TP0 pid=1) INFO [gpu_worker.py:563] Available KV cache memory: 6.87 GiB\n"
        "(Worker_TP1 pid=2) INFO [gpu_worker.py:563] Available KV cache memory: 6.80 GiB\n"
    )
    assert differing.kv_cache_bytes == G("6.80")
    rounded = parse_vllm_memory_report(
        "INFO [gpu_model_runner.py:2653] Model loading took 14.9889 GiB and 3.65 seconds\n"
        "DEBUG [gpu_worker.py:297] Memory profiling takes 2.10 seconds. Total non KV cache memory: 20.01GiB; torch "
        "peak memory increase: 4.76GiB; non-torch forward increase memory: 0.26GiB; weights memory: 14.99GiB.\n"
    )
    assert rounded.weights_bytes == G("14.9889") and rounded.warnings == []
    assert any(w.startswith("kv_cache_bytes: the log gives 2 values") for w in differing.warnings)


# Lines built from the format strings in the vLLM wheels (no public excerpt of these was found).
FROM_SOURCE = {
    # vllm-0.33.0 v1/core/kv_cache_utils.py:1148-1155 (one line) and v1/worker/gpu_model_runner.py:5089
    "combined_033": (
        "(EngineCore pid=7) INFO 01-02 03:04:05 [kv_cache_utils.py:1148] GPU KV cache size: 443,248 tokens, "
        "Maximum concurrency for 8,192 tokens per request: 54.11x\n"
        "(EngineCore pid=7) INFO 01-02 03:04:00 [gpu_model_runner.py:5089] Model loading took 14.99 GiB memory and "
        "5.100000 seconds\n"
        "(APIServer pid=1) INFO 01-02 03:03:00 [startup.py:42] vLLM server version 0.33.0, serving model m\n",
        {"kv_cache_tokens": 443248, "max_concurrency": 54.11, "max_concurrency_request_tokens": 8192,
         "weights_bytes": G("14.99"), "model_loading_seconds": 5.1, "vllm_version": "0.33.0"},
    ),
    # vllm-0.33.0 entrypoints/common/startup.py:19-25 (the logo, colour codes removed by the parser)
    "logo_033": (
        " \x1b[93m▄▄\x1b[0m \x1b[94m▄█\x1b[0m \x1b[1m█     █     █ ▀▄▀ █\x1b[0m  version \x1b[1m0.33.0\x1b[0m\n",
        {"vllm_version": "0.33.0"},
    ),
    # vllm-0.11.0 v1/worker/gpu_worker.py:372-390 (DEBUG) and :298; gpu_model_runner.py:3480 (capture)
    "advice_011": (
        "DEBUG [gpu_worker.py:390] Free memory on device (78.57/79.18 GiB) on startup. Desired GPU memory utilization "
        "is (0.9, 71.26 GiB). Actual usage is 14.99 GiB for weight, 4.76 GiB for peak activation, 0.13 GiB for "
        "non-torch memory, and 0.53 GiB for CUDAGraph memory. Replace gpu_memory_utilization config with "
        "`--kv-cache-memory=54000000000` (50.29 GiB) to fit into requested memory, or `--kv-cache-memory="
        "60000000000` (55.88 GiB) to fully utilize gpu memory. Current kv cache memory in use is 51.38 GiB.\n"
        "INFO [gpu_model_runner.py:3480] Graph capturing finished in 20 secs, took 0.53 GiB\n"
        "INFO [core.py:77] Initializing a V1 LLM engine (v0.11.0) with config: model='m', dtype=torch.bfloat16, "
        "max_seq_len=8192, tensor_parallel_size=2, kv_cache_dtype=auto,  device_config=cuda\n",
        {"free_gpu_memory_bytes": G("78.57"), "total_gpu_memory_bytes": G("79.18"), "gpu_memory_utilization": 0.9,
         "requested_memory_bytes": G("71.26"), "weights_bytes": G("14.99"), "activation_peak_bytes": G("4.76"),
         "non_torch_bytes": G("0.13"), "cuda_graph_bytes": G("0.53"), "kv_cache_bytes": G("51.38"),
         "graph_capture_seconds": 20.0, "vllm_version": "0.11.0", "max_model_len": 8192, "dtype": "bfloat16",
         "tensor_parallel_size": 2, "kv_cache_dtype": "auto"},
    ),
    # vllm-0.20.0 v1/worker/gpu_worker.py:599-606 and gpu_model_runner.py:6043
    "graph_pool_020": (
        "INFO [gpu_model_runner.py:6043] Estimated CUDA graph memory: 0.44 GiB total\n"
        "INFO [gpu_worker.py:599] CUDA graph pool memory: 0.41 GiB (actual), 0.44 GiB (estimated), "
        "difference: 0.03 GiB (7.3%).\n",
        {"cuda_graph_bytes": G("0.41"), "cuda_graph_estimate_bytes": G("0.44")},
    ),
    # vllm-0.10.1.1 utils/__init__.py:2659-2668 (the DEBUG repr of MemoryProfilingResult)
    "debug_repr_010": (
        "DEBUG [gpu_worker.py:275] Memory profiling takes 2.10 seconds. Total non KV cache memory: 20.01GiB; torch "
        "peak memory increase: 4.76GiB; non-torch forward increase memory: 0.26GiB; weights memory: 14.99GiB.\n",
        {"profiling_seconds": 2.10, "non_kv_cache_bytes": G("20.01"), "activation_peak_bytes": G("4.76"),
         "non_torch_bytes": G("0.26"), "weights_bytes": G("14.99")},
    ),
    # vllm-0.10.1.1 v1/worker/gpu_worker.py:178-187 (refusal before loading anything)
    "free_memory_refusal_010": (
        "ValueError: Free memory on device (30.12/79.19 GiB) on startup is less than desired GPU memory "
        "utilization (0.9, 71.27 GiB). Decrease GPU memory utilization or reduce GPU memory used by other "
        "processes.\n",
        {"free_gpu_memory_bytes": G("30.12"), "total_gpu_memory_bytes": G("79.19"),
         "startup_error_kind": "insufficient_free_memory", "refused_for_memory": True},
    ),
    # vllm-0.33.0 v1/core/kv_cache_planning.py:1381-1384
    "auto_fit_033": (
        "ValueError: Cannot auto-fit max_model_len: not enough GPU memory available to serve even a single token. "
        "Try increasing `gpu_memory_utilization`.\n",
        {"startup_error_kind": "no_kv_cache_memory"},
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(FROM_SOURCE))
def test_wordings_from_the_vllm_source(case: str) -> None:
    text, expected = FROM_SOURCE[case]
    result = parse_vllm_memory_report(text).as_dict()
    for key, value in expected.items():
        assert result[key] == value, f"{case}: {key} = {result[key]!r}, expected {value!r}"


def test_an_oom_while_serving_is_not_a_startup_refusal() -> None:
    served = parse_vllm_memory_report(
        "INFO:     Application startup complete.\n"
        "(EngineCore pid=112) ERROR 05-01 14:39:06 [core.py:1131] torch.OutOfMemoryError: CUDA out of memory. "
        "Tried to allocate 50.00 MiB. GPU 0 has a total capacity of 23.56 GiB of which 21.75 MiB is free.\n"
    )
    assert served.cuda_oom is True
    assert served.startup_complete is True
    assert served.startup_error is None and not served.refused_for_memory
    starting = parse_vllm_memory_report(
        "ERROR [core.py:1131] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    )
    assert starting.startup_error_kind == "cuda_oom" and starting.refused_for_memory


def test_engine_failure_without_a_reason_is_not_called_a_memory_refusal() -> None:
    report = parse_vllm_memory_report("ERROR [core.py:700] EngineCore failed to start.\nRuntimeError: boom\n")
    assert report.startup_error_kind == "engine_failed"
    assert "engine_failed" not in MEMORY_ERROR_KINDS and not report.refused_for_memory


def test_unknown_text_gives_an_empty_report_without_raising() -> None:
    for text in ("", "hello\nworld\n", "INFO 01-01 uvicorn: GET /health 200", "GiB GiB GB x: 3.4", "\x00\xff" * 50):
        report = parse_vllm_memory_report(text)
        empty = VllmMemoryReport()
        assert report.as_dict() == empty.as_dict(), text
    assert parse_vllm_memory_report(None).warnings == ["the log is not text"]
    assert list(VllmMemoryReport().as_dict()) == report_fields()


def test_absurd_figures_are_ignored() -> None:
    report = parse_vllm_memory_report("Available KV cache memory: 999999999.5 GiB\nGPU KV cache size: 12 tokens\n")
    assert report.kv_cache_bytes is None
    assert report.kv_cache_tokens == 12
    assert any("not believable" in w for w in report.warnings)


def test_garbage_and_huge_input_is_read_in_bounded_time() -> None:
    adversarial = [
        "GPU KV cache size: " + "1," * 400_000 + " tokens",
        "Maximum concurrency for " + "9" * 300_000 + " tokens per request: 1x",
        "Memory profiling results: total_gpu_memory=" + "1" * 300_000 + "GiB",
        "Available KV cache memory: " + "-" * 300_000,
        "To serve at least one request with the models's max seq len (" + "(" * 300_000,
        "\x1b[" + ";" * 300_000,
        "a" * 2_000_000,
    ]
    filler = "INFO 01-01 [x.py:1] Available KV cache memory: 1.00 GiB\n" * 80_000  # 4.3 MB: over the cap
    text = "\n".join(adversarial) + "\n" + filler + "INFO GPU KV cache size: 1,024 tokens\n"
    started = time.monotonic()
    report = parse_vllm_memory_report(text)
    elapsed = time.monotonic() - started
    assert elapsed < 10, f"{elapsed:.1f} s"
    assert len(text) > MAX_LOG_CHARS
    assert any("characters: read its first" in w for w in report.warnings)
    assert report.kv_cache_bytes == G("1.00")
    assert report.kv_cache_tokens == 1024  # the tail is read
