"""What the measured child can and cannot reach (run_measured in this process, a real child process)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import psutil
import pytest

from measurements.document import MeasurementDocument
from workers.runner.execute import RunOptions, run_measured

pytestmark = pytest.mark.slow  # real child processes under run_measured

SYSTEM_PYTHON = "/usr/bin/python3"  # readable by any user (the venv's interpreter may live under /root)


def _last_json_line(document: dict) -> dict:
    return json.loads((document["error"] or "").strip().splitlines()[-1])


@pytest.mark.skipif(os.geteuid() != 0 or not Path(SYSTEM_PYTHON).exists(), reason="needs root and /usr/bin/python3")
def test_a_job_user_cannot_read_the_workers_environment(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgres://vramplan:hunter2@db/vramplan")
    script = (
        "import json, os\n"
        "try:\n    open(f'/proc/{os.getppid()}/environ').read(); seen = 'read'\n"
        "except OSError as exc:\n    seen = type(exc).__name__\n"
        "print(json.dumps({'uid': os.getuid(), 'parent_environ': seen, 'env': sorted(os.environ)}))\n"
        "raise SystemExit(1)\n"  # a failed run keeps its output's tail in the document
    )
    shutil.chown(tmp_path, "nobody")
    document = run_measured(RunOptions(argv=[SYSTEM_PYTHON, "-c", script], user="nobody", cwd=str(tmp_path)))
    seen = _last_json_line(document)
    assert seen["uid"] == 65534
    assert seen["parent_environ"] == "PermissionError"
    assert "DATABASE_URL" not in seen["env"]


def test_a_jobs_child_gets_an_allowlisted_environment(monkeypatch) -> None:
    secrets = {"DATABASE_URL": "postgres://secret@db/x", "CELERY_BROKER_URL": "redis://x", "MY_API_TOKEN": "t",
               "AWS_SECRET_ACCESS_KEY": "k", "NCCL_PASSWORD": "p"}  # fmt: skip
    kept = {"CUDA_VISIBLE_DEVICES": "0", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    for name, value in {**secrets, **kept}.items():
        monkeypatch.setenv(name, value)
    script = "import json, os; print(json.dumps(sorted(os.environ))); raise SystemExit(1)"
    names = set(_last_json_line(run_measured(RunOptions(argv=[sys.executable, "-c", script]))))
    assert {*kept, "VRAMPLAN_REPORT_FD", "PATH"} <= names
    assert not set(secrets) & names


def test_a_grandchild_that_leaves_the_process_group_is_killed_at_the_end(tmp_path: Path) -> None:
    marker = tmp_path / "grandchild.pid"
    script = (
        "import os, subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True)\n"
        f"open({str(marker)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(0.3)\n"
    )
    document = run_measured(RunOptions(argv=[sys.executable, "-c", script]))
    assert document["outcome"] == "succeeded"
    pid = int(marker.read_text())
    deadline = time.monotonic() + 5
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the setsid grandchild outlived the run"
        time.sleep(0.05)


def test_a_failing_cancel_check_still_kills_the_child(tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    script = f"import os, time; open({str(marker)!r}, 'w').write(str(os.getpid())); time.sleep(60)"

    def broken() -> bool:
        if marker.exists():
            raise RuntimeError("the database went away")
        return False

    with pytest.raises(RuntimeError, match="database went away"):
        run_measured(RunOptions(argv=[sys.executable, "-c", script]), should_cancel=broken, cancel_poll_s=0.1)
    pid = int(marker.read_text())
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_an_oversized_or_nan_report_is_ignored_not_fatal() -> None:
    script = (
        "import os\nfd = int(os.environ['VRAMPLAN_REPORT_FD'])\n"
        'os.write(fd, b\'{"type": "progress", "phase": "\' + b\'x\' * (3 << 20) + b\'"}\\n\')\n'
        'os.write(fd, b\'{"type": "result", "timing": {"ms_per_output_token": NaN}}\\n\')\n'
        'os.write(fd, b\'{"type": "result", "timing": {"ms_per_output_token": 4.5}}\\n\')\n'
    )
    document = run_measured(RunOptions(argv=[sys.executable, "-c", script]))
    assert document["outcome"] == "succeeded"
    assert document["timing"] == {"ms_per_output_token": 4.5}


def test_exit_status_3_alone_is_a_failure_not_an_oom() -> None:
    document = run_measured(RunOptions(argv=[sys.executable, "-c", "raise SystemExit(3)"]))
    assert document["outcome"] == "failed"
    oom = run_measured(
        RunOptions(argv=[sys.executable, "-c", "raise MemoryError('torch.OutOfMemoryError: CUDA out of memory')"])
    )
    assert oom["outcome"] == "oom"


def test_a_report_the_document_refuses_is_dropped_with_why_and_the_run_kept() -> None:
    """The runner writes its document through ``MeasurementDocument`` (the one definition the upload endpoint and the
    job store validate with): a program report whose number no device holds is dropped, with why in ``error``; the
    run's own figures stay."""
    script = (
        "import json, os\n"
        "json.dump({'engine_report': {'weights_bytes': 10**308}}, open(os.environ['VRAMPLAN_QUALITY_PATH'], 'w'))\n"
    )
    document = run_measured(RunOptions(argv=[sys.executable, "-c", script]))
    assert document["outcome"] == "succeeded" and document["schema"] == "vramplan-measurement/1"
    assert document["program_report"] is None
    assert "program_report.engine_report.weights_bytes" in document["error"]
    assert "out of range" in document["error"]
    assert document["peaks"]["host_rss_bytes"] > 0
    MeasurementDocument.model_validate(document)
