"""The heartbeat end to end: a real ``celery worker`` process, a real Redis broker, real PostgreSQL.

The test sends ``workers.tasks.node_heartbeat`` through Redis to a worker subprocess that shares
the test database, then waits for the Node row the worker writes. Skipped when CELERY_BROKER_URL
is not Redis or the database is not PostgreSQL; with REQUIRE_SERVICES=1 those fail instead.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote

import psutil
import pytest
import redis
from django.conf import settings
from django.db import connection
from django.utils import timezone

from catalog.models import Node
from tests.conftest import skip_or_fail
from workers import tasks

from .conftest import REPO_ROOT, clean_env

pytestmark = [pytest.mark.services]

NODE_TIMEOUT_S = 60.0


def _require_services() -> None:
    broker = settings.CELERY_BROKER_URL
    if not broker.startswith(("redis://", "rediss://")):
        skip_or_fail(f"CELERY_BROKER_URL is {broker.split('://')[0]}://, not Redis (set redis://HOST:PORT/DB)")
    if connection.vendor != "postgresql":
        skip_or_fail(f"the database is {connection.vendor}, not PostgreSQL (set DATABASE_URL=postgres://...)")
    try:
        redis.Redis.from_url(broker, socket_connect_timeout=3).ping()
    except redis.RedisError as exc:
        skip_or_fail(f"Redis at CELERY_BROKER_URL is not reachable ({exc})")


def _test_database_url() -> str:
    """DATABASE_URL of the database this test runs in (pytest-django's ``test_<name>``) for the worker."""
    db = connection.settings_dict
    credentials = quote(db["USER"] or "", safe="")
    if db.get("PASSWORD"):
        credentials += ":" + quote(db["PASSWORD"], safe="")
    host = db["HOST"] or "localhost"
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgres://{credentials}@{host}{port}/{quote(db['NAME'], safe='')}"


BINDING_DEADLINES_KEY = "_kombu.binding_deadlines"  # kombu's sorted set: exchange → when its bindings go
PIDBOX_EXCHANGE = "celery.pidbox"  # remote control: a worker's mailbox queue is bound there, and expires


def redis_keys(queue: str) -> set[bytes]:
    """The keys kombu keeps for ``queue``: its lists (one per priority), ``_kombu.binding*.<queue>``."""
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    return {key for key in broker.scan_iter(match=f"*{queue}*") if queue.encode() in key}


def delete_queue_keys(*queues: str) -> None:
    """Remove every trace ``queues`` left in Redis, including their exchanges' binding deadlines.

    Each queue here has a direct exchange of the same name (Celery's and ``node_queue_declaration``'s).
    """
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    for queue in queues:
        for key in redis_keys(queue):
            broker.delete(key)
        broker.zrem(BINDING_DEADLINES_KEY, queue)
    left = {queue: redis_keys(queue) for queue in queues if redis_keys(queue)}
    assert not left, f"Redis keys left behind: {left}"


def drop_orphan_deadline(exchange: str) -> None:
    """Forget ``exchange``'s binding deadline once no binding table is left for it (as kombu's sweep would)."""
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    if not broker.exists(f"_kombu.binding.{exchange}"):
        broker.zrem(BINDING_DEADLINES_KEY, exchange)


@dataclass
class Worker:
    node_name: str
    queue: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_node(self, timeout_s: float = NODE_TIMEOUT_S) -> Node:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            node = Node.objects.filter(name=self.node_name).first()
            if node is not None:
                return node
            if self.process.poll() is not None:
                pytest.fail(f"the worker exited with {self.process.returncode}:\n{self.log()}")
            time.sleep(0.25)
        pytest.fail(f"no Node {self.node_name!r} after {timeout_s:.0f} s; worker log:\n{self.log()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)  # the worker's own session: it and its children only
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=15)


@pytest.fixture
def start_worker(transactional_db, tmp_path: Path) -> Iterator[Callable[..., Worker]]:  # type: ignore[no-untyped-def]
    """Start ``celery -A vramplan worker`` on a queue of its own, with the test's database and broker.

    The worker is always stopped at teardown; its log is printed there, which pytest shows on failure.
    """
    _require_services()
    workers: list[Worker] = []

    def start(**extra_env: str) -> Worker:
        tag = uuid.uuid4().hex[:10]
        node_name, queue = f"itest-{tag}", f"itest.{tag}"
        log_path = tmp_path / f"worker-{tag}.log"
        env = clean_env(
            DJANGO_SETTINGS_MODULE=settings.SETTINGS_MODULE,
            DATABASE_URL=_test_database_url(),
            CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
            VRAMPLAN_NODE_NAME=node_name,
            **extra_env,
        )
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "vramplan", "worker", "--pool=solo", "--concurrency=1",
                 f"--queues={queue}", f"--hostname={node_name}@%h", "--without-gossip", "--without-mingle",
                 "--without-heartbeat", "--loglevel=INFO"],
                cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        worker = Worker(node_name=node_name, queue=queue, process=process, log_path=log_path)
        workers.append(worker)
        return worker

    yield start

    for worker in workers:
        worker.stop()
        delete_queue_keys(worker.queue, tasks.node_queue(worker.node_name))
    if workers:
        drop_orphan_deadline(PIDBOX_EXCHANGE)
        print(f"--- log of worker {worker.node_name} (exit {worker.process.returncode}) ---\n{worker.log()}")


