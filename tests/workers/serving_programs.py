"""Running a serving program (workers.runner.programs.*_serve) against a fake engine, for its tests.

The program runs as a real process with a report pipe, as ``workers.runner.execute`` runs it; the fake engine
(a package under tests/workers/data/) is found through ``PYTHONPATH``, with the repository root for the
program itself and for the fakes' shared server (tests/workers/data/fake_openai.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"


def program_env(fake_package: Path, drop_prefix: str, **extra: str) -> dict[str, str]:
    """This environment without the runner's and the fake's variables, with the fake engine importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VRAMPLAN_", drop_prefix))}
    env["PYTHONPATH"] = os.pathsep.join([str(fake_package), str(REPO)])
    env.update(extra)
    return env


def run_program(
    module: str, args: list[str], env: dict[str, str], cwd: Path, timeout: float = 60
) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    """Run ``python -m module args`` with a report pipe; (exit status, result JSON, messages to the parent)."""
    quality = cwd / "quality.json"
    read_fd, write_fd = os.pipe()
    process = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        env={**env, "VRAMPLAN_QUALITY_PATH": str(quality), "VRAMPLAN_REPORT_FD": str(write_fd)},
        pass_fds=(write_fd,), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        messages = [json.loads(line) for line in pipe]
    _, stderr = process.communicate(timeout=timeout)
    result = json.loads(quality.read_text()) if quality.exists() else {}
    assert process.returncode is not None
    if not result:
        pytest.fail(f"no result written (exit {process.returncode}):\n{stderr.decode()[-3000:]}")
    return process.returncode, result, messages


def read_pid(pidfile: Path, wait_s: float = 10.0) -> int:
    """The process id a fake wrote, once it has written it."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if pidfile.exists() and pidfile.read_text():
            return int(pidfile.read_text())
        time.sleep(0.1)
    raise AssertionError(f"{pidfile} was not written within {wait_s} s")


def gone(pid: int, wait_s: float = 5.0) -> bool:
    """Whether the process has exited (waiting up to ``wait_s``); a zombie of another parent counts as gone."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if _zombie(pid):
            return True
        time.sleep(0.1)
    return False


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def assert_requests(record: Path, count: int, prompt_len: int, max_tokens: int) -> None:
    """The fake engine got ``count`` streaming requests of the asked shape, none sharing a prefix."""
    requests = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(requests) == count and len({tuple(r["first_ids"]) for r in requests}) == count
    for request in requests:
        assert request["prompt_len"] == prompt_len and request["all_ints"] is True
        assert request["max_tokens"] == max_tokens and request["ignore_eos"] is True and request["temperature"] == 0
        assert request["stream"] is True and request["stream_options"] == {"include_usage": True}


def sigterm_while_starting(module: str, args: list[str], env: dict[str, str], cwd: Path, pidfile: Path) -> int:
    """Start the program, SIGTERM it once its server has started (written ``pidfile``); its exit status."""
    process = subprocess.Popen([sys.executable, "-m", module, *args], env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        read_pid(pidfile)
        process.send_signal(signal.SIGTERM)
        return process.wait(timeout=20)
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.kill()


def assert_refused(parse: Callable[[list[str]], Any], argv: list[str]) -> None:
    """The program's option parser exits 2 on these arguments."""
    with pytest.raises(SystemExit) as raised:
        parse(argv)
    assert raised.value.code == 2
