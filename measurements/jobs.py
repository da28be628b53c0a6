"""Acceptance jobs: start, dispatch to a free live node of the configuration, claim, progress, finish, fail, cancel,
reap.

Job state lives in the database. A job is dispatched to the queue of one live node of its configuration that runs
nothing else; the worker claims the row atomically, so a duplicate delivery does nothing; progress doubles as the
node's heartbeat while it runs; a reaper re-queues jobs whose node went silent, up to ``max_attempts``. Messages are
sent only after the transaction commits, by the sender the workers app registers (``set_job_sender``): this package
imports nothing of the workers' Celery side."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from pydantic import ValidationError

from budgets.services import workload_validate
from catalog.models import Node
from workers.runner.plan import (
    LAUNCH_FLAGS,
    LAUNCH_PLACEHOLDERS,
    PlaceholderError,
    launch_values,
    program_argv,
    template_placeholders,
    with_launch,
)

from .choices import FailureKind, JobStatus, MeasurementSource, OrderStatus
from .document import MeasurementDocument
from .errors import ConcurrentStart, ServiceError, validation_message
from .evidence import measurement_record
from .models import AcceptanceJob, Measurement, Order, RegisteredProgram
from .nodes import live_nodes, stale_after_s
from .states import job_end, job_transition, order_transition

logger = logging.getLogger(__name__)


OUTCOME_FAILURE_KIND = {
    "oom": FailureKind.OOM,
    "timeout": FailureKind.TIMEOUT,
    "cancelled": FailureKind.CANCELLED,
    "failed": FailureKind.ERROR,
    "signalled": FailureKind.ERROR,
}

JobSender = Callable[[int, str], None]  # (job id, node name): puts the job on that node's queue
_sender: JobSender | None = None


def set_job_sender(send: JobSender) -> None:
    """Register how a job reaches its node (the workers app registers its Celery task when Django starts)."""
    global _sender
    _sender = send


def program_validate_template(template: Any) -> list[str]:
    """A program's argv template: a non-empty list of strings whose placeholders are all known."""
    if not isinstance(template, list) or not template or not all(isinstance(a, str) for a in template):
        raise ServiceError('argv_template must be a non-empty list of strings, e.g. ["python3", "-m", "pkg"]',
                           field="argv_template")  # fmt: skip
    if len(template) > 128 or any(len(a) > 1024 for a in template):
        raise ServiceError("argv_template has at most 128 arguments of at most 1024 characters", field="argv_template")
    try:
        template_placeholders(template)
    except PlaceholderError as exc:
        raise ServiceError(str(exc), field="argv_template") from None
    return template


def acceptance_job_start(
    order: Order, *, program: RegisteredProgram | None = None, expandable_segments: bool = False
) -> AcceptanceJob:
    """Queue an acceptance job for ``order`` (or record it failed at once: ``no_node``).

    Raises ServiceError when the order is final or the program may not run on its configuration, and
    ConcurrentStart when the order's status is no longer the one ``order`` holds: the order row is locked
    while the job is created, so of two starts that read a draft order together one queues the job and the
    other is told so (before, it failed on the transition it no longer needed, a 409 that said nothing useful).
    """
    _refuse_final(order.status)
    launch: dict[str, Any] = {}
    if program is not None:
        if not program.enabled:
            raise ServiceError(f"program {program.slug!r} is disabled", field="program")
        if not program.allowed_configurations.filter(pk=order.configuration_id).exists():
            raise ServiceError(
                f"program {program.slug!r} is not allowed on configuration {order.configuration.slug!r}",
                field="program",
            )
        launch = _recommended_launch(order, program)
        try:
            program_argv(program.argv_template, _placeholder_values(order, launch))
        except PlaceholderError as exc:
            raise ServiceError(f"program {program.slug!r} cannot run this workload: {exc}", field="program") from None
    time_limit = program.time_limit_seconds if program else settings.ACCEPTANCE_JOB_TIME_LIMIT_SECONDS
    with transaction.atomic():
        locked = Order.objects.select_for_update().get(pk=order.pk)  # a concurrent start waits here
        if locked.status != order.status:
            _refuse_final(locked.status)
            raise ConcurrentStart(
                f"the order became {locked.status!r} while this job was being started (a job started by another "
                "request, or a measurement); nothing was started: see the order's jobs, and start one again if it "
                "still needs one"
            )
        job = AcceptanceJob.objects.create(order=order, program=program, expandable_segments=expandable_segments,
                                           time_limit_seconds=time_limit, launch=launch)  # fmt: skip
        if not live_nodes(order.configuration).exists():
            job_end(
                job,
                JobStatus.FAILED,
                FailureKind.NO_NODE,
                f"No live node of configuration {order.configuration.slug!r} ({order.configuration.name}): none has "
                f"sent a heartbeat in the last {stale_after_s():.0f} s. Start a worker on such a node.",
                timezone.now(),
            )
            return job
        if locked.status != OrderStatus.ACCEPTANCE_PENDING:
            order_transition(order, OrderStatus.ACCEPTANCE_PENDING)
    acceptance_jobs_dispatch()
    job.refresh_from_db()
    return job


