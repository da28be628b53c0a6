"""Celery tasks: thin adapters over the agent and services.

Heartbeats are per node: every worker also consumes the queue ``node.<its node name>`` (added when it
starts), records its node as soon as it is ready, and beat's ``node_heartbeat_dispatch`` sends one
``node_heartbeat`` per period to the queue of each node heard from within the last
``SILENT_AFTER_PERIODS`` heartbeat periods (a *live* node). A heartbeat sent to the shared queue would
reach one random worker; one sent to a node's queue reaches that node.

A *silent* node (not heard from for longer, or never) is probed: it gets a heartbeat only when none
is waiting in its queue. A node whose worker is up but whose heartbeats failed for a while (a database
or broker hiccup) consumes the probe, records itself, and is live again within a period of the
hiccup's end, without a restart. A node that is really gone does not consume it, so nothing more is
sent to it while it waits.

What keeps a gone node's queue from growing:

* At most ``SILENT_AFTER_PERIODS`` heartbeats are queued for a node while it still counts as live
  (one per period); once silent, it is sent one only when its queue holds none. So its queue never
  holds more than ``SILENT_AFTER_PERIODS`` heartbeats, on any transport, however long it stays gone.
* Each message carries ``expires`` (one period), but on Redis and the filesystem transport that is
  only checked by a worker that consumes the message: it does not remove an unconsumed message.
* On Redis (kombu >= 5.6 honours ``x-expires`` there), the node queue is declared, by the dispatcher
  and by the worker alike, with ``expires`` = ``SILENT_AFTER_PERIODS`` periods: every publish or
  poll resets a ``PEXPIRE`` on the queue's lists, so they vanish that long after the last heartbeat
  sent to the node; its ``_kombu.binding.node.<name>`` table gets a deadline and is swept by any
  worker that consumes an expiring queue once unrefreshed for max(2 × expires, 1 h). A gone node is
  then probed again: about one message per ``SILENT_AFTER_PERIODS`` periods, never two waiting.
* The filesystem transport (the embedded broker) ignores ``x-expires``: up to
  ``SILENT_AFTER_PERIODS`` message files per gone node stay in its queue folder (and no more are
  sent while they wait), and its exchange file in the control folder, until removed by hand.

The database may drop a worker's connection mid-job (a restart, a failover, an idle-session kill):
progress writes that fail are skipped and retried on a new connection at the next poll, and the
job's result is written with retries for up to ``SILENT_AFTER_PERIODS`` periods (writing it twice is
harmless: the measurement is keyed by the run's id and only the run that owns the job may end it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

from celery import shared_task
from celery.signals import celeryd_after_setup, worker_ready
from django.db import InterfaceError, OperationalError, connection
from django.utils import timezone
from kombu import Exchange, Queue
from kombu.exceptions import ChannelError

from catalog.models import Node
from measurements import services as measurement_services
from measurements.nodes import SILENT_AFTER_PERIODS, heartbeat_period_s
from workers import agent

logger = logging.getLogger(__name__)

# the liveness rule (a node not heard from for SILENT_AFTER_PERIODS heartbeat periods is silent: probed only when its
# queue is empty) is measurements.nodes', which the dispatcher and the reaper read too

T = TypeVar("T")


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
    """Send one heartbeat to each live node's queue, and to each silent node's queue that holds none.

    Returns how many were sent. No probe is sent to a silent node while anything waits in its queue (see above).
    """
    period_s = heartbeat_period_s()
    heard_since = timezone.now() - timedelta(seconds=SILENT_AFTER_PERIODS * period_s)
    sent = 0
    with node_heartbeat.app.producer_or_acquire() as producer:
        for name, heard_at in Node.objects.order_by("name").values_list("name", "last_heartbeat_at"):
            queue = node_queue_declaration(name)
            silent = heard_at is None or heard_at < heard_since
            if silent and messages_waiting(producer.channel, queue):
                continue
            node_heartbeat.apply_async(queue=queue, expires=period_s, producer=producer)
            sent += 1
    return sent


def messages_waiting(channel: Any, queue: Queue) -> int:
    """How many messages wait in ``queue`` (0 when the broker has no such queue, or its lists expired)."""
    try:
        declared = queue.bind(channel).queue_declare(passive=True)  # kombu's queue_declare_ok_t
        return int(getattr(declared, "message_count", 0))
    except ChannelError:  # a passive declare of a queue the broker does not hold
        return 0


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
        with_database_retries(measurement_services.acceptance_job_fail, job_id, node_name, claimed.attempt, error)
        return "error"
    with_database_retries(measurement_services.acceptance_job_finish, job_id, node_name, claimed.attempt, document)
    return str(document["outcome"])


#: Connection errors after which a write is tried again on a new connection (a server restart or
#: failover, ``pg_terminate_backend``, a network cut); anything else is raised at once.
CONNECTION_ERRORS = (OperationalError, InterfaceError)


def with_database_retries(call: Callable[..., T], *args: Any, budget_s: float | None = None) -> T:
    """``call(*args)``, tried again on a new connection while the database is unreachable.

    Backs off from 0.5 s to one heartbeat period, for up to ``budget_s`` (default
    ``SILENT_AFTER_PERIODS`` periods: by then the reaper has given the job to another run, which this
    run's late result cannot end). ``call`` must be safe to repeat: the job services are (a stored
    measurement is found by its run id, and a job that already ended is no longer this run's).
    """
    period_s = heartbeat_period_s()
    deadline = time.monotonic() + (SILENT_AFTER_PERIODS * period_s if budget_s is None else budget_s)
    delay_s = 0.5
    while True:
        try:
            return call(*args)
        except CONNECTION_ERRORS as exc:
            connection.close()  # the next query opens a new one
            if time.monotonic() + delay_s > deadline:
                raise
            logger.warning("database unreachable in %s (%s); retrying in %.1f s", call.__name__, exc, delay_s)
            time.sleep(delay_s)
            delay_s = min(2 * delay_s, period_s)


@shared_task(name="workers.tasks.acceptance_jobs_reap", ignore_result=True)
def acceptance_jobs_reap() -> dict[str, int]:
    """Beat: re-queue jobs whose node went silent, re-send lost messages, hand queued jobs to free nodes."""
    return measurement_services.acceptance_jobs_reap()