def test_worker_records_this_machine_through_the_host_probe(start_worker) -> None:  # type: ignore[no-untyped-def]
    worker = start_worker()

    tasks.node_heartbeat.apply_async(queue=worker.queue)
    node = worker.wait_for_node()

    inventory = node.inventory
    assert node.probe == "host", worker.log()
    assert inventory["probe"] == "host"
    assert inventory["device_type"] == "cpu"
    assert inventory["nvml"] is None
    assert "libnvidia-ml.so.1" in inventory["nvml_unavailable_reason"]
    assert inventory["host"]["cpu_model"]
    assert inventory["host"]["logical_cpus"] == psutil.cpu_count(logical=True)
    assert inventory["host"]["ram_total_bytes"] == psutil.virtual_memory().total
    assert inventory["host"]["hostname"] == socket.gethostname()
    assert node.device_count == 0
    assert node.verified_usable_memory_bytes is None
    assert node.last_heartbeat_at is not None


def test_worker_records_gpus_through_the_fake_nvml(start_worker, fake_nvml_dir: Path) -> None:  # type: ignore[no-untyped-def]
    """The NVML path end to end: the worker's pynvml loads the fake libnvidia-ml.so.1 (no real GPU)."""
    worker = start_worker(LD_LIBRARY_PATH=str(fake_nvml_dir))

    tasks.node_heartbeat.apply_async(queue=worker.queue)
    node = worker.wait_for_node()

    assert node.probe == "nvml", node.inventory.get("nvml_unavailable_reason")
    assert node.device_count == 2
    assert node.verified_usable_memory_bytes == 85_520_809_984 - 566_231_040  # total less the fake's reserve
    assert node.inventory["usable_memory_basis"] == "total-reserved"
    assert node.driver_version == "550.54.15"
    assert node.cuda_driver_version == "12.4"
    devices = node.inventory["nvml"]["devices"]
    assert [d["name"] for d in devices] == ["NVIDIA H100 80GB HBM3"] * 2
    assert node.inventory["host"]["logical_cpus"] == psutil.cpu_count(logical=True)


def test_worker_on_a_driver_before_r510_records_the_total_and_says_so(start_worker, fake_nvml_dir: Path) -> None:  # type: ignore[no-untyped-def]
    """The fake plays a driver without nvmlDeviceGetMemoryInfo_v2: no reserve apart, so the total, labelled."""
    worker = start_worker(LD_LIBRARY_PATH=str(fake_nvml_dir), FAKE_NVML_MEMORY_V2_RESULT="13")

    node = worker.wait_for_node()  # recorded at worker start

    assert node.probe == "nvml", node.inventory.get("nvml_unavailable_reason")
    assert node.verified_usable_memory_bytes == 85_520_809_984
    assert node.inventory["usable_memory_basis"] == "total (driver before R510 reports no reserve)"
    assert {d["memory_info_version"] for d in node.inventory["nvml"]["devices"]} == {1}


def test_worker_registers_at_start_and_answers_on_its_node_queue(start_worker) -> None:  # type: ignore[no-untyped-def]
    """No task sent: the worker records its node when ready; then beat's dispatch reaches it by name."""
    worker = start_worker()
    node = worker.wait_for_node()
    first = node.last_heartbeat_at
    # Ready means consuming: the worker declared node.<name> expiring (x-expires), not as a permanent binding.
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    queue = tasks.node_queue(worker.node_name)
    assert broker.exists(f"_kombu.binding.{queue}")
    assert broker.zscore(BINDING_DEADLINES_KEY, queue) is not None
    assert not broker.exists(f"_kombu.binding_permanent.{queue}")

    assert tasks.node_heartbeat_dispatch.apply().get() >= 1  # runs here, sends to node.<name> queues

    deadline = time.monotonic() + NODE_TIMEOUT_S
    while time.monotonic() < deadline:
        node.refresh_from_db()
        if node.last_heartbeat_at > first:
            break
        time.sleep(0.25)
    else:
        pytest.fail(f"the heartbeat sent to {queue} was not answered:\n{worker.log()}")


@pytest.mark.django_db
def test_dispatch_declares_node_queues_that_redis_expires(settings) -> None:  # type: ignore[no-untyped-def]
    """No worker here: what a dispatch leaves in Redis for a node expires on its own, and a silent node gets nothing.

    Nothing consumes ``node.<name>`` in this test, as for a node whose worker has gone: the queue's list
    carries a TTL of SILENT_AFTER_PERIODS periods (reset by each publish), and its binding table a deadline.
    """
    _require_services()
    tag = uuid.uuid4().hex[:10]
    fresh, silent = f"itest-fresh-{tag}", f"itest-silent-{tag}"
    period_s = tasks.heartbeat_period_s()
    now = timezone.now()
    Node.objects.create(name=fresh, last_heartbeat_at=now)
    Node.objects.create(
        name=silent, last_heartbeat_at=now - timedelta(seconds=(tasks.SILENT_AFTER_PERIODS + 1) * period_s)
    )
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    fresh_queue, silent_queue = tasks.node_queue(fresh), tasks.node_queue(silent)
    try:
        assert tasks.node_heartbeat_dispatch.apply().get() == 1

        assert broker.llen(fresh_queue) == 1
        ttl_ms = broker.pttl(fresh_queue)
        assert 0 < ttl_ms <= tasks.SILENT_AFTER_PERIODS * period_s * 1000
        assert broker.exists(f"_kombu.binding.{fresh_queue}")
        assert broker.zscore(BINDING_DEADLINES_KEY, fresh_queue) is not None
        assert not broker.exists(f"_kombu.binding_permanent.{fresh_queue}")  # that one would never be swept
        assert redis_keys(silent_queue) == set()
    finally:
        delete_queue_keys(fresh_queue, silent_queue)
