"""What the serving-engine programs share: run an OpenAI-compatible server as a child, load it, report.

``vllm_serve`` and ``sglang_serve`` differ in the server's command, its log and what its log means;
everything else is here, once:

1. options every program takes (prompt and output length, concurrency, time limits, the interpreter,
   ``--extra-arg``), with their checks;
2. the server child (:class:`Server`): its own process group, stdout and stderr to a log file that is
   tailed for progress, ``PR_SET_PDEATHSIG`` so that it gets SIGTERM if the program dies, and a stop
   that SIGTERMs the whole group and SIGKILLs it after a grace period, so that a cancelled job never
   leaves an engine holding the GPU;
3. the start-up wait (:func:`wait_until_ready`): poll the engine's health endpoint while the child
   lives, report start-up stages seen in the log as progress, give up at the time limit or some time
   after the log said that the start-up failed (engines sometimes linger after that);
4. the load (:func:`run_load`): ``--concurrency`` streaming ``/v1/completions`` requests released
   together, each of exactly ``--max-input-tokens`` token ids (a different sequence per request, so
   that prefix caching cannot share their KV cache) and ``max_tokens`` = ``--max-output-tokens`` with
   ``ignore_eos``, timing the first token and the tokens after it;
5. the result (:func:`serve`): stop the server, parse its log with the engine's parser, write the
   result (JSON) to ``$VRAMPLAN_QUALITY_PATH`` (stdout when unset) and send the parent
   (``workers.runner.execute``) a ``result`` message.

Exit status: 0 when every request succeeded; 3 when the engine ran out of memory or refused to start
(or to serve the requests) for memory reasons (the parent maps 3 to outcome ``oom``); 1 otherwise;
2 for invalid options (argparse).

Standard library only: no engine is imported in this process.
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..engine_log import MAX_LOG_CHARS
from ..report import QUALITY_PATH_ENV, checkpoint, progress, report

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_OOM = 3  # the same value as workers.runner.execute.EXIT_OOM
HOST = "127.0.0.1"
MAX_ERRORS_KEPT = 5
MAX_ERROR_CHARS = 500
LOG_TAIL_CHARS = 8000
EXIT_WAIT_AFTER_ERROR_S = 30.0  # the engine logged a fatal start-up error: give it this long to exit by itself
PROMPT_TOKEN_SPAN = 1000  # prompt ids are drawn from [base, base + span)

#: Matched with ``fullmatch``: ``$`` would also match before a final newline ("org/model\n").
_SAFE = re.compile(r"[A-Za-z0-9_./:@+-]{1,512}")


# --- options -------------------------------------------------------------------------------------


def int_range(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer in [low, high]."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is outside {low}..{high}")
        return value

    return parse


def float_range(low: float, high: float, *, low_open: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number in [low, high] (or (low, high])."""

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


def safe_name(text: str) -> str:
    """An argparse type for a model name or path passed to the engine: never an option, no odd characters."""
    if not _SAFE.fullmatch(text) or text.startswith("-"):
        raise argparse.ArgumentTypeError(
            f"{text!r}: use 1-512 characters of A-Z a-z 0-9 _ . / : @ + - (not starting with '-')"
        )
    return text


def _extra_arg(text: str) -> str:
    if not text or len(text) > 4096 or "\x00" in text:
        raise argparse.ArgumentTypeError("an extra argument is 1-4096 characters, without NUL")
    return text


