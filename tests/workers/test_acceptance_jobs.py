"""Acceptance jobs end to end: the API, a real ``celery worker`` on Redis, PostgreSQL, a real child process.

What each test proves, with real components only: a job through the API succeeds and decides its
order; a worker SIGKILLed mid-job has its job re-queued and finished by the node's next worker (or
ended ``interrupted`` when attempts are used up); jobs queued when Redis restarts (and loses every
message) all still run, from the database; a child killed by a signal is reported with the signal.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import psutil
import pytest
from django.db.models import F
from django.utils import timezone

from measurements import services
from measurements.models import AcceptanceJob, Measurement, Order, RegisteredProgram
from tests.measurements.helpers import TINY_CPU_WORKLOAD, cpu_configuration
from vramplan.celery import app

from .realworker import require_services

pytestmark = [pytest.mark.services, pytest.mark.slow]  # real Celery workers

JOB_TIMEOUT_S = 120.0
# A program that reports progress for ~4 s through the runner protocol, then exits 0.
SLOW_PROGRAM = (
    "import time\nfrom workers.runner.report import progress\n"
    "for i in range(40):\n    progress('sleep', i * 2.5)\n    time.sleep(0.1)\n"
)
MARKER = "vramplan-itest-slow"


def _wait_job(api, job_id: int, until: set[str], timeout_s: float = JOB_TIMEOUT_S, worker=None) -> dict:
    deadline = time.monotonic() + timeout_s
    seen: list[tuple[str, str]] = []
    while time.monotonic() < deadline:
        job = api.get(f"/api/v1/acceptance-jobs/{job_id}/").json()
        seen.append((job["status"], job["progress"]["phase"]))
        if job["status"] in until:
            job["_seen"] = seen
            return job
        time.sleep(0.2)
    log = worker.log() if worker is not None else ""
    pytest.fail(f"job {job_id} did not reach {until} in {timeout_s:.0f} s; last {seen[-3:]}\n{log}")


def _order(api, configuration) -> dict:
    workload = api.post("/api/v1/workloads/", TINY_CPU_WORKLOAD, format="json").json()
    response = api.post("/api/v1/orders/", {"workload": workload["id"], "configuration": configuration.slug},
                        format="json")  # fmt: skip
    assert response.status_code == 201, response.json()
    return response.json()


def _program(slug: str, configuration, *argv: str, time_limit: int = 60) -> RegisteredProgram:
    program = RegisteredProgram.objects.create(slug=slug, name=slug, argv_template=list(argv),
                                               time_limit_seconds=time_limit)  # fmt: skip
    program.allowed_configurations.add(configuration)
    return program


def test_an_acceptance_job_through_the_api_measures_and_decides_the_order(start_worker, api) -> None:
    configuration = cpu_configuration()
    worker = start_worker()
    node = worker.wait_for_node()
    assert node.configuration_id == configuration.pk, "the host-probe node matches the CPU configuration"
    order = _order(api, configuration)

    started = api.post(f"/api/v1/orders/{order['id']}/acceptance-jobs/", {}, format="json")
    assert started.status_code == 202, started.json()
    job = _wait_job(api, started.json()["id"], {"succeeded", "failed", "cancelled"}, worker=worker)

    assert job["status"] == "succeeded", (job["error"], worker.log())
    assert job["node"] == worker.node_name and job["attempt"] == 1
    assert any(status == "running" for status, _ in job["_seen"])
    measurement = job["measurement"]
    weights = order["budget"]["per_device"]["components"]["weights"]["bytes"]
    assert measurement["peaks"]["framework_allocated"] > weights
    assert measurement["peaks"]["host_rss"] > measurement["peaks"]["framework_allocated"]
    assert measurement["peaks"]["device_used"] is None
    assert (
        "NVML" in measurement["reasons"]["device_used_bytes"] or "nvml" in measurement["reasons"]["device_used_bytes"]
    )
    ratio = measurement["ratios"]["framework_allocated"]
    assert ratio["estimated_bytes"] == order["budget_peak_bytes"]  # the budget the order was placed with
    assert ratio["measured_bytes"] == measurement["peaks"]["framework_allocated"]
    assert 0.5 < ratio["ratio"] < 2.0  # the engine's CPU budget and the synthetic run agree to a factor of 2
    decided = api.get(f"/api/v1/orders/{order['id']}/").json()
    # A few hundred MB of RSS on a node with this machine's RAM: accepted, judged on the host view.
    assert decided["status"] == "accepted", decided["decision"]
    assert decided["decision"]["view"] == "host_rss"
    assert decided["decision"]["measured_peak_bytes"] == measurement["peaks"]["host_rss"]
    assert decided["decision"]["usable_memory_bytes"] == psutil.virtual_memory().total
    assert decided["decision"]["measurement"] == measurement["id"]
    assert measurement["document"]["versions"]["packages"]["torch"]


def _slow_job(start_worker, api):
    """A worker on a CPU node, and a job of the ~4 s progress-reporting program queued to it."""
    configuration = cpu_configuration()
    worker = start_worker()
    worker.wait_for_node()
    program = _program("slow", configuration, "{python}", "-c", SLOW_PROGRAM, MARKER)
    order = _order(api, configuration)
    job_id = api.post(f"/api/v1/orders/{order['id']}/acceptance-jobs/", {"program": program.slug},
                      format="json").json()["id"]  # fmt: skip
    return worker, order, job_id


def test_a_worker_killed_mid_job_leaves_the_job_to_the_nodes_next_worker(start_worker, api) -> None:
    worker, order, job_id = _slow_job(start_worker, api)
    _wait_job(api, job_id, {"running"}, worker=worker)

    worker.kill()
    time.sleep(0.5)
    assert not [p for p in psutil.process_iter(["cmdline"]) if MARKER in (p.info["cmdline"] or [])], (
        "the measured child dies with its worker (PR_SET_PDEATHSIG)"
    )
    assert AcceptanceJob.objects.get(pk=job_id).status == "running"  # nobody has noticed yet
    reaped = services.acceptance_jobs_reap(stale_s=0)  # the node's silence, without waiting 3 periods
    assert reaped["requeued"] == 1
    restarted = start_worker(node_name=worker.node_name)

    job = _wait_job(api, job_id, {"succeeded", "failed"}, worker=restarted)
    assert job["status"] == "succeeded", (job["error"], restarted.log())
    assert job["attempt"] == 2
    assert f"{worker.node_name} went silent" in job["error"]  # the first attempt's fate stays on the job
    assert Measurement.objects.filter(order_id=order["id"]).count() == 1


def test_a_job_whose_attempts_are_used_up_ends_interrupted(start_worker, api) -> None:
    worker, order, job_id = _slow_job(start_worker, api)
    _wait_job(api, job_id, {"running"}, worker=worker)
    # lowered once the job runs: an UPDATE racing the worker's claim would hold the row lock the claim skips
    # (skip_locked), and the unclaimed message would wait for the reaper's re-send
    AcceptanceJob.objects.filter(pk=job_id).update(max_attempts=1)
    worker.kill()

    assert services.acceptance_jobs_reap(stale_s=0)["interrupted"] == 1
    job = api.get(f"/api/v1/acceptance-jobs/{job_id}/").json()
    assert (job["status"], job["failure_kind"]) == ("failed", "interrupted")
    assert Order.objects.get(pk=order["id"]).status == "acceptance_pending"  # nothing measured, nothing decided


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[dict]:
    """A redis-server of this test's own (no persistence, like CI's), restartable, and the app pointed at it."""
    require_services()
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server is not installed")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"redis://127.0.0.1:{port}/0"
    state: dict = {"url": url}

    def start() -> None:
        state["process"] = subprocess.Popen(
            [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.05)
        pytest.fail("the private redis-server did not start")

    def stop() -> None:
        state["process"].terminate()
        state["process"].wait(timeout=10)

    state["start"], state["stop"] = start, stop
    start()
    previous = app.conf.broker_url
    _point_app_at(url)
    yield state
    _point_app_at(previous)
    stop()


def _point_app_at(url: str) -> None:
    """Make this process's Celery app publish to ``url`` (its pools are rebuilt on next use)."""
    app.conf.broker_url = app.conf.broker_write_url = app.conf.broker_read_url = url  # type: ignore[misc]
    app._pool = None
    app.amqp._producer_pool = None


