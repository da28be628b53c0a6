"""``python -m workers.runner.programs.vllm_serve``: start vLLM's OpenAI server, load it, say what happened.

Runs under the parent's memory sampler (``workers.runner.execute``), which reads NVML; this program
only runs vLLM and drives it:

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
import contextlib
import ctypes
import json
import math
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..report import QUALITY_PATH_ENV, checkpoint, progress, report
from ..vllm_log import MAX_LOG_CHARS, VllmMemoryReport, parse_vllm_memory_report

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_OOM = 3  # the same value as workers.runner.execute.EXIT_OOM
HOST = "127.0.0.1"
MAX_ERRORS_KEPT = 5
MAX_ERROR_CHARS = 500
LOG_TAIL_CHARS = 8000
EXIT_WAIT_AFTER_ERROR_S = 30.0  # vLLM logged a fatal start-up error: give it this long to exit by itself
PROMPT_TOKEN_SPAN = 1000  # prompt ids are drawn from [base, base + span)

#: Matched with ``fullmatch``: ``$`` would also match before a final newline ("org/model\n").
_SAFE = re.compile(r"[A-Za-z0-9_./:@+-]{1,512}")
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


def _int_range(low: int, high: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is outside {low}..{high}")
        return value

    return parse


def _float_range(low: float, high: float, *, low_open: bool = False) -> Any:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or value > high or value < low or (low_open and value == low):
            bound = f"({low}, {high}]" if low_open else f"[{low}, {high}]"
            raise argparse.ArgumentTypeError(f"{text} is outside {bound}")
        return value

    return parse


def _name(text: str) -> str:
    if not _SAFE.fullmatch(text) or text.startswith("-"):
        raise argparse.ArgumentTypeError(
            f"{text!r}: use 1-512 characters of A-Z a-z 0-9 _ . / : @ + - (not starting with '-')"
        )
    return text


def _kv_dtype(text: str) -> str:
    if not _KV_DTYPE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a KV cache dtype name (auto, fp8, fp8_e5m2, …)")
    return text


def _extra_arg(text: str) -> str:
    if not text or len(text) > 4096 or "\x00" in text:
        raise argparse.ArgumentTypeError("an extra argument is 1-4096 characters, without NUL")
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m workers.runner.programs.vllm_serve",
        description="Start vLLM's OpenAI-compatible server, send concurrent streaming completions, report "
        "start-up memory (from vLLM's log) and latency.",
    )
    add = parser.add_argument
    add("--model", required=True, type=_name, help="model repository or local path, passed to vLLM")
    add("--served-model-name", type=_name, default=None, help="name the server exposes (default: --model)")
    add("--max-model-len", type=_int_range(16, 100_000_000), default=None, help="vLLM --max-model-len")
    add("--max-num-seqs", type=_int_range(1, 1_000_000), default=None, help="vLLM --max-num-seqs")
    add("--tensor-parallel-size", type=_int_range(1, 1024), default=1)
    add("--pipeline-parallel-size", type=_int_range(1, 1024), default=1)
    add("--gpu-memory-utilization", type=_float_range(0.0, 1.0, low_open=True), default=None)
    add("--dtype", choices=_DTYPES, default=None)
    add("--kv-cache-dtype", type=_kv_dtype, default=None)
    add("--max-input-tokens", type=_int_range(1, 100_000_000), default=512, help="prompt length, in tokens")
    add("--max-output-tokens", type=_int_range(1, 100_000_000), default=128, help="max_tokens of each request")
    add("--concurrency", type=_int_range(1, 4096), default=1, help="simultaneous requests (one each)")
    add("--port", type=_int_range(0, 65535), default=0, help="0 picks a free port")
    add("--startup-timeout", type=_float_range(1, 7 * 86_400), default=1800.0, metavar="SECONDS")
    add("--request-timeout", type=_float_range(1, 7 * 86_400), default=600.0, metavar="SECONDS")
    add("--stop-grace", type=_float_range(0, 3600), default=20.0, metavar="SECONDS",
        help="SIGTERM → SIGKILL delay when stopping the server")  # fmt: skip
    add("--prompt-token-base", type=_int_range(0, 100_000_000), default=1000,
        help=f"prompt token ids are drawn from [BASE, BASE+{PROMPT_TOKEN_SPAN})")  # fmt: skip
    add("--python", default=sys.executable, help="interpreter that has vllm installed (default: this one)")
    add("--log-file", default=None, help="where vLLM's output goes (default: a temporary file, removed)")
    add("--extra-arg", action="append", default=[], type=_extra_arg, metavar="ARG",
        help="passed to vLLM as-is; repeat for several (write --extra-arg=--flag for a flag)")  # fmt: skip
    return parser


def parse_options(argv: list[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.max_model_len is not None and args.max_input_tokens + args.max_output_tokens > args.max_model_len:
        parser.error(
            f"--max-input-tokens ({args.max_input_tokens}) + --max-output-tokens ({args.max_output_tokens}) "
            f"exceed --max-model-len ({args.max_model_len})"
        )
    python = args.python if os.sep in args.python else shutil.which(args.python)
    if not python or not os.path.isfile(python) or not os.access(python, os.X_OK):
        parser.error(f"--python {args.python!r} is not an executable file")
    args.python = python
    if len(args.extra_arg) > 64:
        parser.error("at most 64 --extra-arg values")
    for extra in args.extra_arg:
        if extra.split("=", 1)[0] in ("--host", "--port"):
            parser.error(f"--extra-arg {extra!r}: this program sets --host and --port itself")
    return args


def vllm_command(args: argparse.Namespace, port: int) -> list[str]:
    """The server's argv: fixed module, loopback host, and only the options that were given."""
    command = [args.python, "-m", "vllm.entrypoints.openai.api_server", "--model", args.model,
               "--host", HOST, "--port", str(port)]  # fmt: skip
    optional = (
        ("--served-model-name", args.served_model_name),
        ("--max-model-len", args.max_model_len),
        ("--max-num-seqs", args.max_num_seqs),
        ("--tensor-parallel-size", args.tensor_parallel_size),
        ("--pipeline-parallel-size", args.pipeline_parallel_size if args.pipeline_parallel_size != 1 else None),
        ("--gpu-memory-utilization", args.gpu_memory_utilization),
        ("--dtype", args.dtype),
        ("--kv-cache-dtype", args.kv_cache_dtype),
    )
    for flag, value in optional:
        if value is not None:
            command += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
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
        "max_input_tokens": args.max_input_tokens,
        "max_output_tokens": args.max_output_tokens,
        "concurrency": args.concurrency,
        "extra_args": list(args.extra_arg),
        "port": port,
        "python": args.python,
    }


