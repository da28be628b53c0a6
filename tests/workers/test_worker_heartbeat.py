"""The heartbeat end to end: a real ``celery worker`` process, a real Redis broker, real PostgreSQL.

The test sends ``workers.tasks.node_heartbeat`` through Redis to a worker subprocess that shares
the test database, then waits for the Node row the worker writes. Skipped when CELERY_BROKER_URL
is not Redis or the database is not PostgreSQL; with REQUIRE_SERVICES=1 those fail instead.
"""

from __future__ import annotations

import socket
import time
import uuid
from datetime import timedelta
from pathlib import Path

import psutil
import pytest
import redis
from django.conf import settings
from django.utils import timezone

from catalog.models import Node
from workers import tasks

from .realworker import (
    BINDING_DEADLINES_KEY,
    NODE_TIMEOUT_S,
    delete_queue_keys,
    require_services,
)

pytestmark = [pytest.mark.services]


def test_worker_records_this_machine_through_the_host_probe(start_worker) -> None:
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


def test_worker_records_gpus_through_the_fake_nvml(start_worker, fake_nvml_dir: Path) -> None:
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


def test_worker_on_a_driver_before_r510_records_the_total_and_says_so(start_worker, fake_nvml_dir: Path) -> None:
    """The fake plays a driver without nvmlDeviceGetMemoryInfo_v2: no reserve apart, so the total, labelled."""
    worker = start_worker(LD_LIBRARY_PATH=str(fake_nvml_dir), FAKE_NVML_MEMORY_V2_RESULT="13")

    node = worker.wait_for_node()  # recorded at worker start

    assert node.probe == "nvml", node.inventory.get("nvml_unavailable_reason")
    assert node.verified_usable_memory_bytes == 85_520_809_984
    assert node.inventory["usable_memory_basis"] == "total (driver before R510 reports no reserve)"
    assert {d["memory_info_version"] for d in node.inventory["nvml"]["devices"]} == {1}


def test_worker_registers_at_start_and_answers_on_its_node_queue(start_worker) -> None:
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
def test_dispatch_declares_node_queues_that_redis_expires(settings) -> None:
    """No worker here: what a dispatch leaves in Redis for a node expires on its own, and a silent node's queue
    never holds more than one heartbeat.

    Nothing consumes ``node.<name>`` in this test, as for a node whose worker has gone: the queue's list
    carries a TTL of SILENT_AFTER_PERIODS periods (reset by each publish), and its binding table a deadline.
    A live node is sent one per dispatch; a silent one only while nothing waits for it.
    """
    require_services()
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
        assert tasks.node_heartbeat_dispatch.apply().get() == 2  # the silent node's queue is empty: probed

        for queue in (fresh_queue, silent_queue):
            assert broker.llen(queue) == 1
            ttl_ms = broker.pttl(queue)
            assert 0 < ttl_ms <= tasks.SILENT_AFTER_PERIODS * period_s * 1000
            assert broker.exists(f"_kombu.binding.{queue}")
            assert broker.zscore(BINDING_DEADLINES_KEY, queue) is not None
            assert not broker.exists(f"_kombu.binding_permanent.{queue}")  # that one would never be swept

        assert tasks.node_heartbeat_dispatch.apply().get() == 1  # a probe waits: the silent node gets no second
        assert tasks.node_heartbeat_dispatch.apply().get() == 1
        assert (broker.llen(fresh_queue), broker.llen(silent_queue)) == (3, 1)

        broker.delete(silent_queue)  # as Redis does once the queue's TTL runs out
        assert tasks.node_heartbeat_dispatch.apply().get() == 2
        assert broker.llen(silent_queue) == 1
    finally:
        delete_queue_keys(fresh_queue, silent_queue)