def test_jobs_queued_when_redis_restarts_all_still_run_from_the_database(start_worker, api, private_redis) -> None:
    configuration = cpu_configuration()
    worker = start_worker(broker_url=private_redis["url"])
    worker.wait_for_node()
    worker.stop()
    program = _program("quick", configuration, "{python}", "-c", "print('ok')")
    order = _order(api, configuration)
    job_ids = [
        api.post(f"/api/v1/orders/{order['id']}/acceptance-jobs/", {"program": "quick"}, format="json").json()["id"]
        for _ in range(3)
    ]
    assert AcceptanceJob.objects.filter(node__isnull=False).count() == 1  # one job at a time per node

    private_redis["stop"]()
    private_redis["start"]()  # a Redis without persistence comes back empty: the sent message is gone
    AcceptanceJob.objects.filter(pk__in=job_ids, node__isnull=False).update(
        dispatched_at=F("dispatched_at") - timedelta(hours=1)
    )  # the lost message's age: longer than the node's 3 heartbeat periods
    restarted = start_worker(node_name=worker.node_name, broker_url=private_redis["url"])
    deadline = time.monotonic() + 60
    while restarted.wait_for_node().last_heartbeat_at < timezone.now() - timedelta(seconds=30):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert services.acceptance_jobs_reap()["sent"] >= 1

    for job_id in job_ids:
        job = _wait_job(api, job_id, {"succeeded", "failed"}, worker=restarted)
        assert job["status"] == "succeeded", (job["error"], restarted.log())
    assert Measurement.objects.filter(order_id=order["id"]).count() == 3
    del program


