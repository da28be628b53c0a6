"""Run a command in a child process under memory sampling, and describe the run as a measurement document.

The child runs in its own session and process group, with a scrubbed environment (an allowlist:
no database or broker credentials, no tokens), and dies with its parent (``PR_SET_PDEATHSIG``). The
parent samples NVML device memory and the child tree's host RSS (``workers.runner.sampling``), reads
the child's own reports (``workers.runner.report``), enforces the time limit and cancellation by
killing the whole process group, and maps the end of the run to an outcome:

``succeeded`` (exit 0) · ``oom`` (the child reported running out of memory, or its output says so) ·
``timeout`` · ``cancelled`` · ``signalled`` (killed by a signal it did not get from us) · ``failed``.

An OOM is a result ("did not fit"), not a crash. A view that could not be read is null with a reason.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.metadata
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .report import MAX_LINE_BYTES, QUALITY_PATH_ENV, REPORT_FD_ENV
from .sampling import MemorySampler, SamplingResult

SCHEMA_ID = "vramplan-measurement/1"
EXIT_OOM = 3  # what the synthetic workload and the vLLM program exit with when memory ran out

#: Environment a child may see (exact names, then prefixes). Everything else is dropped.
ENV_ALLOWED = {"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM", "PYTHONPATH",
               "LD_LIBRARY_PATH", "VIRTUAL_ENV", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "HF_HOME",
               "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_CACHE", "XDG_CACHE_HOME"}  # fmt: skip
ENV_ALLOWED_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "PYTORCH_", "TORCH_", "NCCL_", "CUBLAS_", "VLLM_", "FAKE_NVML_")
#: Names that look like secrets are dropped even under an allowed prefix.
ENV_SECRET = re.compile(
    r"(SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL|PRIVATE|API_KEY|ACCESS_KEY|DATABASE|BROKER|REDIS|CELERY|DJANGO)", re.I
)

OOM_PATTERNS = re.compile(
    rb"(CUDA out of memory|OutOfMemoryError|torch\.OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED|"
    rb"No available memory for the cache blocks|cudaErrorMemoryAllocation)"
)
KILL_GRACE_S = 5.0
STDERR_TAIL_BYTES = 8192

ProgressCallback = Callable[[str, float], None]
CancelCheck = Callable[[], bool]


def scrubbed_environment(
    source: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The allowlisted part of ``source`` (default: this process's environment), plus ``extra``."""
    source = os.environ if source is None else source
    env = {
        name: value
        for name, value in source.items()
        if (name in ENV_ALLOWED or name.startswith(ENV_ALLOWED_PREFIXES)) and not ENV_SECRET.search(name)
    }
    env.update(extra or {})
    return env


def _die_with_parent() -> None:
    """In the child, before exec: a new session (own process group), and SIGKILL when the parent dies."""
    os.setsid()
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: a SIGKILLed worker takes its child along


@dataclass
class _ChildReports:
    """What the child said over the report pipe (parsed on a reader thread)."""

    result: dict[str, Any] | None = None
    last_phase: str | None = None
    bad_lines: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(frozen=True)
class RunOptions:
    argv: Sequence[str]
    extra_env: Mapping[str, str] = field(default_factory=dict)
    time_limit_s: float | None = None
    interval_s: float = 0.002
    host_interval_s: float = 0.05
    device_uuids: Sequence[str] | None = None
    cwd: str | None = None
    pass_output: bool = False  # the CLI passes the child's output through (to stderr); jobs keep a tail
    conditions: Mapping[str, Any] = field(default_factory=dict)