def add_load_options(parser: argparse.ArgumentParser, engine_label: str) -> None:
    """The options every serving program takes: the load it drives, its time limits, where the engine lives."""
    add = parser.add_argument
    add("--max-input-tokens", type=int_range(1, 100_000_000), default=512, help="prompt length, in tokens")
    add("--max-output-tokens", type=int_range(1, 100_000_000), default=128, help="max_tokens of each request")
    add("--concurrency", type=int_range(1, 4096), default=1, help="simultaneous requests (one each)")
    add("--port", type=int_range(0, 65535), default=0, help="0 picks a free port")
    add("--startup-timeout", type=float_range(1, 7 * 86_400), default=1800.0, metavar="SECONDS")
    add("--request-timeout", type=float_range(1, 7 * 86_400), default=600.0, metavar="SECONDS")
    add("--stop-grace", type=float_range(0, 3600), default=20.0, metavar="SECONDS",
        help="SIGTERM → SIGKILL delay when stopping the server")  # fmt: skip
    add("--prompt-token-base", type=int_range(0, 100_000_000), default=1000,
        help=f"prompt token ids are drawn from [BASE, BASE+{PROMPT_TOKEN_SPAN})")  # fmt: skip
    add("--python", default=sys.executable, help=f"interpreter that has {engine_label} installed (default: this one)")
    add("--log-file", default=None, help=f"where {engine_label}'s output goes (default: a temporary file, removed)")
    add("--extra-arg", action="append", default=[], type=_extra_arg, metavar="ARG",
        help=f"passed to {engine_label} as-is; repeat for several (write --extra-arg=--flag for a flag)")  # fmt: skip