def test_a_child_killed_by_a_signal_is_reported_with_the_signal(start_worker, api) -> None:
    configuration = cpu_configuration()
    worker = start_worker()
    worker.wait_for_node()
    _program("self-kill", configuration, "{python}", "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    order = _order(api, configuration)
    job_id = api.post(f"/api/v1/orders/{order['id']}/acceptance-jobs/", {"program": "self-kill"},
                      format="json").json()["id"]  # fmt: skip

    job = _wait_job(api, job_id, {"succeeded", "failed"}, worker=worker)
    assert (job["status"], job["failure_kind"]) == ("failed", "error"), worker.log()
    assert "signal 9 (SIGKILL)" in job["error"]
    document = job["measurement"]["document"]
    assert (document["outcome"], document["signal"], document["signal_name"]) == ("signalled", 9, "SIGKILL")
    assert api.get(f"/api/v1/orders/{order['id']}/").json()["decision"]["verdict"] == "undecided"


def test_a_custom_workloads_job_replays_its_declared_components(start_worker, api) -> None:
    """An order of a custom workload that names no program runs the replay of its declaration, the command its
    recommendation carries: the worker's child holds exactly the declared bytes (the declaration's own sum)."""
    configuration = cpu_configuration()
    worker = start_worker()
    worker.wait_for_node()
    components = [{"name": "tables", "category": "weights", "bytes": 40_000_000},
                  {"name": "frame", "category": "activations", "bytes": 5_000_000, "per_concurrent": True}]  # fmt: skip
    custom = {"name": "replay-cpu", "task": "custom", "runtime": {"device": "cpu"},
              "custom": {"components": components, "concurrency": 4}}  # fmt: skip
    workload = api.post("/api/v1/workloads/", custom, format="json").json()
    order = api.post("/api/v1/orders/", {"workload": workload["id"], "configuration": configuration.slug},
                     format="json").json()  # fmt: skip
    started = api.post(f"/api/v1/orders/{order['id']}/acceptance-jobs/", {}, format="json")
    assert started.status_code == 202, started.json()
    job = _wait_job(api, started.json()["id"], {"succeeded", "failed", "cancelled"}, worker=worker)
    assert job["status"] == "succeeded", (job["error"], worker.log())
    measurement = job["measurement"]
    assert measurement["peaks"]["framework_allocated"] == 40_000_000 + 4 * 5_000_000
    assert measurement["document"]["conditions"]["program"] == "replay"
    assert measurement["document"]["conditions"]["workload"] == "replay"