def _refuse_final(status: str) -> None:
    if status in (OrderStatus.CONFIRMED, OrderStatus.CANCELLED):
        raise ServiceError(f"the order is {status}; start a job on an open order", conflict=True)


def _placeholder_values(order: Order, launch: Mapping[str, Any]) -> dict[str, str]:
    """The workload's placeholder values, with those of the recommended launch the job recorded laid over them."""
    from workers.runner.plan import placeholder_values

    values = placeholder_values(order.workload.description, order.configuration.device_count)
    return with_launch(values, launch.get("values") or {})


def _recommended_launch(order: Order, program: RegisteredProgram) -> dict[str, Any]:
    """What of the recommendation a program's job runs, recorded on the job (``AcceptanceJob.launch``).

    The recommender's entry for the order's configuration (``recommendations.services.verdict_for``, calibrated as
    the order's owner sees it): its verdict, plan and launch command, the placeholder values filled from that command
    (``launch_values``: the job runs it flag by flag), the sessions one replica of the plan serves and the budget of
    the plan, which the run is compared with. Empty for a program that takes no engine setting; without a launch (an
    entry that does not fit, an engine without one) it says why, and the job runs the workload's own settings.
    """
    carried = template_placeholders(program.argv_template)
    if not carried & LAUNCH_PLACEHOLDERS:
        return {}
    from recommendations.document import LaunchDocument, PlanDocument
    from recommendations.services import verdict_for

    slug, spec = order.configuration.slug, workload_validate(order.workload.description)
    entry = verdict_for(spec, slug, order.owner)
    if entry is None:
        return {"configuration": slug, "launch": None, "why": "the recommender's catalog has no such configuration"}
    plan = entry.plan
    record = {"configuration": slug, "verdict": entry.verdict.value, "launch": None,
              "plan": PlanDocument.of(plan).dump() if plan is not None else None}  # fmt: skip
    launch = entry.launch
    if launch is None or launch.engine not in LAUNCH_FLAGS or plan is None or entry.budget is None:
        why = f"the recommender's {entry.verdict.value} entry has no serving launch"
        return record | {"why": f"{why}: the job runs the workload's own settings"}
    try:
        values = launch_values(launch.engine, launch.argv)
    except PlaceholderError as exc:
        message = f"program {program.slug!r} cannot run the recommended launch: {exc}"
        raise ServiceError(message, field="program") from None
    sessions = spec.inference.concurrent_sessions if spec.inference is not None else 1
    return record | {
        "launch": LaunchDocument.of(launch).dump(),
        "values": values,
        "not_in_template": sorted(name for name, value in values.items() if value is not None and name not in carried),
        "sessions_per_replica": math.ceil(sessions / plan.replicas),
        "budget": entry.budget.as_contract(),
    }


def _send(job_id: int, node_name: str) -> None:
    if _sender is None:
        raise RuntimeError("no job sender registered: is the 'workers' app in INSTALLED_APPS?")
    _sender(job_id, node_name)


