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

import psutil
from pydantic import ValidationError

from measurements.document import MeasurementDocument

from .report import MAX_LINE_BYTES, QUALITY_PATH_ENV, REPORT_FD_ENV
from .sampling import MemorySampler, SamplingResult

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
MEASURED_END = "measured_end"  # a child's checkpoint: the device peak is taken up to it
MAX_CHECKPOINTS = 32  # a child's named instants kept; more are ignored
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


# Resolved once, before any fork: the child only calls it (no dlopen, no allocation after fork).
_PRCTL: Callable[..., int] | None
try:
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux: no PR_SET_PDEATHSIG, no subreaper
    _PRCTL = None
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 1, 4, 36


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the parent (the worker) dies, so no job outlives its worker."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL)


def _guard_parent() -> None:
    """In the parent: not dumpable (a same-user child cannot read its /proc/<pid>/environ or attach to it),
    and a subreaper (grandchildren that leave the process group with setsid are re-parented here, where
    the end of the run finds and kills them)."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_DUMPABLE, 0)
        _PRCTL(PR_SET_CHILD_SUBREAPER, 1)


class _OutputTail(threading.Thread):
    """Drains the child's stdout and stderr: keeps the last bytes (for errors and OOM detection), and
    passes everything through to our stderr when asked. Nothing is written to disk, so a chatty child
    cannot fill it."""

    def __init__(self, fd: int, pass_through: bool) -> None:
        super().__init__(name="child-output", daemon=True)
        self.fd, self.pass_through = fd, pass_through
        self.tail = bytearray()

    def run(self) -> None:
        with os.fdopen(self.fd, "rb", buffering=0) as stream:
            while chunk := stream.read(65536):
                if self.pass_through:
                    with contextlib.suppress(OSError, ValueError):
                        sys.stderr.buffer.write(chunk)
                        sys.stderr.buffer.flush()
                self.tail += chunk
                del self.tail[:-STDERR_TAIL_BYTES]


@dataclass
class _ChildReports:
    """What the child said over the report pipe (parsed on a reader thread)."""

    result: dict[str, Any] | None = None
    last_phase: str | None = None
    bad_lines: int = 0
    checkpoints: set[str] = field(default_factory=set)
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
    scrub_env: bool = True  # jobs: the allowlist; the CLI runs the user's own command in the user's environment
    user: str | None = None  # run the child as this user (a node's unprivileged job account), when root
    conditions: Mapping[str, Any] = field(default_factory=dict)


def run_measured(
    options: RunOptions,
    *,
    on_progress: ProgressCallback | None = None,
    should_cancel: CancelCheck | None = None,
    cancel_poll_s: float = 1.0,
) -> dict[str, Any]:
    """Run ``options.argv`` to its end under sampling; return the measurement document (a JSON-ready dict).

    Whatever happens in the parent (a failed cancel check, Ctrl-C), the child's process group is killed
    and the sampler stopped before this returns or raises.
    """
    run_id = uuid.uuid4().hex
    reports = _ChildReports()
    _guard_parent()
    quality_dir = tempfile.mkdtemp(prefix="vramplan-run-")
    quality_path = Path(quality_dir) / "quality.json"
    report_read, report_write = os.pipe()
    output_read, output_write = os.pipe()
    extra = {**options.extra_env, REPORT_FD_ENV: str(report_write), QUALITY_PATH_ENV: str(quality_path)}
    env = scrubbed_environment(extra=extra) if options.scrub_env else {**os.environ, **extra}
    if options.user:
        os.chown(quality_dir, *_uid_gid(options.user))
    sampler = MemorySampler(
        interval_s=options.interval_s, host_interval_s=options.host_interval_s, device_uuids=options.device_uuids
    )
    sampler.start()
    started = time.monotonic()
    ended_by: str | None = None
    process: subprocess.Popen[bytes] | None = None
    threads: list[threading.Thread] = []
    try:
        try:
            process = subprocess.Popen(
                list(options.argv),
                env=env,
                cwd=options.cwd,
                stdin=subprocess.DEVNULL,
                stdout=output_write,
                stderr=output_write,
                pass_fds=(report_write,),
                start_new_session=True,  # its own session and process group: killpg reaches all of it
                preexec_fn=_die_with_parent,
                user=options.user,
            )
        except (OSError, ValueError, KeyError) as exc:
            for fd in (report_read, report_write, output_read, output_write):
                os.close(fd)
            return _document(run_id, options, "failed", None, None, 0.0, sampler.stop(), reports, None,
                             f"could not start {options.argv[0]!r}: {exc}")  # fmt: skip
        os.close(report_write)
        os.close(output_write)
        sampler.set_root_pid(process.pid)
        output = _OutputTail(output_read, options.pass_output)
        reader = threading.Thread(
            target=_read_reports, args=(report_read, reports, sampler, on_progress), name="child-reports", daemon=True
        )
        threads = [output, reader]
        for thread in threads:
            thread.start()
        next_cancel_check = started + cancel_poll_s
        while process.poll() is None:
            time.sleep(0.05)
            now = time.monotonic()
            if options.time_limit_s is not None and now - started > options.time_limit_s:
                ended_by = "timeout"
                break
            if should_cancel is not None and now >= next_cancel_check:
                next_cancel_check = now + cancel_poll_s
                if should_cancel():
                    ended_by = "cancelled"
                    break
        if ended_by is not None:
            _kill_group(process)
        duration = time.monotonic() - started
    finally:
        if process is not None:
            if process.poll() is None:  # the parent failed mid-run: the child must not outlive it
                _kill_group(process)
            _kill_leftovers(process.pid, started)
        for thread in threads:
            thread.join(timeout=5)
        sampling = sampler.stop()
        program_report = _read_json(quality_path)
        with contextlib.suppress(OSError):
            quality_path.unlink()
        with contextlib.suppress(OSError):
            os.rmdir(quality_dir)
    assert process is not None
    tail = bytes(output.tail)
    outcome = _outcome(process.returncode, ended_by, reports.result, program_report, tail)
    error = tail.decode(errors="replace") or None if outcome != "succeeded" else None
    return _document(run_id, options, outcome, process.returncode, program_report, duration, sampling, reports,
                     ended_by, error)  # fmt: skip


def _uid_gid(user: str) -> tuple[int, int]:
    import pwd

    entry = pwd.getpwnam(user)
    return entry.pw_uid, entry.pw_gid


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


def _kill_leftovers(pgid: int, started_monotonic: float) -> None:
    """Kill what the run left behind: its process group, and descendants that left the group (setsid) and
    were re-parented to this subreaper, if they were created after the run started."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    run_started = time.time() - (time.monotonic() - started_monotonic)
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if child.create_time() >= run_started - 1 and child.pid != os.getpid():
                    child.kill()


