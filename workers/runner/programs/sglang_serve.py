"""``python -m workers.runner.programs.sglang_serve``: start SGLang's server, load it, say what happened.

Runs under the parent's memory sampler (``workers.runner.execute``), which reads NVML; this program only
runs SGLang and drives it (``workers.runner.programs.serving`` does the work shared with vLLM's program):

1. start ``PYTHON -m sglang.launch_server --model-path … --host 127.0.0.1 --port N --tp-size … …`` as a
   child in its own process group, output to a log file; it gets SIGTERM if this program dies, and its
   whole group is stopped on SIGTERM/SIGINT, so a cancelled job never leaves SGLang holding the GPU;
2. wait for ``GET /health``: SGLang answers 503 until its warm-up request has run, then 200
   (entrypoints/http_server.py:476-534 of SGLang 0.5.10.post1). If SGLang exits, its log is parsed
   (``workers.runner.sglang_log``) and the refusal reported ("SGLang refused to start: Not enough memory…");
3. read ``GET /server_info`` once (the version, and the pool and limits SGLang settled on), then fire
   ``--concurrency`` simultaneous streaming requests to the OpenAI-compatible ``/v1/completions``, each
   of exactly ``--max-input-tokens`` token ids with ``max_tokens`` = ``--max-output-tokens`` and
   ``ignore_eos`` (a field of SGLang's ``CompletionRequest``, entrypoints/openai/protocol.py:289);
4. stop the server, parse the whole log, write the result (JSON) to ``$VRAMPLAN_QUALITY_PATH`` and send
   the parent a ``result`` message.

Exit status: 0 when every request succeeded; 3 when SGLang refused to start for memory reasons, ran out
of memory, or refused the prompts because its KV pool is shorter than them (the parent maps 3 to outcome
``oom``); 1 otherwise; 2 for invalid options.

``--context-length``. SGLang serves a prompt of ``I`` tokens with ``O`` new tokens only when the context
length ``L`` leaves room: the tokenizer refuses ``I + O ≥ L`` (managers/tokenizer_manager.py:787-833), the
scheduler refuses ``I ≥ L − 6`` (managers/utils.py:126-141 with managers/tp_worker.py:301-306) and cuts
``max_new_tokens`` to ``L − 2 − I`` (managers/scheduler.py:1612-1620). So the length SGLang is given is at
least ``max(I + O + 2, I + 7)``: a workload's ``max_model_len`` of exactly ``I + O`` is raised by 2 tokens,
and the result says so (``settings.context_length_asked``).

Standard library only. ``--extra-arg`` values come from the staff template, never from users; they are
passed to SGLang unchanged (``--host`` and ``--port`` excepted: this program owns them).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from typing import Any

from ..sglang_log import SglangMemoryReport, parse_sglang_memory_report, serving_memory_failure
from .serving import (
    EXIT_OOM,
    HOST,
    Engine,
    EngineReport,
    LogWatch,
    RequestResult,
    add_load_options,
    float_range,
    get_json,
    int_range,
    load_settings,
    optional_flags,
    parse_program_options,
    safe_name,
    serve,
)

__all__ = ["EXIT_OOM", "SGLANG", "build_parser", "main", "needed_context_length", "parse_options", "sglang_command"]

#: SGLang 0.5.10.post1's choices (server_args.py:3827-3831 and 3857-3861).
DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")
KV_CACHE_DTYPES = ("auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16", "fp4_e2m1")
#: Kept from ``/server_info`` (server_args fields, the scheduler's init info and the version).
SERVER_INFO_KEYS = (
    "version", "max_total_num_tokens", "max_req_input_len", "mem_fraction_static", "context_length",
    "max_running_requests", "chunked_prefill_size", "cuda_graph_max_bs", "page_size", "kv_cache_dtype", "dtype",
    "tp_size", "pp_size",
)  # fmt: skip
#: Lines in the log that mean the start-up has failed (sglang_log.FORMATS names their sources).
_FATAL = re.compile(
    r"Not enough memory\. Please try to increase --mem-fraction-static|Memory pool size is too small|"
    r"max_running_request is zero|CUDA out of memory|OutOfMemoryError|Scheduler hit an exception|"
    r"Received sigquit from a child process|Initialization failed\.|scheduler died during initialization|"
    r"is greater than the derived context_length"
)
#: Start-up stages seen in the log → progress percent.
_STAGES = (
    (re.compile(r"Init torch distributed ends|Load weight begin"), 20.0),
    (re.compile(r"Load weight end"), 40.0),
    (re.compile(r"KV Cache is allocated|Memory pool end"), 60.0),
    (re.compile(r"Capture (?:piecewise )?cuda graph (?:begin|end)", re.IGNORECASE), 80.0),
    (re.compile(r"max_total_num_tokens=|Uvicorn running on"), 90.0),
    (re.compile(r"The server is fired up and ready to roll"), 95.0),
)


# --- options -------------------------------------------------------------------------------------


def _or_auto(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An option whose value "auto" leaves SGLang's own default (the flag is then not passed): None."""

    def parse_or_auto(text: str) -> Any:
        return None if text == "auto" else parse(text)

    return parse_or_auto