def acceptance_jobs_dispatch(*, now: datetime | None = None) -> int:
    """Give queued jobs to free live nodes of their configuration; re-send unclaimed messages.

    A node is free when no job assigned to it is running or waiting for it. Returns messages sent.
    """
    now = now or timezone.now()
    sent = 0
    with transaction.atomic():
        # Messages sent but never claimed (lost with a broker restart, or their queue expired): send again.
        unclaimed = AcceptanceJob.objects.select_for_update(skip_locked=True, of=("self",)).filter(
            status=JobStatus.QUEUED, node__isnull=False, dispatched_at__lt=now - timedelta(seconds=stale_after_s())
        )
        for job in unclaimed.select_related("node"):
            node = job.node
            assert node is not None  # the queryset asks for node__isnull=False
            if node.last_heartbeat_at and node.last_heartbeat_at >= now - timedelta(seconds=stale_after_s()):
                job.dispatched_at = now
                job.save(update_fields=["dispatched_at"])
                transaction.on_commit(partial(_send, job.pk, node.name))
            else:  # its node went silent: let another node take it
                job.node = None
                job.dispatched_at = None
                job.save(update_fields=["node", "dispatched_at"])
            sent += 1
        busy = set(
            AcceptanceJob.objects.filter(
                Q(status=JobStatus.RUNNING) | Q(status=JobStatus.QUEUED, node__isnull=False)
            ).values_list("node_id", flat=True)
        )
        # The free live nodes, asked once per dispatch and grouped by configuration; then, per configuration,
        # only its oldest waiting jobs, as many as it has free nodes. A dispatch costs a few queries per free
        # node, not one per waiting job, and locks only the jobs it can give out: dispatchers running at once
        # (one per finished job) skip each other's rows and take the next ones.
        taken: set[int] = set()  # nodes this dispatch gave a job, or found taken once it held their lock
        for configuration_id, nodes in _free_nodes_by_configuration(busy, now).items():
            waiting = (
                AcceptanceJob.objects.select_for_update(skip_locked=True, of=("self",))
                .filter(status=JobStatus.QUEUED, node__isnull=True, cancel_requested=False)
                .filter(order__configuration_id=configuration_id)
                .order_by("queued_at", "id")[: len(nodes)]
            )
            for job in waiting:
                node = _lock_free_node(nodes, busy)
                if node is None:
                    # The nodes read at the start were taken meanwhile by a dispatcher that skipped this
                    # job (locked here): read the live nodes again, once, so the job does not wait for the
                    # next dispatch while a node that came free since (``busy`` is from the start) sits idle.
                    # Only the nodes seen taken since, after their lock, are left out.
                    nodes = list(live_nodes(now=now).filter(configuration_id=configuration_id).exclude(pk__in=taken))
                    node = _lock_free_node(nodes, taken)
                if node is None:
                    break
                busy.add(node.pk)
                taken.add(node.pk)
                job.node = node
                job.dispatched_at = now
                job.save(update_fields=["node", "dispatched_at"])
                transaction.on_commit(partial(_send, job.pk, node.name))
                sent += 1
    return sent


def _free_nodes_by_configuration(busy: set[int], now: datetime) -> dict[int, list[Node]]:
    """Live nodes with no job, in name order, by configuration id (one query)."""
    free: dict[int, list[Node]] = {}
    for node in live_nodes(now=now).exclude(pk__in=busy):
        if node.configuration_id is not None:  # a node serving no configuration takes no job
            free.setdefault(node.configuration_id, []).append(node)
    return free


def _lock_free_node(candidates: list[Node], busy: set[int]) -> Node | None:
    """The first of ``candidates`` still free, locked for this transaction (and taken off the list): two
    dispatchers running at once cannot both give it a job (the second skips the locked row, or sees the
    first one's job once it commits)."""
    while candidates:
        candidate = candidates.pop(0)
        if candidate.pk in busy:
            continue
        node = Node.objects.select_for_update(skip_locked=True).filter(pk=candidate.pk).first()
        if node is None:
            continue
        taken = AcceptanceJob.objects.filter(node=node).filter(Q(status=JobStatus.RUNNING) | Q(status=JobStatus.QUEUED))
        if not taken.exists():
            return node
        busy.add(node.pk)
    return None


@dataclass(frozen=True)
class ClaimedJob:
    """What a worker needs to run a claimed job: no ORM object crosses into the runner."""

    job_id: int
    attempt: int
    workload: dict[str, Any]
    argv_template: list[str] | None
    placeholders: dict[str, str]
    time_limit_seconds: int
    expandable_segments: bool
    device_count: int