def parse_program_options(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse, then check the options every program shares (:func:`check_load_options`)."""
    args = parser.parse_args(argv)
    check_load_options(parser, args)
    return args


def check_load_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Checks across options: an executable interpreter, and no ``--extra-arg`` that moves the server off loopback."""
    python = args.python if os.sep in args.python else shutil.which(args.python)
    if not python or not os.path.isfile(python) or not os.access(python, os.X_OK):
        parser.error(f"--python {args.python!r} is not an executable file")
    args.python = python
    if len(args.extra_arg) > 64:
        parser.error("at most 64 --extra-arg values")
    for extra in args.extra_arg:
        if extra.split("=", 1)[0] in ("--host", "--port"):
            parser.error(f"--extra-arg {extra!r}: this program sets --host and --port itself")


def optional_flags(pairs: Sequence[tuple[str, Any]]) -> list[str]:
    """``[flag, value, …]`` for the values that were given (None leaves the engine's default)."""
    flags: list[str] = []
    for flag, value in pairs:
        if value is not None:
            flags += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    return flags


def load_settings(args: argparse.Namespace, port: int | None) -> dict[str, Any]:
    """The settings every program reports besides its engine's own."""
    return {
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
    """The engine child: its own process group, output to a log file, stopped as a group."""

    def __init__(self, command: list[str], log_path: Path, env: Mapping[str, str] | None = None) -> None:
        self.command = command
        self.log_path = log_path
        self.env = dict(env or {})
        self.process: subprocess.Popen[bytes] | None = None
        self._offset = 0
        self._partial = ""

    def start(self) -> None:
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.setdefault("DO_NOT_TRACK", "1")
        for name, value in self.env.items():
            env.setdefault(name, value)
        env.pop("VRAMPLAN_REPORT_FD", None)  # the report pipe is this program's, not the engine's
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


def get_json(url: str, timeout: float, max_bytes: int = 1 << 20) -> Any:
    """A GET answered with JSON; None when the server does not answer or does not answer JSON."""
    request = urllib.request.Request(url, method="GET")
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            return json.loads(response.read(max_bytes))
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class LogWatch:
    """What the start-up wait looks for in the engine's log: progress stages, and lines that mean failure."""

    stages: tuple[tuple[re.Pattern[str], float], ...]
    fatal: re.Pattern[str]


@dataclass
class StartupResult:
    ready: bool
    seconds: float
    reason: str | None = None  # "exited", "timeout", "fatal_error_logged"


def wait_until_ready(
    server: Server,
    base_url: str,
    timeout_s: float,
    watch: LogWatch,
    health_path: str = "/health",
    health_timeout_s: float = 2.0,
    poll_s: float = 0.5,
) -> StartupResult:
    """Poll the health endpoint while the server lives; report start-up progress from its log."""
    started = time.monotonic()
    percent = 5.0
    progress("startup", percent)
    fatal_at: float | None = None
    while True:
        for line in server.new_lines():
            for pattern, stage in watch.stages:
                if stage > percent and pattern.search(line):
                    percent = stage
                    progress("startup", percent)
            if fatal_at is None and watch.fatal.search(line):
                fatal_at = time.monotonic()
        elapsed = time.monotonic() - started
        if not server.alive():
            return StartupResult(False, elapsed, "exited")
        with contextlib.suppress(OSError, ValueError):
            if _get(base_url + health_path, timeout=health_timeout_s) == 200:
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


@dataclass
class _Stream:
    """What one stream has delivered so far."""

    first: float | None = None
    last: float | None = None
    chunks: int = 0
    usage_tokens: int | None = None
    done: bool = False
    error: str | None = None

    def take(self, data: str) -> bool:
        """One ``data:`` payload; False when the stream is over (``[DONE]`` or an error)."""
        if data == "[DONE]":
            self.done = True
            return False
        try:
            event = json.loads(data)
        except ValueError:
            self.error = f"unreadable stream event: {data[:200]}"
            return False
        if not isinstance(event, dict):
            return True
        if "error" in event or event.get("object") == "error":
            self.error = f"server error in stream: {json.dumps(event)[:MAX_ERROR_CHARS]}"
            return False
        usage = event.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            self.usage_tokens = usage["completion_tokens"]
        if event.get("choices"):
            now = time.monotonic()
            self.first = now if self.first is None else self.first
            self.last = now
            self.chunks += 1
        return True


def _read_stream(response: Any, stream: _Stream, deadline: float, timeout_s: float) -> None:
    while time.monotonic() < deadline:
        raw = response.readline(1 << 20)
        if not raw:
            return
        line = raw.decode("utf-8", errors="replace").strip()
        if line.startswith("data:") and not stream.take(line[5:].strip()):
            return
    stream.error = f"no end of stream within --request-timeout ({timeout_s:g} s)"


def _request_result(stream: _Stream, sent: float) -> RequestResult:
    result = RequestResult(error=stream.error)
    result.output_tokens = stream.usage_tokens if stream.usage_tokens is not None else stream.chunks
    if stream.first is not None:
        result.ttft_ms = (stream.first - sent) * 1000
        if stream.last is not None and result.output_tokens > 1 and stream.last > stream.first:
            result.ms_per_output_token = (stream.last - stream.first) * 1000 / (result.output_tokens - 1)
    if result.error is None and not stream.done:
        result.error = "the stream ended without [DONE]"
    if result.error is None and result.output_tokens == 0:
        result.error = "no output tokens"
    result.ok = result.error is None
    if result.error:
        result.error = result.error[:MAX_ERROR_CHARS]
    return result


def stream_completion(base_url: str, model: str, prompt: list[int], max_tokens: int, timeout_s: float) -> RequestResult:
    """One streaming completion (OpenAI ``/v1/completions``); times the first chunk and the chunks after it.

    ``ignore_eos`` is an extension that vLLM and SGLang both take in the request body (SGLang 0.5.10.post1
    ``entrypoints/openai/protocol.py:289``, passed on as a sampling parameter in ``serving_completions.py:156``).
    """
    body = json.dumps({
        "model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
        "stream": True, "stream_options": {"include_usage": True},
    }).encode()  # fmt: skip
    request = urllib.request.Request(
        base_url + "/v1/completions", data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    sent = time.monotonic()
    stream = _Stream()
    try:
        with _OPENER.open(request, timeout=timeout_s) as response:
            _read_stream(response, stream, sent + timeout_s, timeout_s)
    except urllib.error.HTTPError as exc:
        detail = exc.read(MAX_ERROR_CHARS).decode("utf-8", errors="replace") if exc.fp else ""
        stream.error = f"HTTP {exc.code}: {detail}".strip()
    except (OSError, ValueError) as exc:  # URLError, timeouts, resets
        stream.error = f"{type(exc).__name__}: {exc}"
    return _request_result(stream, sent)


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


# --- the engine and the run ----------------------------------------------------------------------


class EngineReport(Protocol):
    """What a log parser returns (``vllm_log.VllmMemoryReport``, ``sglang_log.SglangMemoryReport``)."""

    cuda_oom: bool
    startup_error: str | None

    @property
    def refused_for_memory(self) -> bool: ...

    def as_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Engine:
    """One serving engine as a program sees it: its command, its log and how to read them."""

    name: str  # the result's "engine" ("vllm")
    label: str  # in messages ("vLLM")
    program: str  # the program's module name ("vllm_serve"): stderr prefix, temporary log name
    command: Callable[[argparse.Namespace, int], list[str]]
    settings: Callable[[argparse.Namespace, int | None], dict[str, Any]]
    parse_log: Callable[[str], EngineReport]
    served_model: Callable[[argparse.Namespace], str]
    watch: LogWatch
    #: the engine's version, from its report and what ``server_info`` fetched once it was ready
    versions: Callable[[EngineReport, dict[str, Any]], dict[str, str]]
    health_path: str = "/health"
    health_timeout_s: float = 2.0  # how long one health request may take
    env: tuple[tuple[str, str], ...] = ()  # set in the server's environment unless already set
    #: why the requests failed for memory (the engine's log and the request errors say so), else None
    load_memory_failure: Callable[[EngineReport, list[RequestResult]], str | None] = lambda report, _results: (
        "ran out of GPU memory while serving the requests" if report.cuda_oom else None
    )
    #: read once the server is ready (an info endpoint), kept in the result as ``server_info``
    server_info: Callable[[str], dict[str, Any]] | None = None


@dataclass
class Run:
    """One run of a program: what it started, when the server was ready, and what the requests got."""

    engine: Engine
    args: argparse.Namespace
    port: int | None = None
    server: Server | None = None
    startup: StartupResult | None = None
    results: list[RequestResult] = field(default_factory=list)
    server_info: dict[str, Any] = field(default_factory=dict)
    stopped: bool = False

    def stop(self, grace_s: float) -> None:
        if self.server is not None and not self.stopped:
            self.stopped = True
            self.server.stop(grace_s)


def exit_code(run: Run, engine_report: EngineReport) -> int:
    """0 when every request succeeded; 3 when memory is why not (the engine's report says so); else 1."""
    startup = run.startup
    if startup is not None and startup.ready and run.results and all(r.ok for r in run.results):
        return EXIT_OK
    if engine_report.refused_for_memory or engine_report.cuda_oom:
        return EXIT_OOM
    if startup is not None and startup.ready and run.engine.load_memory_failure(engine_report, run.results):
        return EXIT_OOM
    return EXIT_FAILED


def _outcome(code: int, startup: StartupResult | None) -> str:
    if code == EXIT_OK:
        return "succeeded"
    if code == EXIT_OOM:
        return "oom" if startup is not None and startup.ready else "refused_for_memory"
    if startup is None or not startup.ready:
        return "startup_timeout" if startup is not None and startup.reason == "timeout" else "startup_failed"
    return "requests_failed"


def _message(run: Run, engine_report: EngineReport) -> str | None:
    startup, label = run.startup, run.engine.label
    if engine_report.startup_error and (startup is None or not startup.ready):
        return f"{label} refused to start: {engine_report.startup_error}"
    if startup is not None and not startup.ready:
        if startup.reason == "timeout":
            return (
                f"{label} did not answer {run.engine.health_path} within --startup-timeout "
                f"({run.args.startup_timeout:g} s)"
            )
        return f"{label} exited before it was ready (no known reason in its log)"
    failure = run.engine.load_memory_failure(engine_report, run.results)
    return f"{label} {failure}" if failure else None


def build_result(run: Run, engine_report: EngineReport, log_text: str, code: int) -> dict[str, Any]:
    results = run.results
    lat = latency(results)
    startup = run.startup
    result: dict[str, Any] = {
        "engine": run.engine.name,
        "outcome": _outcome(code, startup),
        "exit_code": code,
        "message": _message(run, engine_report),
        "engine_report": engine_report.as_dict(),
        "startup_seconds": round(startup.seconds, 3) if startup and startup.ready else None,
        "requests": {
            "sent": len(results),
            "succeeded": sum(r.ok for r in results),
            "failed": sum(not r.ok for r in results),
            "errors": [r.error for r in results if r.error][:MAX_ERRORS_KEPT],
        },
        "latency": lat,
        "timing": {"ms_per_output_token": lat["ms_per_output_token_p50"], "ttft_ms": lat["ttft_ms_p50"]},
        "settings": {
            **run.engine.settings(run.args, run.port),
            f"{run.engine.name}_command": run.server.command if run.server else None,
        },
    }
    if run.server_info:
        result["server_info"] = run.server_info
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


def finish(run: Run) -> int:
    """Stop the server, read its log, write and report the result; the exit status."""
    if run.server is not None and not run.stopped:
        progress("shutdown", 0.0)
        run.stop(run.args.stop_grace)
    log_text = run.server.read_log() if run.server is not None else ""
    engine_report = run.engine.parse_log(log_text)
    code = exit_code(run, engine_report)
    result = build_result(run, engine_report, log_text, code)
    _write_result(result)
    if result["message"]:
        print(f"{run.engine.program}: {result['message']}", file=sys.stderr)
    args = run.args
    report({
        "type": "result",
        "timing": result["timing"],
        "conditions": {
            "engine": run.engine.name, "concurrency": args.concurrency, "max_input_tokens": args.max_input_tokens,
            "max_output_tokens": args.max_output_tokens, "requests_succeeded": result["requests"]["succeeded"],
            "startup_seconds": result["startup_seconds"], "settings": run.engine.settings(args, run.port),
        },
        "versions": run.engine.versions(engine_report, run.server_info),
        "oom": code == EXIT_OOM,
        "phase": "startup" if run.startup is None or not run.startup.ready else "load",
    })  # fmt: skip
    return code


def _drive(run: Run, log_path: Path) -> None:
    """Start the server, wait for it, and when it is ready send the load."""
    engine, args = run.engine, run.args
    run.port = args.port or free_port()
    base_url = f"http://{HOST}:{run.port}"
    run.server = Server(engine.command(args, run.port), log_path, dict(engine.env))
    run.server.start()
    run.startup = wait_until_ready(
        run.server, base_url, args.startup_timeout, engine.watch, engine.health_path, engine.health_timeout_s
    )
    if not run.startup.ready:
        return
    checkpoint("server_ready")
    if engine.server_info is not None:
        run.server_info = engine.server_info(base_url)
    run.results = run_load(args, base_url, engine.served_model(args))
    checkpoint("load_done")


def serve(engine: Engine, args: argparse.Namespace) -> int:
    """The whole program for one engine: start, load, stop, report; stops the server on SIGTERM/SIGINT too."""
    run = Run(engine, args)
    temporary_log = args.log_file is None
    if args.log_file:
        log_path = Path(args.log_file)
    else:
        handle, name = tempfile.mkstemp(prefix=f"{engine.program.replace('_', '-')}-", suffix=".log")
        os.close(handle)
        log_path = Path(name)

    def on_signal(signum: int, _frame: Any) -> None:
        run.stop(min(args.stop_grace, 10.0))
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        _drive(run, log_path)
        return finish(run)
    finally:
        run.stop(min(args.stop_grace, 10.0))
        if temporary_log:
            with contextlib.suppress(OSError):
                log_path.unlink()