def run_measured(
    options: RunOptions,
    *,
    on_progress: ProgressCallback | None = None,
    should_cancel: CancelCheck | None = None,
    cancel_poll_s: float = 1.0,
) -> dict[str, Any]:
    """Run ``options.argv`` to its end under sampling; return the measurement document (a JSON-ready dict)."""
    run_id = uuid.uuid4().hex
    reports = _ChildReports()
    read_fd, write_fd = os.pipe()
    quality_dir = tempfile.mkdtemp(prefix="vramplan-run-")
    quality_path = Path(quality_dir) / "quality.json"
    env = scrubbed_environment(
        extra={**options.extra_env, REPORT_FD_ENV: str(write_fd), QUALITY_PATH_ENV: str(quality_path)}
    )
    sampler = MemorySampler(
        interval_s=options.interval_s, host_interval_s=options.host_interval_s, device_uuids=options.device_uuids
    )
    sampler.start()
    output = sys.stderr.buffer if options.pass_output else tempfile.TemporaryFile()  # noqa: SIM115 - closed below
    started = time.monotonic()
    ended_by: str | None = None
    try:
        try:
            process = subprocess.Popen(
                list(options.argv),
                env=env,
                cwd=options.cwd,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=output if not options.pass_output else None,
                pass_fds=(write_fd,),
                preexec_fn=_die_with_parent,
            )
        except OSError as exc:
            os.close(write_fd)
            os.close(read_fd)
            sampling = sampler.stop()
            return _document(run_id, options, "failed", None, None, 0.0, sampling, reports, None,
                             f"could not start {options.argv[0]!r}: {exc}")  # fmt: skip
        os.close(write_fd)
        sampler.set_root_pid(process.pid)
        reader = threading.Thread(
            target=_read_reports, args=(read_fd, reports, sampler, on_progress), name="child-reports", daemon=True
        )
        reader.start()
        next_cancel_check = started + cancel_poll_s
        while True:
            try:
                process.wait(timeout=0.1)
                break
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if options.time_limit_s is not None and now - started > options.time_limit_s:
                ended_by = "timeout"
                _kill_group(process)
                break
            if should_cancel is not None and now >= next_cancel_check:
                next_cancel_check = now + cancel_poll_s
                if should_cancel():
                    ended_by = "cancelled"
                    _kill_group(process)
                    break
        duration = time.monotonic() - started
        _kill_leftovers(process.pid)  # grandchildren that outlived the child belong to the run too
        reader.join(timeout=5)
        sampling = sampler.stop()
        tail = _tail(output) if not options.pass_output else b""
        outcome = _outcome(process.returncode, ended_by, reports.result, tail)
        program_report = _read_json(quality_path)
        error = None
        if outcome != "succeeded":
            error = tail.decode(errors="replace")[-STDERR_TAIL_BYTES:] or None
        return _document(run_id, options, outcome, process.returncode, program_report, duration, sampling, reports,
                         ended_by, error)  # fmt: skip
    finally:
        if not options.pass_output:
            output.close()
        with contextlib.suppress(OSError):
            quality_path.unlink()
        with contextlib.suppress(OSError):
            os.rmdir(quality_dir)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the child's process group, SIGKILL it after a grace period."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _kill_leftovers(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _read_reports(
    fd: int, reports: _ChildReports, sampler: MemorySampler, on_progress: ProgressCallback | None
) -> None:
    with os.fdopen(fd, "rb") as stream:
        for raw in stream:
            if len(raw) > MAX_LINE_BYTES:
                reports.bad_lines += 1
                continue
            try:
                message = json.loads(raw)
            except ValueError:
                reports.bad_lines += 1
                continue
            if not isinstance(message, dict):
                reports.bad_lines += 1
                continue
            kind = message.get("type")
            if kind == "progress" and isinstance(message.get("phase"), str):
                reports.last_phase = message["phase"][:32]
                percent = message.get("percent")
                if on_progress is not None and isinstance(percent, int | float):
                    with contextlib.suppress(Exception):  # a failed progress write must not stop the run
                        on_progress(reports.last_phase, float(percent))
            elif kind == "checkpoint" and isinstance(message.get("name"), str):
                sampler.mark(message["name"][:64])
            elif kind == "result":
                with reports.lock:
                    reports.result = message


def _tail(output: Any) -> bytes:
    output.seek(0, os.SEEK_END)
    size = output.tell()
    output.seek(max(0, size - STDERR_TAIL_BYTES))
    return output.read()


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        if path.stat().st_size > 1_000_000:
            return {"error": "the program's result file is larger than 1 MB and was not read"}
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else {"value": value}


def _outcome(returncode: int, ended_by: str | None, result: dict[str, Any] | None, tail: bytes) -> str:
    if ended_by is not None:
        return ended_by
    if (result or {}).get("oom") is True:
        return "oom"
    if returncode == 0:
        return "succeeded"
    if returncode == EXIT_OOM or OOM_PATTERNS.search(tail):
        return "oom"
    if returncode < 0:
        return "signalled"
    return "failed"


def _signal_name(number: int) -> str | None:
    try:
        return signal.Signals(number).name
    except ValueError:
        return None


