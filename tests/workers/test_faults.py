"""Faults, each with a real ``celery worker`` (and ``celery beat``) on Redis, PostgreSQL and real child processes.

After each fault every job reaches a final state, no measurement is lost or duplicated, and the order's
decision agrees with its measurements (:func:`assert_settled`). Covered elsewhere, not repeated here: a
worker SIGKILLed mid-job, attempts used up, Redis restarted with messages lost, a child killed by a signal
(test_acceptance_jobs); a late result of a reaped attempt, a busy node and two dispatchers
(tests/measurements/test_job_states, without a worker).

Heartbeats run at the shortest period the settings allow (``NODE_HEARTBEAT_SECONDS=5``), in the worker,
in beat and in this process alike.
"""

from __future__ import annotations

import itertools
import os
import signal
import time
import uuid
from collections import Counter
from datetime import datetime, timedelta

import psutil
import pytest
from django.db import connection
from django.db.models import F
from django.utils import timezone

from catalog.models import Node
from measurements import services
from measurements.models import AcceptanceJob, Measurement, Order
from tests.measurements.helpers import cpu_configuration

from .test_acceptance_jobs import MARKER, SLOW_PROGRAM, _order, _program, _wait_job

pytestmark = [pytest.mark.services]

PERIOD_S = 5  # the shortest heartbeat period settings.py accepts
FINAL = {"succeeded", "failed", "cancelled"}


@pytest.fixture
def fast(settings) -> dict[str, str]:
    """This process's settings at ``PERIOD_S``; the environment that gives a worker or beat the same."""
    settings.CELERY_BEAT_SCHEDULE = {
        name: {**entry, "schedule": float(PERIOD_S)} for name, entry in settings.CELERY_BEAT_SCHEDULE.items()
    }
    return {"NODE_HEARTBEAT_SECONDS": str(PERIOD_S)}


def _start_job(api, order: dict, program: str | None = None, status: int = 202) -> int:
    body = {"program": program} if program else {}
    response = api.post(f"/api/v1/orders/{order['id']}/acceptance-jobs/", body, format="json")
    assert response.status_code == status, response.json()
    return int(response.json()["id"])


def assert_settled(order_id: int) -> list[Measurement]:
    """Every job of the order final, one measurement per run and at most one per job (each succeeded job has
    its one), and the order's status and decision those of the measurement that decided it."""
    jobs = list(AcceptanceJob.objects.filter(order_id=order_id))
    assert jobs and all(job.status in FINAL for job in jobs), [(job.pk, job.status) for job in jobs]
    measurements = list(Measurement.objects.filter(order_id=order_id).order_by("pk"))
    assert len({m.upload_key for m in measurements}) == len(measurements), "a run stored twice"
    per_job = Counter(m.job_id for m in measurements)
    assert all(count == 1 for count in per_job.values()), f"a job with several measurements: {per_job}"
    assert all(per_job[job.pk] == 1 for job in jobs if job.status == "succeeded"), "a succeeded job lost its run"
    order = Order.objects.get(pk=order_id)
    if not measurements:
        assert (order.status, order.decision, order.decided_by_id) == ("acceptance_pending", None, None)
        return measurements
    by_id = {m.pk: m for m in measurements}
    decided = by_id[order.decision["measurement"]]
    if order.decided_by_id is not None:
        assert order.decided_by_id == decided.pk
        assert order.status == order.decision["verdict"] != "undecided"
    else:
        assert (order.status, order.decision["verdict"]) == ("acceptance_pending", "undecided")
    if order.decision["view"] is not None:
        assert order.decision["measured_peak_bytes"] == decided.peaks[order.decision["view"]]
    return measurements


def _slow_job(start_worker, api, fast):
    """A worker on a CPU node, running a job of the ~4 s progress-reporting program."""
    configuration = cpu_configuration()
    worker = start_worker(**fast)
    worker.wait_for_node()
    _program("slow", configuration, "{python}", "-c", SLOW_PROGRAM, MARKER)
    order = _order(api, configuration)
    job_id = _start_job(api, order, "slow")
    _wait_job(api, job_id, {"running"}, worker=worker)
    return worker, configuration, order, job_id


