"""``python -m workers.runner.programs.vllm_serve``: start vLLM's OpenAI server, load it, say what happened.

Runs under the parent's memory sampler (``workers.runner.execute``), which reads NVML; this program
only runs vLLM and drives it (``workers.runner.programs.serving`` does the work shared with the other
engines):

1. start ``PYTHON -m vllm.entrypoints.openai.api_server --model … --host 127.0.0.1 --port N …`` as a
   child in its own process group (stdout and stderr to a log file that is tailed for progress). The
   child gets SIGTERM if this program dies (``PR_SET_PDEATHSIG``), and this program stops the child's
   whole group on SIGTERM/SIGINT, so a cancelled job never leaves vLLM holding the GPU;
2. wait for ``GET /health`` while the child lives (``--startup-timeout``). If vLLM exits, its log is
   parsed (``workers.runner.vllm_log``) and the refusal reported ("vLLM refused to start: …");
3. fire ``--concurrency`` simultaneous streaming requests to ``/v1/completions``, each with a prompt of
   exactly ``--max-input-tokens`` token ids (a different sequence per request, so that prefix caching
   cannot share their KV blocks) and ``max_tokens`` = ``--max-output-tokens`` with ``ignore_eos``,
   timing the first token and the tokens after it;
4. stop the server (SIGTERM to its group, SIGKILL after ``--stop-grace`` seconds), parse the whole log
   and write the result (JSON) to ``$VRAMPLAN_QUALITY_PATH`` (stdout when unset), and send the parent a
   ``result`` message (timing, conditions, versions, oom).

Exit status: 0 when every request succeeded; 3 when vLLM ran out of memory or refused to start for
memory reasons (the parent maps 3 to outcome ``oom``); 1 otherwise; 2 for invalid options.

Standard library only. ``--extra-arg`` values come from the staff template, never from users; they are
passed to vLLM unchanged (``--host`` and ``--port`` excepted: this program owns them).
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from ..vllm_log import VllmMemoryReport, parse_vllm_memory_report
from .serving import (
    EXIT_OOM,
    HOST,
    PROMPT_TOKEN_SPAN,
    Engine,
    EngineReport,
    LogWatch,
    add_load_options,
    float_range,
    int_range,
    load_settings,
    optional_flags,
    parse_program_options,
    prompt_ids,
    safe_name,
    serve,
)

__all__ = ["EXIT_OOM", "PROMPT_TOKEN_SPAN", "VLLM", "build_parser", "main", "parse_options", "prompt_ids"]

_DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")
_KV_DTYPE = re.compile(r"[a-z0-9_]{1,32}")
#: Lines in the log that mean the start-up has failed (vLLM sometimes lingers after logging them).
_FATAL = re.compile(
    r"No available memory for the cache blocks|To serve at least one request|is larger than the maximum number "
    r"of tokens|CUDA out of memory|OutOfMemoryError|EngineCore failed to start|Engine core initialization failed"
)
#: Start-up stages seen in the log → progress percent.
_STAGES = (
    (re.compile(r"Starting to load model|Loading weights took|Loading model weights"), 20.0),
    (re.compile(r"Model loading took|model weights took|Loading model weights took"), 40.0),
    (re.compile(r"Memory profiling takes|Available KV cache memory|KV cache size:|blocks: \d"), 60.0),
    (re.compile(r"Capturing CUDA graph|Graph capturing finished|CUDA graph pool memory"), 80.0),
    (re.compile(r"Starting vLLM API server|Uvicorn running on|Application startup complete"), 95.0),
)


# --- options -------------------------------------------------------------------------------------


def _kv_dtype(text: str) -> str:
    if not _KV_DTYPE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a KV cache dtype name (auto, fp8, fp8_e5m2, …)")
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m workers.runner.programs.vllm_serve",
        description="Start vLLM's OpenAI-compatible server, send concurrent streaming completions, report "
        "start-up memory (from vLLM's log) and latency.",
    )
    add = parser.add_argument
    add("--model", required=True, type=safe_name, help="model repository or local path, passed to vLLM")
    add("--served-model-name", type=safe_name, default=None, help="name the server exposes (default: --model)")
    add("--max-model-len", type=int_range(16, 100_000_000), default=None, help="vLLM --max-model-len")
    add("--max-num-seqs", type=int_range(1, 1_000_000), default=None, help="vLLM --max-num-seqs")
    add("--tensor-parallel-size", type=int_range(1, 1024), default=1)
    add("--pipeline-parallel-size", type=int_range(1, 1024), default=1)
    add("--gpu-memory-utilization", type=float_range(0.0, 1.0, low_open=True), default=None)
    add("--dtype", choices=_DTYPES, default=None)
    add("--kv-cache-dtype", type=_kv_dtype, default=None)
    add_load_options(parser, "vLLM")
    return parser


def parse_options(argv: list[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parse_program_options(parser, argv)
    if args.max_model_len is not None and args.max_input_tokens + args.max_output_tokens > args.max_model_len:
        parser.error(
            f"--max-input-tokens ({args.max_input_tokens}) + --max-output-tokens ({args.max_output_tokens}) "
            f"exceed --max-model-len ({args.max_model_len})"
        )
    return args


def vllm_command(args: argparse.Namespace, port: int) -> list[str]:
    """The server's argv: fixed module, loopback host, and only the options that were given."""
    command = [args.python, "-m", "vllm.entrypoints.openai.api_server", "--model", args.model,
               "--host", HOST, "--port", str(port)]  # fmt: skip
    command += optional_flags((
        ("--served-model-name", args.served_model_name),
        ("--max-model-len", args.max_model_len),
        ("--max-num-seqs", args.max_num_seqs),
        ("--tensor-parallel-size", args.tensor_parallel_size),
        ("--pipeline-parallel-size", args.pipeline_parallel_size if args.pipeline_parallel_size != 1 else None),
        ("--gpu-memory-utilization", args.gpu_memory_utilization),
        ("--dtype", args.dtype),
        ("--kv-cache-dtype", args.kv_cache_dtype),
    ))  # fmt: skip
    return command + list(args.extra_arg)


def settings(args: argparse.Namespace, port: int | None) -> dict[str, Any]:
    return {
        "model": args.model,
        "served_model_name": args.served_model_name,
        "max_model_len": args.max_model_len,
        "max_num_seqs": args.max_num_seqs,
        "tensor_parallel_size": args.tensor_parallel_size,
        "pipeline_parallel_size": args.pipeline_parallel_size,
        "gpu_memory_utilization": args.gpu_memory_utilization,
        "dtype": args.dtype,
        "kv_cache_dtype": args.kv_cache_dtype,
        **load_settings(args, port),
    }


def _versions(engine_report: EngineReport, _server_info: dict[str, Any]) -> dict[str, str]:
    version = engine_report.vllm_version if isinstance(engine_report, VllmMemoryReport) else None
    return {"vllm": version} if version else {}


VLLM = Engine(
    name="vllm",
    label="vLLM",
    program="vllm_serve",
    command=vllm_command,
    settings=settings,
    parse_log=parse_vllm_memory_report,
    served_model=lambda args: args.served_model_name or args.model,
    watch=LogWatch(_STAGES, _FATAL),
    versions=_versions,
    env=(("VLLM_NO_USAGE_STATS", "1"),),  # no usage reports from GPU nodes
)


def main(argv: list[str] | None = None) -> int:
    return serve(VLLM, parse_options(argv))


if __name__ == "__main__":
    sys.exit(main())