# --- the server ----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _die_with_us() -> None:
    """In the server child, before exec: SIGTERM when this program dies (Linux; best effort)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Server:
    """The vLLM child: its own process group, output to a log file, stopped as a group."""

    def __init__(self, command: list[str], log_path: Path) -> None:
        self.command = command
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        self._offset = 0
        self._partial = ""

    def start(self) -> None:
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.setdefault("VLLM_NO_USAGE_STATS", "1")  # no usage reports from GPU nodes
        env.setdefault("DO_NOT_TRACK", "1")
        env.pop("VRAMPLAN_REPORT_FD", None)  # the report pipe is this program's, not vLLM's
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                start_new_session=True, preexec_fn=_die_with_us,
            )  # fmt: skip

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def new_lines(self) -> list[str]:
        """Complete lines written since the last call (the log tail)."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._offset)
                chunk = log.read(1 << 20)
        except OSError:
            return []
        self._offset += len(chunk)
        text = self._partial + chunk.decode("utf-8", errors="replace")
        lines = text.splitlines(keepends=True)
        self._partial = lines.pop() if lines and not lines[-1].endswith(("\n", "\r")) else ""
        if len(self._partial) > 100_000:
            self._partial = ""
        return lines

    def stop(self, grace_s: float) -> int | None:
        """SIGTERM the group, SIGKILL it after ``grace_s``; the exit status (None if never started)."""
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=grace_s)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)  # and whatever of the group outlived the server
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
        return process.returncode

    def read_log(self) -> str:
        """The log for the parser: all of it, or its head and tail when it is very long."""
        try:
            size = self.log_path.stat().st_size
            with open(self.log_path, "rb") as log:
                if size <= MAX_LOG_CHARS:
                    return log.read().decode("utf-8", errors="replace")
                head = log.read(MAX_LOG_CHARS * 3 // 4)
                log.seek(size - MAX_LOG_CHARS // 4)
                tail = log.read()
        except OSError:
            return ""
        return head.decode("utf-8", errors="replace") + "\n" + tail.decode("utf-8", errors="replace")


#: No proxies: the server is on loopback, whatever http_proxy says.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _get(url: str, timeout: float) -> int:
    request = urllib.request.Request(url, method="GET")
    with _OPENER.open(request, timeout=timeout) as response:
        return int(response.status)


@dataclass
class StartupResult:
    ready: bool
    seconds: float
    reason: str | None = None  # "exited", "timeout", "fatal_error_logged"


def wait_until_ready(server: Server, base_url: str, timeout_s: float, poll_s: float = 0.5) -> StartupResult:
    """Poll /health while the server lives; report start-up progress from its log."""
    started = time.monotonic()
    percent = 5.0
    progress("startup", percent)
    fatal_at: float | None = None
    while True:
        for line in server.new_lines():
            for pattern, stage in _STAGES:
                if stage > percent and pattern.search(line):
                    percent = stage
                    progress("startup", percent)
            if fatal_at is None and _FATAL.search(line):
                fatal_at = time.monotonic()
        elapsed = time.monotonic() - started
        if not server.alive():
            return StartupResult(False, elapsed, "exited")
        with contextlib.suppress(OSError, ValueError):
            if _get(base_url + "/health", timeout=min(5.0, poll_s * 4)) == 200:
                progress("startup", 100.0)
                return StartupResult(True, elapsed)
        if elapsed > timeout_s:
            return StartupResult(False, elapsed, "timeout")
        if fatal_at is not None and time.monotonic() - fatal_at > EXIT_WAIT_AFTER_ERROR_S:
            return StartupResult(False, elapsed, "fatal_error_logged")
        time.sleep(poll_s)


# --- the load ------------------------------------------------------------------------------------


@dataclass
class RequestResult:
    ok: bool = False
    ttft_ms: float | None = None
    ms_per_output_token: float | None = None
    output_tokens: int = 0
    error: str | None = None


def prompt_ids(index: int, length: int, base: int) -> list[int]:
    """``length`` token ids in [base, base + span); request ``index`` gets its own sequence from the first id."""
    offset = (index * 7919) % PROMPT_TOKEN_SPAN
    return [base + (offset + j) % PROMPT_TOKEN_SPAN for j in range(length)]


def stream_completion(base_url: str, model: str, prompt: list[int], max_tokens: int, timeout_s: float) -> RequestResult:
    """One streaming completion; times the first chunk and the chunks after it."""
    result = RequestResult()
    body = json.dumps({
        "model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
        "stream": True, "stream_options": {"include_usage": True},
    }).encode()  # fmt: skip
    request = urllib.request.Request(
        base_url + "/v1/completions", data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    sent = time.monotonic()
    deadline = sent + timeout_s
    first: float | None = None
    last: float | None = None
    chunks = 0
    usage_tokens: int | None = None
    done = False
    try:
        with _OPENER.open(request, timeout=timeout_s) as response:
            while time.monotonic() < deadline:
                raw = response.readline(1 << 20)
                if not raw:
                    break
                line = raw.decode("utf-8", errors="replace").strip()
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    done = True
                    break
                try:
                    event = json.loads(data)
                except ValueError:
                    result.error = f"unreadable stream event: {data[:200]}"
                    break
                if not isinstance(event, dict):
                    continue
                if "error" in event or event.get("object") == "error":
                    result.error = f"server error in stream: {json.dumps(event)[:MAX_ERROR_CHARS]}"
                    break
                usage = event.get("usage")
                if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
                    usage_tokens = usage["completion_tokens"]
                if event.get("choices"):
                    now = time.monotonic()
                    first = now if first is None else first
                    last = now
                    chunks += 1
            else:
                result.error = f"no end of stream within --request-timeout ({timeout_s:g} s)"
    except urllib.error.HTTPError as exc:
        detail = exc.read(MAX_ERROR_CHARS).decode("utf-8", errors="replace") if exc.fp else ""
        result.error = f"HTTP {exc.code}: {detail}".strip()
    except (OSError, ValueError) as exc:  # URLError, timeouts, resets
        result.error = f"{type(exc).__name__}: {exc}"
    result.output_tokens = usage_tokens if usage_tokens is not None else chunks
    if first is not None:
        result.ttft_ms = (first - sent) * 1000
        if last is not None and result.output_tokens > 1 and last > first:
            result.ms_per_output_token = (last - first) * 1000 / (result.output_tokens - 1)
    if result.error is None and not done:
        result.error = "the stream ended without [DONE]"
    if result.error is None and result.output_tokens == 0:
        result.error = "no output tokens"
    result.ok = result.error is None
    if result.error:
        result.error = result.error[:MAX_ERROR_CHARS]
    return result


def run_load(args: argparse.Namespace, base_url: str, model: str) -> list[RequestResult]:
    """``--concurrency`` requests released together; progress as they finish."""
    count = args.concurrency
    results: list[RequestResult | None] = [None] * count
    barrier = threading.Barrier(count)
    lock = threading.Lock()
    finished = [0]

    def one(index: int) -> None:
        prompt = prompt_ids(index, args.max_input_tokens, args.prompt_token_base)
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait(timeout=60)
        try:
            outcome = stream_completion(base_url, model, prompt, args.max_output_tokens, args.request_timeout)
        except Exception as exc:  # a bug here must not hang the run: count the request as failed
            outcome = RequestResult(error=f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS])
        results[index] = outcome
        with lock:
            finished[0] += 1
            progress("load", 100.0 * finished[0] / count)

    progress("load", 0.0)
    threads = [threading.Thread(target=one, args=(i,), name=f"request-{i}", daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(args.request_timeout + 120)
    return [r if r is not None else RequestResult(error="the request thread did not finish") for r in results]


def latency(results: list[RequestResult]) -> dict[str, Any]:
    ttft = [r.ttft_ms for r in results if r.ok and r.ttft_ms is not None]
    per_token = [r.ms_per_output_token for r in results if r.ok and r.ms_per_output_token is not None]

    def rounded(value: float | None) -> float | None:
        return None if value is None else round(value, 3)

    return {
        "ttft_ms_p50": rounded(statistics.median(ttft)) if ttft else None,
        "ttft_ms_max": rounded(max(ttft)) if ttft else None,
        "ms_per_output_token_p50": rounded(statistics.median(per_token)) if per_token else None,
        "ms_per_output_token_max": rounded(max(per_token)) if per_token else None,
        "output_tokens_total": sum(r.output_tokens for r in results if r.ok),
    }


# --- the run -------------------------------------------------------------------------------------


@dataclass
class _Run:
    args: argparse.Namespace
    port: int | None = None
    server: Server | None = None
    startup: StartupResult | None = None
    results: list[RequestResult] = field(default_factory=list)
    stopped: bool = False


def _exit_code(engine: VllmMemoryReport, results: list[RequestResult], startup: StartupResult | None) -> int:
    if startup is not None and startup.ready and results and all(r.ok for r in results):
        return EXIT_OK
    if engine.refused_for_memory or engine.cuda_oom:
        return EXIT_OOM
    return EXIT_FAILED


def _outcome(code: int, startup: StartupResult | None, engine: VllmMemoryReport) -> str:
    if code == EXIT_OK:
        return "succeeded"
    if code == EXIT_OOM:
        return "oom" if startup is not None and startup.ready else "refused_for_memory"
    if startup is None or not startup.ready:
        return "startup_timeout" if startup is not None and startup.reason == "timeout" else "startup_failed"
    return "requests_failed"


def _message(startup: StartupResult | None, engine: VllmMemoryReport, args: argparse.Namespace) -> str | None:
    if engine.startup_error and (startup is None or not startup.ready):
        return f"vLLM refused to start: {engine.startup_error}"
    if startup is not None and not startup.ready:
        if startup.reason == "timeout":
            return f"vLLM did not answer /health within --startup-timeout ({args.startup_timeout:g} s)"
        return "vLLM exited before it was ready (no known reason in its log)"
    if engine.cuda_oom:
        return "vLLM ran out of GPU memory while serving the requests"
    return None


def build_result(run: _Run, engine: VllmMemoryReport, log_text: str, code: int) -> dict[str, Any]:
    results = run.results
    errors = [r.error for r in results if r.error][:MAX_ERRORS_KEPT]
    lat = latency(results)
    result: dict[str, Any] = {
        "engine": "vllm",
        "outcome": _outcome(code, run.startup, engine),
        "exit_code": code,
        "message": _message(run.startup, engine, run.args),
        "engine_report": engine.as_dict(),
        "startup_seconds": round(run.startup.seconds, 3) if run.startup and run.startup.ready else None,
        "requests": {
            "sent": len(results),
            "succeeded": sum(r.ok for r in results),
            "failed": sum(not r.ok for r in results),
            "errors": errors,
        },
        "latency": lat,
        "timing": {"ms_per_output_token": lat["ms_per_output_token_p50"], "ttft_ms": lat["ttft_ms_p50"]},
        "settings": {**settings(run.args, run.port), "vllm_command": run.server.command if run.server else None},
    }
    if code != EXIT_OK:
        result["log_tail"] = log_text[-LOG_TAIL_CHARS:]
    return result


def _write_result(result: dict[str, Any]) -> None:
    text = json.dumps(result, indent=1, allow_nan=False, default=str)
    path = os.environ.get(QUALITY_PATH_ENV)
    if path:
        Path(path).write_text(text)
    else:
        print(text)


def _finish(run: _Run) -> int:
    """Stop the server, read its log, write and report the result; the exit status."""
    if run.server is not None and not run.stopped:
        run.stopped = True
        progress("shutdown", 0.0)
        run.server.stop(run.args.stop_grace)
    log_text = run.server.read_log() if run.server is not None else ""
    engine = parse_vllm_memory_report(log_text)
    code = _exit_code(engine, run.results, run.startup)
    result = build_result(run, engine, log_text, code)
    _write_result(result)
    if result["message"]:
        print(f"vllm_serve: {result['message']}", file=sys.stderr)
    args = run.args
    report({
        "type": "result",
        "timing": result["timing"],
        "conditions": {
            "engine": "vllm", "concurrency": args.concurrency, "max_input_tokens": args.max_input_tokens,
            "max_output_tokens": args.max_output_tokens, "requests_succeeded": result["requests"]["succeeded"],
            "startup_seconds": result["startup_seconds"], "settings": settings(args, run.port),
        },
        "versions": {"vllm": engine.vllm_version} if engine.vllm_version else {},
        "oom": code == EXIT_OOM,
        "phase": "startup" if run.startup is None or not run.startup.ready else "load",
    })  # fmt: skip
    return code


def main(argv: list[str] | None = None) -> int:
    args = parse_options(argv)
    run = _Run(args)
    temporary_log = args.log_file is None
    log_path = Path(args.log_file) if args.log_file else Path(tempfile.mkstemp(prefix="vllm-serve-", suffix=".log")[1])

    def on_signal(signum: int, _frame: Any) -> None:
        if run.server is not None and not run.stopped:
            run.stopped = True
            run.server.stop(min(args.stop_grace, 10.0))
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        run.port = args.port or free_port()
        base_url = f"http://{HOST}:{run.port}"
        run.server = Server(vllm_command(args, run.port), log_path)
        run.server.start()
        run.startup = wait_until_ready(run.server, base_url, args.startup_timeout)
        if run.startup.ready:
            checkpoint("server_ready")
            run.results = run_load(args, base_url, args.served_model_name or args.model)
            checkpoint("load_done")
        return _finish(run)
    finally:
        if run.server is not None and not run.stopped:
            run.stopped = True
            run.server.stop(min(args.stop_grace, 10.0))
        if temporary_log:
            with contextlib.suppress(OSError):
                log_path.unlink()


if __name__ == "__main__":
    sys.exit(main())