def acceptance_job_claim(job_id: int, node_name: str) -> ClaimedJob | None:
    """Claim a queued job for ``node_name`` atomically; None when someone else has it, or it is gone.

    A duplicate delivery finds the row already running (or final) and does nothing. A job whose
    attempts are used up ends ``interrupted`` instead of running again.

    The claim waits for the row's lock rather than skipping it: a concurrent dispatcher's locking read of
    waiting jobs can hold this row to the end of its transaction without taking it (PostgreSQL keeps the lock
    of a row that it locked and then found no longer matching), and a claim that skipped it would drop the
    delivery and idle the node until the message is re-sent, three heartbeat periods later. The
    transactions that lock waiting jobs (dispatch, reap) are short and wait for no lock themselves, so the
    wait is short and cannot deadlock.
    """
    with transaction.atomic():
        job = (
            AcceptanceJob.objects.select_for_update(of=("self",))
            .select_related("order__workload", "order__configuration", "program", "node")
            .filter(pk=job_id, status=JobStatus.QUEUED, node__name=node_name)
            .first()
        )
        if job is None:
            return None
        now = timezone.now()
        if job.cancel_requested:
            job_end(job, JobStatus.CANCELLED, FailureKind.CANCELLED, "Cancelled before it started.", now)
            return None
        if job.attempt >= job.max_attempts:
            job_end(job, JobStatus.FAILED, FailureKind.INTERRUPTED,
                     f"{job.attempt} attempts were interrupted; not trying again.", now)  # fmt: skip
            return None
        job_transition(job, JobStatus.RUNNING)
        job.attempt += 1
        job.started_at = job.heartbeat_at = now
        job.progress_phase, job.progress_percent = "starting", 0.0
        try:
            with transaction.atomic():
                job.save(update_fields=["status", "attempt", "started_at", "heartbeat_at", "progress_phase",
                                        "progress_percent"])  # fmt: skip
        except IntegrityError:  # job_one_running_per_node: this node already runs a job
            return None
        assert job.node_id is not None  # the job was selected by node__name
        Node.objects.filter(pk=job.node_id).update(last_heartbeat_at=now)
        return ClaimedJob(
            job_id=job.pk,
            attempt=job.attempt,
            workload=job.order.workload.description,
            argv_template=list(job.program.argv_template) if job.program else None,
            placeholders=_placeholder_values(job.order, job.launch),
            time_limit_seconds=job.time_limit_seconds,
            expandable_segments=job.expandable_segments,
            device_count=job.order.configuration.device_count,
        )


def _this_run(job_id: int, node_name: str, attempt: int):
    """The job row while it is still this run's: running, on this node, at this attempt (a job reaped and
    claimed again, even on the same node, is another run's)."""
    return AcceptanceJob.objects.filter(pk=job_id, status=JobStatus.RUNNING, node__name=node_name, attempt=attempt)


def acceptance_job_progress(job_id: int, node_name: str, attempt: int, phase: str, percent: float) -> bool:
    """Record progress (and the node's heartbeat); True when the job should stop (cancelled or taken away)."""
    now = timezone.now()
    updated = _this_run(job_id, node_name, attempt).update(
        progress_phase=phase[:32], progress_percent=max(0.0, min(100.0, float(percent))), heartbeat_at=now
    )
    Node.objects.filter(name=node_name).update(last_heartbeat_at=now)
    if not updated:
        return True  # reaped and re-queued elsewhere, or ended: this run's result would be discarded
    return AcceptanceJob.objects.filter(pk=job_id, cancel_requested=True).exists()


def acceptance_job_finish(job_id: int, node_name: str, attempt: int, document: dict[str, Any]) -> Measurement | None:
    """Store a finished run's measurement and end the job; None when this run no longer owns the job.

    A document that does not validate ends the job ``error`` with the fields that were wrong (it is not
    re-run: the same program would produce the same document).
    """
    with transaction.atomic():
        job = (
            _this_run(job_id, node_name, attempt)
            .select_for_update(of=("self",))
            .select_related("order", "node")
            .first()
        )
        if job is None:
            logger.warning("job %s attempt %s finished on %s but is no longer this run's; result discarded",
                           job_id, attempt, node_name)  # fmt: skip
            return None
        try:
            parsed = MeasurementDocument.model_validate(document)
        except ValidationError as exc:
            fields = "; ".join(f"{k}: {', '.join(v)}" for k, v in validation_message(exc).items())
            job_end(job, JobStatus.FAILED, FailureKind.ERROR, f"the run's measurement is not valid: {fields}",
                     timezone.now())  # fmt: skip
            return None
        measurement, _ = measurement_record(job.order, parsed, source=MeasurementSource.JOB, job=job, node=job.node)
        outcome = parsed.outcome
        if outcome == "succeeded":  # a note from an earlier, interrupted attempt stays as the job's history
            job_end(job, JobStatus.SUCCEEDED, "", job.error, timezone.now())
        else:
            status = JobStatus.CANCELLED if outcome == "cancelled" else JobStatus.FAILED
            job_end(job, status, OUTCOME_FAILURE_KIND[outcome], _failure_text(parsed), timezone.now())
        job.progress_phase, job.progress_percent = "done", 100.0
        job.save(update_fields=["progress_phase", "progress_percent"])
    acceptance_jobs_dispatch()
    return measurement


