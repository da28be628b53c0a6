"""Celery tasks: thin adapters over the agent and services.

Heartbeats are per node: every worker also consumes the queue ``node.<its node name>`` (added when it
starts), records its node as soon as it is ready, and beat's ``node_heartbeat_dispatch`` sends one
``node_heartbeat`` to the queue of each node heard from within the last ``SILENT_AFTER_PERIODS``
heartbeat periods. A heartbeat sent to the shared queue would reach one random worker; one sent to a
node's queue reaches that node.

What keeps a gone node's queue from growing:

* Dispatch stops once its node has been silent for ``SILENT_AFTER_PERIODS`` periods, so at most that
  many heartbeats are ever queued for it. A node that comes back records itself when its worker
  starts (``_register_node_on_start``) and is dispatched to again from then on.
* Each message carries ``expires`` (one period), but on Redis and the filesystem transport that is
  only checked by a worker that consumes the message: it does not remove an unconsumed message.
* On Redis (kombu >= 5.6 honours ``x-expires`` there), the node queue is declared, by the dispatcher
  and by the worker alike, with ``expires`` = ``SILENT_AFTER_PERIODS`` periods: every publish or
  poll resets a ``PEXPIRE`` on the queue's lists, so they vanish that long after the last heartbeat
  sent to the node; its ``_kombu.binding.node.<name>`` table gets a deadline and is swept by any
  worker that consumes an expiring queue once unrefreshed for max(2 × expires, 1 h).
* The filesystem transport (the embedded broker) ignores ``x-expires``: up to
  ``SILENT_AFTER_PERIODS`` message files per gone node stay in its queue folder, and its exchange
  file in the control folder, until removed by hand.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task
from celery.signals import celeryd_after_setup, worker_ready
from django.conf import settings
from django.utils import timezone
from kombu import Exchange, Queue

from catalog.models import Node
from measurements import services as measurement_services
from workers import agent

logger = logging.getLogger(__name__)

#: A node not heard from for this many heartbeat periods gets no more heartbeats (see above).
SILENT_AFTER_PERIODS = 3


def heartbeat_period_s() -> float:
    """Seconds between two heartbeat dispatches (``NODE_HEARTBEAT_SECONDS``)."""
    return float(settings.CELERY_BEAT_SCHEDULE["node-heartbeat"]["schedule"])


def node_queue(name: str) -> str:
    """The name of node ``name``'s own queue."""
    return f"node.{name}"


def node_queue_declaration(name: str) -> Queue:
    """Node ``name``'s queue as the dispatcher and the worker both declare it: it expires when unused.

    Same exchange and routing key as Celery's queues created on demand (a direct exchange named
    after the queue), plus ``expires`` (``x-expires``) of ``SILENT_AFTER_PERIODS`` periods.
    """
    queue = node_queue(name)
    return Queue(queue, Exchange(queue), routing_key=queue, expires=SILENT_AFTER_PERIODS * heartbeat_period_s())


@celeryd_after_setup.connect
def _consume_own_node_queue(sender, instance, **kwargs) -> None:
    instance.app.amqp.queues.select_add(node_queue_declaration(agent.node_name()))


@worker_ready.connect
def _register_node_on_start(sender, **kwargs) -> None:
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
    """Send one heartbeat to the queue of each node heard from within ``SILENT_AFTER_PERIODS`` periods.

    Returns how many were sent. Nodes silent for longer get none, so no queue of a gone node grows.
    """
    period_s = heartbeat_period_s()
    heard_since = timezone.now() - timedelta(seconds=SILENT_AFTER_PERIODS * period_s)
    names = list(Node.objects.filter(last_heartbeat_at__gte=heard_since).values_list("name", flat=True))
    for name in names:
        node_heartbeat.apply_async(queue=node_queue_declaration(name), expires=period_s)
    return len(names)


# --- acceptance jobs -------------------------------------------------------------------------------


def acceptance_job_send(job_id: int, node_name: str) -> None:
    """Send a job to its node's own queue (called after the transaction that assigned it commits)."""
    acceptance_job_run.apply_async(args=(job_id,), queue=node_queue_declaration(node_name))


@shared_task(name="workers.tasks.acceptance_job_run", ignore_result=True, acks_late=True)
def acceptance_job_run(job_id: int) -> str:
    """Claim the job row for this node and run it; a duplicate delivery finds it claimed and returns."""
    node_name = agent.node_name()
    claimed = measurement_services.acceptance_job_claim(job_id, node_name)
    if claimed is None:
        return "not claimed"
    try:
        document = agent.acceptance_job_execute(claimed, node_name)
    except Exception as exc:  # the worker failed, not the measured program: end the job, say why
        logger.exception("acceptance job %s failed in the worker", job_id)
        error = f"worker error: {type(exc).__name__}: {exc}"
        measurement_services.acceptance_job_fail(job_id, node_name, claimed.attempt, error)
        return "error"
    measurement_services.acceptance_job_finish(job_id, node_name, claimed.attempt, document)
    return document["outcome"]


@shared_task(name="workers.tasks.acceptance_jobs_reap", ignore_result=True)
def acceptance_jobs_reap() -> dict[str, int]:
    """Beat: re-queue jobs whose node went silent, re-send lost messages, hand queued jobs to free nodes."""
    return measurement_services.acceptance_jobs_reap()