def needed_context_length(max_input_tokens: int, max_output_tokens: int) -> int:
    """The shortest ``--context-length`` at which SGLang serves the prompt and every output token (module doc)."""
    return max(max_input_tokens + max_output_tokens + 2, max_input_tokens + 7)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m workers.runner.programs.sglang_serve",
        description="Start SGLang's server, send concurrent streaming completions, report start-up memory (from "
        "SGLang's log) and latency. Options whose value is 'auto' are left to SGLang's defaults.",
    )
    add = parser.add_argument
    add("--model-path", required=True, type=safe_name, help="model repository or local path, passed to SGLang")
    add("--served-model-name", type=safe_name, default=None, help="name the server exposes (default: --model-path)")
    add("--context-length", type=_or_auto(int_range(16, 100_000_000)), default=None,
        help="SGLang --context-length (raised to what the requests need, see the module doc)")  # fmt: skip
    add("--mem-fraction-static", type=_or_auto(float_range(0.0, 1.0, low_open=True)), default=None)
    add("--max-running-requests", type=_or_auto(int_range(1, 1_000_000)), default=None)
    add("--chunked-prefill-size", type=_or_auto(int_range(1, 100_000_000)), default=None)
    add("--cuda-graph-max-bs", type=_or_auto(int_range(1, 1_000_000)), default=None)
    add("--page-size", type=_or_auto(int_range(1, 4096)), default=None)
    add("--tp-size", type=int_range(1, 1024), default=1)
    add("--pp-size", type=int_range(1, 1024), default=1)
    add("--dtype", choices=DTYPES, default=None)
    add("--kv-cache-dtype", choices=KV_CACHE_DTYPES, default=None)
    add_load_options(parser, "SGLang")
    return parser


def parse_options(argv: list[str] | None = None) -> argparse.Namespace:
    """The options, with ``--context-length`` raised to what the requests need (the asked one kept)."""
    args = parse_program_options(build_parser(), argv)
    args.context_length_asked = args.context_length
    if args.context_length is not None:
        args.context_length = max(args.context_length, needed_context_length(args.max_input_tokens,
                                                                               args.max_output_tokens))  # fmt: skip
    return args


def sglang_command(args: argparse.Namespace, port: int) -> list[str]:
    """The server's argv: fixed module, loopback host, and only the options that were given."""
    fixed = [args.python, "-m", "sglang.launch_server", "--model-path", args.model_path, "--host", HOST, "--port",
             str(port)]  # fmt: skip
    given = optional_flags((
        ("--served-model-name", args.served_model_name),
        ("--tp-size", args.tp_size),
        ("--pp-size", args.pp_size if args.pp_size != 1 else None),
        ("--context-length", args.context_length),
        ("--mem-fraction-static", args.mem_fraction_static),
        ("--max-running-requests", args.max_running_requests),
        ("--chunked-prefill-size", args.chunked_prefill_size),
        ("--cuda-graph-max-bs", args.cuda_graph_max_bs),
        ("--page-size", args.page_size),
        ("--dtype", args.dtype),
        ("--kv-cache-dtype", args.kv_cache_dtype),
    ))  # fmt: skip
    return [*fixed, *given, *args.extra_arg]


def settings(args: argparse.Namespace, port: int | None) -> dict[str, Any]:
    """What the result and the parent's conditions record of this run's settings."""
    return {
        "model_path": args.model_path,
        "served_model_name": args.served_model_name,
        "context_length": args.context_length,
        "context_length_asked": args.context_length_asked,
        "mem_fraction_static": args.mem_fraction_static,
        "max_running_requests": args.max_running_requests,
        "chunked_prefill_size": args.chunked_prefill_size,
        "cuda_graph_max_bs": args.cuda_graph_max_bs,
        "page_size": args.page_size,
        "tp_size": args.tp_size,
        "pp_size": args.pp_size,
        "dtype": args.dtype,
        "kv_cache_dtype": args.kv_cache_dtype,
        **load_settings(args, port),
    }


# --- what SGLang says ----------------------------------------------------------------------------


def server_info(base_url: str) -> dict[str, Any]:
    """What ``GET /server_info`` says (entrypoints/http_server.py:601-618), cut to :data:`SERVER_INFO_KEYS`."""
    info = get_json(base_url + "/server_info", timeout=30.0)
    if not isinstance(info, dict):
        return {}
    return {key: info[key] for key in SERVER_INFO_KEYS if isinstance(info.get(key), str | int | float | bool)}


def _versions(_report: EngineReport, info: dict[str, Any]) -> dict[str, str]:
    version = info.get("version")
    return {"sglang": version} if isinstance(version, str) else {}


def _load_memory_failure(engine_report: EngineReport, results: list[RequestResult]) -> str | None:
    if not isinstance(engine_report, SglangMemoryReport):
        return None
    return serving_memory_failure(engine_report, [r.error for r in results if r.error])


SGLANG = Engine(
    name="sglang",
    label="SGLang",
    program="sglang_serve",
    command=sglang_command,
    settings=settings,
    parse_log=parse_sglang_memory_report,
    served_model=lambda args: args.served_model_name or args.model_path,
    watch=LogWatch(_STAGES, _FATAL),
    versions=_versions,
    # /health runs a one-token generation and answers after at least 1 s, at most SGLANG_HEALTH_CHECK_TIMEOUT
    # (20 s by default; entrypoints/http_server.py:185, 499-548)
    health_timeout_s=25.0,
    load_memory_failure=_load_memory_failure,
    server_info=server_info,
)


def main(argv: list[str] | None = None) -> int:
    return serve(SGLANG, parse_options(argv))


if __name__ == "__main__":
    sys.exit(main())
