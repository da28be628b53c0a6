"""Celery tasks: thin adapters over the agent and services.

Heartbeats are per node: every worker also consumes the queue ``node.<its node name>`` (added when it
starts), records its node as soon as it is ready, and beat's ``node_heartbeat_dispatch`` sends one
``node_heartbeat`` to each known node's queue. A heartbeat sent to the shared queue would reach one
random worker; one sent to a node's queue reaches that node. Messages expire after one period, so a
node whose worker is gone does not pile them up.
"""

from __future__ import annotations

import logging

from celery import shared_task
from celery.signals import celeryd_after_setup, worker_ready
from django.conf import settings

from catalog.models import Node
from workers import agent

logger = logging.getLogger(__name__)


def node_queue(name: str) -> str:
    return f"node.{name}"


@celeryd_after_setup.connect
def _consume_own_node_queue(sender, instance, **kwargs) -> None:  # type: ignore[no-untyped-def]
    instance.app.amqp.queues.select_add(node_queue(agent.node_name()))


@worker_ready.connect
def _register_node_on_start(sender, **kwargs) -> None:  # type: ignore[no-untyped-def]
    try:
        node = agent.node_heartbeat()
    except Exception:  # a worker that cannot register must still start and serve; the log says why
        logger.exception("node registration at worker start failed")
        return
    logger.info("registered node %s (%s, %d devices)", node.name, node.probe, node.device_count)


@shared_task(name="workers.tasks.node_heartbeat", ignore_result=True)
def node_heartbeat() -> dict[str, object]:
    """Report the inventory of the node whose worker runs this task (NVML, or the host probe)."""
    node = agent.node_heartbeat()
    return {"node": node.name, "probe": node.probe, "device_count": node.device_count}


@shared_task(name="workers.tasks.node_heartbeat_dispatch", ignore_result=True)
def node_heartbeat_dispatch() -> int:
    """Send one heartbeat to each registered node's own queue; returns how many were sent."""
    period_s = float(settings.CELERY_BEAT_SCHEDULE["node-heartbeat"]["schedule"])
    names = list(Node.objects.values_list("name", flat=True))
    for name in names:
        node_heartbeat.apply_async(queue=node_queue(name), expires=period_s)
    return len(names)