def _terminate_other_backends() -> int:
    """``pg_terminate_backend`` on every session of this database but this process's own: the worker's."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return int(cursor.fetchone()[0])


def test_a_job_outlives_its_workers_database_connections_being_dropped(start_worker, api, fast) -> None:
    worker, _, order, job_id = _slow_job(start_worker, api, fast)

    terminated = 0
    deadline = time.monotonic() + 60
    while AcceptanceJob.objects.get(pk=job_id).status not in FINAL:  # until it ends, finish included
        assert time.monotonic() < deadline, worker.log()
        terminated += _terminate_other_backends()
        time.sleep(0.5)

    job = _wait_job(api, job_id, FINAL, worker=worker)
    assert terminated >= 2
    assert "progress not recorded, the database connection failed" in worker.log()  # the fault was met
    assert (job["status"], job["attempt"]) == ("succeeded", 1), (job["error"], worker.log())
    assert [m.job_id for m in assert_settled(order["id"])] == [job_id]
    assert Order.objects.get(pk=order["id"]).status == "accepted"


def test_a_node_that_stops_heartbeating_mid_job_loses_the_job_to_another_node(start_worker, api, fast) -> None:
    """The node's worker is frozen (SIGSTOP) mid-job; its job goes to another node; then it thaws and its late
    result is discarded, not stored beside the other node's."""
    configuration = cpu_configuration()
    tag = uuid.uuid4().hex[:10]
    frozen = start_worker(node_name=f"itest-a-{tag}", **fast)  # dispatch takes free nodes by name: this one first
    other = start_worker(node_name=f"itest-b-{tag}", **fast)
    frozen.wait_for_node(), other.wait_for_node()
    _program("slow", configuration, "{python}", "-c", SLOW_PROGRAM, MARKER)
    order = _order(api, configuration)
    job_id = _start_job(api, order, "slow")
    assert _wait_job(api, job_id, {"running"}, worker=frozen)["node"] == frozen.node_name

    os.killpg(frozen.process.pid, signal.SIGSTOP)  # the worker stops; the measured child (own session) runs on
    try:
        # what K silent periods look like, without waiting for them: nothing refreshes either row now
        AcceptanceJob.objects.filter(pk=job_id).update(heartbeat_at=F("heartbeat_at") - timedelta(hours=1))
        Node.objects.filter(name=frozen.node_name).update(last_heartbeat_at=timezone.now() - timedelta(hours=1))
        assert services.acceptance_jobs_reap() == {"requeued": 1, "interrupted": 0, "sent": 1}
        assert AcceptanceJob.objects.get(pk=job_id).node.name == other.node_name
    finally:
        os.killpg(frozen.process.pid, signal.SIGCONT)  # it wakes up while the other node runs the job

    job = _wait_job(api, job_id, FINAL, worker=other)
    deadline = time.monotonic() + 30
    while "no longer this run's; result discarded" not in frozen.log():
        assert time.monotonic() < deadline, f"the frozen worker's late result:\n{frozen.log()}"
        time.sleep(0.25)
    assert (job["status"], job["attempt"], job["node"]) == ("succeeded", 2, other.node_name), job["error"]
    assert f"attempt 1: {frozen.node_name} went silent" in job["error"]
    (measurement,) = assert_settled(order["id"])
    assert measurement.job_id == job_id and measurement.node.name == other.node_name
    assert Order.objects.get(pk=order["id"]).decided_by_id == measurement.pk


