"""The jobs part: tiny CPU acceptance jobs drained by local Celery workers (Redis, PostgreSQL), then counted.

    python -m benchmarks.load.jobs COUNT WORKERS TIMEOUT_S [tiny|synthetic]   # run by benchmarks.load, in the
                                                                                # jobs database's environment

Each worker is a real ``celery -A vramplan worker`` (solo pool, one job at a time, the production queues: ``celery``
and its node's own queue) on a node of its own (``VRAMPLAN_NODE_NAME=loadbench-<run>-<i>``); the first also runs beat
(heartbeat dispatch and the reaper). The host probe matches each node to the CPU configuration this machine is
(``manage.py localconfiguration`` adds it with the catalog). Each job is one order of the smallest synthetic workload
(one layer, 17,504 parameters) on that configuration. ``tiny`` (the default): the job runs the staff program
``loadbench-tiny`` (``django_side.TINY_PROGRAM``: a Python one-liner that holds 16 MiB for 0.25 s, no torch),
registered in this database and allowed on that configuration; ``synthetic``: the built-in synthetic workload (its
child imports torch and runs the model, about 3.5 s of CPU). Either way the worker runs a real child under the real
sampler and stores the real measurement document. The orders are placed with ``order_create`` and moved to
``acceptance_pending``, the job rows created as ``acceptance_job_start`` creates them (with its program checks:
enabled, allowed on the configuration, its argv filled from the workload), and one ``acceptance_jobs_dispatch`` hands
the first ones to the nodes; from then on each finished job dispatches the next (the product's own path). Prints one
JSON line: jobs/s, the final states, lost (not final, or succeeded without a measurement), duplicated (more than one
measurement for a job, or for an order of one job), orders whose decision is not their job's measurement, attempts
beyond the first, jobs per node, and the program the jobs ran.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from .common import ROOT, stop, wait_until
from .django_side import TINY_CPU_WORKLOAD, benchmark_user, setup, tiny_program

FINAL = ("succeeded", "failed", "cancelled")
PROGRAMS = ("tiny", "synthetic")


def start_worker(node: str, folder: Path, beat: bool) -> subprocess.Popen:
    log = (folder / f"{node}.log").open("wb")
    argv = [sys.executable, "-m", "celery", "-A", "vramplan", "worker", "--pool=solo", "--concurrency=1",
            "--queues=celery", f"--hostname={node}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat",
            "--loglevel=WARNING"]  # fmt: skip
    if beat:
        argv += ["--beat", f"--schedule={folder / 'beat-schedule'}"]
    env = {**os.environ, "VRAMPLAN_NODE_NAME": node}
    return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def forget_earlier_runs(user) -> None:
    """Nodes of earlier runs are silent from now on; jobs an interrupted run left open are ended."""
    from django.utils import timezone

    from catalog.models import Node
    from measurements.models import AcceptanceJob

    Node.objects.filter(name__startswith="loadbench-").update(last_heartbeat_at=None)
    AcceptanceJob.objects.filter(order__owner=user, status__in=["queued", "running"]).update(
        status="cancelled", failure_kind="cancelled", error="left open by an interrupted load benchmark",
        finished_at=timezone.now(),
    )  # fmt: skip


def check_program(program, order) -> None:
    """``acceptance_job_start``'s checks of a program, once (every order has the same workload)."""
    from workers.runner.plan import placeholder_values, program_argv

    if not program.enabled or not program.allowed_configurations.filter(pk=order.configuration_id).exists():
        raise SystemExit(f"program {program.slug!r} is disabled or not allowed on {order.configuration.slug!r}")
    values = placeholder_values(order.workload.description, order.configuration.device_count)
    program_argv(program.argv_template, values)


def create_jobs(user, configuration, count: int, program_name: str) -> list[int]:
    from django.conf import settings

    from budgets.services import workload_create
    from measurements import services
    from measurements.choices import OrderStatus
    from measurements.models import AcceptanceJob

    program = tiny_program(configuration) if program_name == "tiny" else None
    time_limit = program.time_limit_seconds if program else settings.ACCEPTANCE_JOB_TIME_LIMIT_SECONDS
    workload = workload_create(owner=user, data=TINY_CPU_WORKLOAD)
    ids: list[int] = []
    for _ in range(count):
        order = services.order_create(owner=user, workload=workload, configuration=configuration)
        services.order_transition(order, OrderStatus.ACCEPTANCE_PENDING)
        if program is not None and not ids:
            check_program(program, order)
        job = AcceptanceJob.objects.create(order=order, program=program, time_limit_seconds=time_limit)
        ids.append(job.pk)
    return ids