def _failure_text(document: MeasurementDocument) -> str:
    parts = [f"outcome {document.outcome}"]
    if document.signal is not None:
        parts.append(f"killed by signal {document.signal} ({document.signal_name or '?'})")
    elif document.exit_code is not None:
        parts.append(f"exit code {document.exit_code}")
    if document.error:
        parts.append(document.error)
    return "; ".join(parts)


def acceptance_job_fail(job_id: int, node_name: str, attempt: int, error: str) -> None:
    """End a running job as ``error`` when the worker itself failed (not the measured program)."""
    with transaction.atomic():
        job = _this_run(job_id, node_name, attempt).select_for_update().first()
        if job is not None:
            job_end(job, JobStatus.FAILED, FailureKind.ERROR, error, timezone.now())
    acceptance_jobs_dispatch()


def acceptance_job_cancel(job: AcceptanceJob) -> AcceptanceJob:
    """Cancel a queued job at once; ask a running one to stop (its worker kills the child's process group)."""
    with transaction.atomic():
        job = AcceptanceJob.objects.select_for_update().get(pk=job.pk)
        if job.status == JobStatus.QUEUED:
            job.cancel_requested = True
            job.save(update_fields=["cancel_requested"])
            job_end(job, JobStatus.CANCELLED, FailureKind.CANCELLED, "Cancelled while queued.", timezone.now())
        elif job.status == JobStatus.RUNNING:
            job.cancel_requested = True
            job.save(update_fields=["cancel_requested"])
        else:
            raise ServiceError(f"the job already ended ({job.status}); nothing to cancel", conflict=True)
    return job


def acceptance_jobs_reap(*, now: datetime | None = None, stale_s: float | None = None) -> dict[str, int]:
    """Re-queue running jobs whose node went silent (or end them ``interrupted`` at the attempt cap).

    Silent: no progress or heartbeat for ``stale_s`` seconds (default: 3 heartbeat periods). Then
    dispatch, so re-queued jobs and lost messages go out again.
    """
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=stale_after_s() if stale_s is None else stale_s)
    requeued = interrupted = 0
    with transaction.atomic():
        stale = (
            AcceptanceJob.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("node")
            .filter(status=JobStatus.RUNNING, heartbeat_at__lt=cutoff)
        )
        for job in stale:
            if job.cancel_requested:  # its worker died before it could stop it: it is stopped now
                job_end(job, JobStatus.CANCELLED, FailureKind.CANCELLED, "Cancelled; its node went silent.", now)
                continue
            where = job.node.name if job.node else "its node"
            since = f"{job.heartbeat_at:%Y-%m-%d %H:%M:%S} UTC"
            note = f"attempt {job.attempt}: {where} went silent (no progress since {since})"
            if job.attempt >= job.max_attempts:
                job_end(job, JobStatus.FAILED, FailureKind.INTERRUPTED, f"{note}; {job.attempt} attempts used up.", now)
                interrupted += 1
                continue
            job_transition(job, JobStatus.QUEUED)
            job.node = None
            job.dispatched_at = None
            job.progress_phase, job.progress_percent = "requeued", 0.0
            job.error = f"{note}; re-queued."
            job.save(update_fields=["status", "node", "dispatched_at", "progress_phase", "progress_percent", "error"])
            requeued += 1
    sent = acceptance_jobs_dispatch(now=now)
    return {"requeued": requeued, "interrupted": interrupted, "sent": sent}