def test_a_node_whose_heartbeats_failed_for_a_while_comes_back_by_itself(start_worker, start_beat, api, fast) -> None:
    """Its worker stayed up, but the node was not heard from for a day: beat's dispatch probes it, it answers,
    and it takes jobs again, without a restart."""
    configuration = cpu_configuration()
    worker = start_worker(**fast)
    worker.wait_for_node()
    Node.objects.filter(name=worker.node_name).update(last_heartbeat_at=timezone.now() - timedelta(days=1))
    order = _order(api, configuration)
    refused = _wait_job(api, _start_job(api, order, status=409), FINAL)  # recorded failed at once
    assert (refused["status"], refused["failure_kind"]) == ("failed", "no_node")

    start_beat(worker, **fast)
    deadline = time.monotonic() + 6 * PERIOD_S
    while Node.objects.get(name=worker.node_name).last_heartbeat_at < timezone.now() - timedelta(seconds=PERIOD_S):
        assert time.monotonic() < deadline, f"the silent node was not probed:\n{worker.log()}"
        time.sleep(0.25)
    assert "Task workers.tasks.node_heartbeat[" in worker.log()  # beat's probe, answered by the worker

    job = _wait_job(api, _start_job(api, order), FINAL, worker=worker)
    assert (job["status"], job["node"]) == ("succeeded", worker.node_name), (job["error"], worker.log())
    assert [m.job_id for m in assert_settled(order["id"])] == [job["id"]]


def test_a_job_past_its_time_limit_ends_with_the_reason(start_worker, api, fast) -> None:
    configuration = cpu_configuration()
    worker = start_worker(**fast)
    worker.wait_for_node()
    _program("sleeper", configuration, "{python}", "-c", "import time; time.sleep(600)", MARKER, time_limit=2)
    order = _order(api, configuration)

    job = _wait_job(api, _start_job(api, order, "sleeper"), FINAL, timeout_s=60, worker=worker)

    assert (job["status"], job["failure_kind"]) == ("failed", "timeout"), (job["error"], worker.log())
    assert "outcome timeout" in job["error"]
    assert not [p for p in psutil.process_iter(["cmdline"]) if MARKER in (p.info["cmdline"] or [])], "child left"
    (measurement,) = assert_settled(order["id"])
    assert measurement.outcome == "timeout"
    assert 2 <= measurement.document["duration_seconds"] < 2 + 10  # the limit, then SIGTERM's grace at most
    assert Order.objects.get(pk=order["id"]).decision["verdict"] == "undecided"


def test_beat_restarted_keeps_its_schedule_without_sending_twice(start_worker, start_beat, api, fast) -> None:
    """Beat is stopped mid-job; the node dies while it is down; beat restarts, its reaper re-queues the job
    once, and no schedule entry is sent more often than once a period across the restart."""
    configuration = cpu_configuration()
    worker = start_worker(**fast)
    worker.wait_for_node()
    beat = start_beat(worker, **fast)
    beat.wait_for_sends("node-heartbeat", 1, timeout_s=4 * PERIOD_S)
    _program("slow", configuration, "{python}", "-c", SLOW_PROGRAM, MARKER)
    order = _order(api, configuration)
    job_id = _start_job(api, order, "slow")
    _wait_job(api, job_id, {"running"}, worker=worker)

    beat.stop()
    stopped_at = datetime.now()  # local time, as beat's log writes it
    before = {entry: len(times) for entry, times in beat.sends().items()}
    worker.kill()  # while beat is down: only its reaper can take the job back
    AcceptanceJob.objects.filter(pk=job_id).update(heartbeat_at=F("heartbeat_at") - timedelta(hours=1))
    restarted = start_worker(node_name=worker.node_name, **fast)
    beat.queue = restarted.queue  # the restarted node's worker listens on a queue of its own
    beat.start()

    job = _wait_job(api, job_id, FINAL, timeout_s=60, worker=restarted)
    assert (job["status"], job["attempt"]) == ("succeeded", 2), (job["error"], restarted.log(), beat.log())
    sends = beat.sends()
    for entry in ("node-heartbeat", "acceptance-jobs-reap"):
        times = sends[entry]
        assert len(times) > before.get(entry, 0) and times[-1] > stopped_at, f"{entry} not sent after the restart"
        gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
        assert min(gaps) >= PERIOD_S - 0.5, f"{entry} sent twice within a period: {gaps}\n{beat.log()}"
    assert [m.job_id for m in assert_settled(order["id"])] == [job_id]