def _document(
    run_id: str,
    options: RunOptions,
    outcome: str,
    returncode: int | None,
    program_report: dict[str, Any] | None,
    duration: float,
    sampling: SamplingResult,
    reports: _ChildReports,
    ended_by: str | None,
    error: str | None,
) -> dict[str, Any]:
    child = reports.result or {}
    framework = child.get("framework") if isinstance(child.get("framework"), dict) else None
    if program_report and isinstance(program_report.get("framework"), dict) and framework is None:
        framework = program_report["framework"]
    sampled = sampling.as_dict()
    peaks, reasons = _peaks(sampled, framework, child)
    signal_number = -returncode if returncode is not None and returncode < 0 else None
    if framework is not None and child.get("oom") and child.get("phase"):
        framework = {**framework, "oom_phase": child.get("phase")}
    timing = child.get("timing") if isinstance(child.get("timing"), dict) else None
    if timing is None and program_report and isinstance(program_report.get("timing"), dict):
        timing = program_report["timing"]
    conditions = {**dict(options.conditions), **(child.get("conditions") or {})}
    if ended_by == "timeout":
        conditions["time_limit_seconds"] = options.time_limit_s
    return {
        "schema": SCHEMA_ID,
        "run_id": run_id,
        "outcome": outcome,
        "exit_code": returncode if returncode is not None and returncode >= 0 else None,
        "signal": signal_number,
        "signal_name": _signal_name(signal_number) if signal_number else None,
        "duration_seconds": round(duration, 3),
        "command": [str(a) for a in options.argv],
        "peaks": {**peaks, "reasons": reasons},
        "framework": framework,
        "sampling": {k: v for k, v in sampled.items() if k not in ("devices", "timeline")},
        "devices": sampled.get("devices") or [],
        "versions": versions(sampled, child.get("versions") or {}, options.extra_env),
        "conditions": conditions,
        "timing": timing,
        "quality": child.get("quality") if isinstance(child.get("quality"), dict) else None,
        "program_report": program_report,
        "timeline": sampled.get("timeline") or [],
        "error": error,
    }


def _peaks(
    sampled: dict[str, Any], framework: dict[str, Any] | None, child: dict[str, Any]
) -> tuple[dict[str, int | None], dict[str, str]]:
    reasons: dict[str, str] = {}
    device = sampled.get("device_used_peak_bytes")
    if device is None:
        reasons["device_used_bytes"] = sampled.get("device_reason") or "NVML gave no device reading"
    host = sampled.get("host_rss_peak_bytes")
    if host is None:
        reasons["host_rss_bytes"] = sampled.get("host_reason") or "the process tree's RSS could not be read"
    allocated = reserved = None
    if framework is None:
        why = (
            "the command did not report PyTorch's allocator statistics (a child reports them as JSON lines "
            f"on the file descriptor in ${REPORT_FD_ENV}; see workers/runner/report.py)"
        )
        reasons["framework_allocated_bytes"] = reasons["framework_reserved_bytes"] = why
    else:
        allocated = framework.get("allocated_bytes_peak")
        reserved = framework.get("reserved_bytes_peak")
        own = framework.get("reasons") or {}
        if allocated is None:
            reasons["framework_allocated_bytes"] = own.get("allocated_bytes_peak") or "not reported by the child"
        if reserved is None:
            reasons["framework_reserved_bytes"] = own.get("reserved_bytes_peak") or "not reported by the child"
    del child
    return (
        {
            "device_used_bytes": device,
            "framework_allocated_bytes": allocated if isinstance(allocated, int) else None,
            "framework_reserved_bytes": reserved if isinstance(reserved, int) else None,
            "host_rss_bytes": host,
        },
        reasons,
    )


KEY_PACKAGES = ("vramplan", "torch", "transformers", "vllm", "nvidia-ml-py", "accelerate", "flash-attn")


def versions(sampled: Mapping[str, Any], child: Mapping[str, Any], extra_env: Mapping[str, str]) -> dict[str, Any]:
    """Driver, CUDA, Python, key packages and allocator settings: what two runs must share to compare."""
    packages = {}
    for name in KEY_PACKAGES:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            packages[name] = importlib.metadata.version(name)
    allocator = {
        name: extra_env.get(name, os.environ.get(name))
        for name in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "CUDA_MODULE_LOADING")
        if extra_env.get(name, os.environ.get(name)) is not None
    }
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "driver": sampled.get("driver_version"),
        "cuda_driver": sampled.get("cuda_driver_version"),
        "packages": packages,
        "allocator_settings": allocator,
        **{f"child_{k}": v for k, v in child.items()},
    }
