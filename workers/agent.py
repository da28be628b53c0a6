"""The node agent: who this node is, its heartbeat, and running a claimed acceptance job here."""

from __future__ import annotations

import json
import logging
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection

from catalog.models import Node
from measurements import services as measurement_services
from workers.probes.inventory import probe_inventory
from workers.runner import plan
from workers.runner.execute import RunOptions, run_measured
from workers.services import node_heartbeat_record

PROGRESS_EVERY_S = 1.0  # progress rows (and the node's heartbeat) while a job runs

logger = logging.getLogger(__name__)


def node_name() -> str:
    """``VRAMPLAN_NODE_NAME`` when set, else the host name (in containers, set the name explicitly)."""
    return settings.VRAMPLAN_NODE_NAME or socket.gethostname()


def node_heartbeat() -> Node:
    """Probe this machine and record it as the node :func:`node_name` names."""
    return node_heartbeat_record(node_name(), probe_inventory())


class _JobProgress:
    """The child's latest progress, written to the job row from the worker's own thread once a second.

    The reader thread only stores it; the main loop's cancel check writes it (Django connections are
    per thread) and answers whether the job was cancelled or taken away. A write the database refuses
    for a lost connection is skipped (the run goes on) and the next check uses a new connection: should
    the database stay away for ``SILENT_AFTER_PERIODS`` periods, the reaper takes the job back and the
    first check that reaches the database again stops this run.
    """

    def __init__(self, job_id: int, node: str, attempt: int) -> None:
        self.job_id, self.node, self.attempt = job_id, node, attempt
        self.phase, self.percent = "starting", 0.0
        self.lock = threading.Lock()

    def update(self, phase: str, percent: float) -> None:
        with self.lock:
            self.phase, self.percent = phase, percent

    def should_stop(self) -> bool:
        with self.lock:
            phase, percent = self.phase, self.percent
        try:
            return measurement_services.acceptance_job_progress(self.job_id, self.node, self.attempt, phase, percent)
        except (OperationalError, InterfaceError) as exc:
            logger.warning("job %s: progress not recorded, the database connection failed (%s)", self.job_id, exc)
            connection.close()  # the next check opens a new one
            return False


def acceptance_job_execute(job: measurement_services.ClaimedJob, node: str) -> dict[str, Any]:
    """Run a claimed job in a child process under sampling; the measurement document."""
    progress = _JobProgress(job.job_id, node, job.attempt)
    extra_env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    if job.expandable_segments:
        extra_env["PYTORCH_ALLOC_CONF"] = "expandable_segments:True"
    conditions: dict[str, Any] = {"job": job.job_id, "attempt": job.attempt, "node": node}
    with tempfile.TemporaryDirectory(prefix="vramplan-job-") as folder:
        if job.argv_template is None:
            spec_path = Path(folder) / "synthetic.json"
            device = job.workload.get("runtime", {}).get("device", "cuda")
            argv, builtin = plan.builtin_argv(job.workload, str(spec_path))
            spec = {"workload": job.workload, "device": device} | ({"quality": True} if builtin == "synthetic" else {})
            spec_path.write_text(json.dumps(spec))
            conditions["program"] = builtin
        else:
            argv = plan.program_argv(job.argv_template, job.placeholders)
            conditions["program"] = "registered"
        user = settings.VRAMPLAN_JOB_USER or None
        if user:  # the job account must read its spec and may write in its folder
            shutil.chown(folder, user)
        options = RunOptions(argv=argv, extra_env=extra_env, time_limit_s=job.time_limit_seconds, cwd=folder,
                             user=user, conditions=conditions)  # fmt: skip
        started = time.monotonic()
        document = run_measured(
            options, on_progress=progress.update, should_cancel=progress.should_stop, cancel_poll_s=PROGRESS_EVERY_S
        )
    document["conditions"].setdefault("wall_seconds", round(time.monotonic() - started, 3))
    return document