def count_jobs(ids: list[int]) -> dict[str, Any]:
    from django.db.models import Count, Max, Min

    from measurements.models import AcceptanceJob, Measurement, Order

    jobs = AcceptanceJob.objects.filter(pk__in=ids)
    states = Counter(jobs.values_list("status", flat=True))
    per_job = dict(
        Measurement.objects.filter(job_id__in=ids).values("job_id").annotate(n=Count("id")).values_list("job_id", "n")
    )
    order_ids = list(jobs.values_list("order_id", flat=True))
    per_order = dict(
        Measurement.objects.filter(order_id__in=order_ids)
        .values("order_id")
        .annotate(n=Count("id"))
        .values_list("order_id", "n")
    )
    succeeded = list(jobs.filter(status="succeeded").values_list("pk", "order_id"))
    not_final = sum(n for state, n in states.items() if state not in FINAL)
    without_measurement = sum(1 for job_id, _ in succeeded if per_job.get(job_id, 0) == 0)
    duplicated = sum(n - 1 for n in per_job.values() if n > 1) + sum(n - 1 for n in per_order.values() if n > 1)
    decided = dict(Order.objects.filter(pk__in=order_ids).values_list("pk", "decided_by__job_id"))
    inconsistent = sum(1 for job_id, order_id in succeeded if decided.get(order_id) != job_id)
    span = jobs.aggregate(first=Min("queued_at"), last=Max("finished_at"))
    return {
        "states": {state: states.get(state, 0) for state in ("queued", "running", *FINAL)},
        "lost": not_final + without_measurement,
        "not_final": not_final,
        "succeeded_without_measurement": without_measurement,
        "duplicated": duplicated,
        "decision_inconsistent": inconsistent,
        "retried": jobs.filter(attempt__gt=1).count(),
        "per_node": dict(Counter(jobs.values_list("node__name", flat=True))),
        "per_program": dict(Counter(slug or "synthetic" for slug in jobs.values_list("program__slug", flat=True))),
        "span_s": (span["last"] - span["first"]).total_seconds() if span["first"] and span["last"] else None,
        "errors": sorted({e for e in jobs.exclude(status="succeeded").values_list("error", flat=True) if e})[:5],
    }


def run(count: int, workers: int, timeout_s: float, program: str = "tiny") -> dict[str, Any]:
    setup()
    from catalog.models import Node
    from measurements import services
    from measurements.models import AcceptanceJob

    user, _ = benchmark_user()
    forget_earlier_runs(user)
    tag = uuid.uuid4().hex[:6]
    names = [f"loadbench-{tag}-{i}" for i in range(workers)]
    with tempfile.TemporaryDirectory(prefix="vramplan-load-jobs-") as tmp:
        folder = Path(tmp)
        processes = [start_worker(name, folder, beat=i == 0) for i, name in enumerate(names)]
        try:

            def registered() -> bool:
                for process, name in zip(processes, names, strict=True):
                    if process.poll() is not None:
                        log = (folder / f"{name}.log").read_text(errors="replace")
                        raise SystemExit(f"worker {name} exited with {process.returncode}:\n{log}")
                return Node.objects.filter(name__in=names).count() == workers

            wait_until(registered, 120, f"{workers} workers to register their nodes")
            configurations = set(Node.objects.filter(name__in=names).values_list("configuration", flat=True))
            if len(configurations) != 1 or None in configurations:
                raise SystemExit(f"the nodes matched {configurations}, not this machine's CPU configuration")
            configuration = Node.objects.filter(name__in=names).first().configuration
            ids = create_jobs(user, configuration, count, program)
            started = time.monotonic()
            services.acceptance_jobs_dispatch()
            open_jobs = AcceptanceJob.objects.filter(pk__in=ids).exclude(status__in=FINAL)
            deadline = started + timeout_s
            last_report = started
            while open_jobs.exists() and time.monotonic() < deadline:
                for process, name in zip(processes, names, strict=True):
                    if process.poll() is not None:
                        log = (folder / f"{name}.log").read_text(errors="replace")[-3000:]
                        raise SystemExit(f"worker {name} exited with {process.returncode} mid-run:\n{log}")
                if time.monotonic() - last_report >= 30:
                    last_report = time.monotonic()
                    done = len(ids) - open_jobs.count()
                    print(f"  jobs: {done}/{len(ids)} final after {last_report - started:.0f} s", file=sys.stderr)
                time.sleep(0.5)
            wall_s = time.monotonic() - started
        finally:
            for process in processes:
                stop(process)
            Node.objects.filter(name__in=names).update(last_heartbeat_at=None)
        result = count_jobs(ids)
        finished = sum(result["states"][s] for s in FINAL)
        result.update(count=count, workers=workers, program=program, wall_s=round(wall_s, 1),
                      jobs_per_s=finished / wall_s, timed_out=result["not_final"] > 0)  # fmt: skip
        if result["lost"] or result["duplicated"] or result["states"]["succeeded"] != count:
            result["worker_log_tail"] = (folder / f"{names[0]}.log").read_text(errors="replace")[-2000:]
    return result


def main(argv: list[str]) -> int:
    if len(argv) not in (3, 4) or (len(argv) == 4 and argv[3] not in PROGRAMS):
        print(__doc__, file=sys.stderr)
        return 2
    result = run(int(argv[0]), int(argv[1]), float(argv[2]), argv[3] if len(argv) == 4 else "tiny")
    print(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