def _read_reports(
    fd: int, reports: _ChildReports, sampler: MemorySampler, on_progress: ProgressCallback | None
) -> None:
    with os.fdopen(fd, "rb") as stream:
        while raw := stream.readline(MAX_LINE_BYTES + 1):
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                reports.bad_lines += 1
                rest = raw  # the rest of an oversized line is read in bounded pieces and dropped
                while rest and not rest.endswith(b"\n"):
                    rest = stream.readline(MAX_LINE_BYTES)
                continue
            try:
                message = json.loads(raw, parse_constant=_no_constant)
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
                if len(reports.checkpoints) < MAX_CHECKPOINTS:
                    name = message["name"][:64]
                    reports.checkpoints.add(name)
                    sampler.mark(name)
            elif kind == "result":
                with reports.lock:
                    reports.result = message


def _no_constant(name: str) -> None:
    """NaN and Infinity are not JSON: a child that sends them sends nothing for that message."""
    raise ValueError(f"{name} is not a JSON number")


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        if path.stat().st_size > 1_000_000:
            return {"error": "the program's result file is larger than 1 MB and was not read"}
        value = json.loads(path.read_text(), parse_constant=_no_constant)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else {"value": value}


def _outcome(
    returncode: int, ended_by: str | None, result: dict[str, Any] | None, program: dict[str, Any] | None, tail: bytes
) -> str:
    """How the run ended. "oom" only on evidence: the child said so (its result or its program report), or
    its last output is an out-of-memory error; an exit status alone proves nothing for an arbitrary command."""
    if ended_by is not None:
        return ended_by
    if (result or {}).get("oom") is True or (program or {}).get("oom") is True:
        return "oom"
    if returncode == 0:
        return "succeeded"
    if OOM_PATTERNS.search(tail):
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
    # the RAM of the machine that ran it: what a run without a GPU is judged against (an upload has no node to ask)
    conditions.setdefault("host_ram_bytes", psutil.virtual_memory().total)
    if ended_by == "timeout":
        conditions["time_limit_seconds"] = options.time_limit_s
    return _validated(
        {
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
    )


#: What a child or a program reports in free form, and what each is when dropped.
_CHILD_SECTIONS: dict[str, Any] = {"framework": None, "timing": None, "quality": None, "program_report": None}


def _validated(fields: dict[str, Any]) -> dict[str, Any]:
    """The document as :class:`measurements.document.MeasurementDocument` (the one definition the upload endpoint
    and the job store validate with) dumps it. A section the child reported in free form that breaks the document's
    bounds (a number no device holds, a 300 KB report) is dropped, with why in ``error``, so that the run's own
    figures are kept; the sampler's own figures always fit them."""
    try:
        return MeasurementDocument.model_validate(fields).dump()
    except ValidationError as exc:
        broken = {str(e["loc"][0]) for e in exc.errors() if e["loc"]} & set(_CHILD_SECTIONS)
        if not broken:
            raise
        why = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
        note = f"dropped what the child reported in {', '.join(sorted(broken))}, which the document refuses: {why}"
        error = f"{fields['error']}\n{note}" if fields.get("error") else note
        fields = {**fields, **{name: _CHILD_SECTIONS[name] for name in broken}, "error": error[-20_000:]}
        return MeasurementDocument.model_validate(fields).dump()


def _peaks(
    sampled: dict[str, Any], framework: dict[str, Any] | None, child: dict[str, Any]
) -> tuple[dict[str, int | None], dict[str, str]]:
    reasons: dict[str, str] = {}
    device = sampled.get("device_used_peak_bytes")
    window = [v for v in (sampled.get("checkpoint_peaks") or {}).get(MEASURED_END, []) if v is not None]
    if window:  # the child ended its measured window there; what followed (a quality reference) is not the workload
        device = max(window)
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


KEY_PACKAGES = ("vramplan", "torch", "transformers", "vllm", "sglang", "nvidia-ml-py", "accelerate", "flash-attn")


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
