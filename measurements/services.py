"""Order, acceptance-job and measurement services: the one write path for views, tasks, admin and commands.

Job state lives in the database. A job is dispatched to the queue of one live node of its
configuration that runs nothing else; the worker claims the row atomically, so a duplicate delivery
does nothing; progress doubles as the node's heartbeat while it runs; a reaper re-queues jobs whose
node went silent, up to ``max_attempts``. Messages are sent only after the transaction commits.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.db import IntegrityError, models, transaction
from django.db.models import Q
from django.utils import timezone
from pydantic import ValidationError

from budgets.engine.budget import Budget, read_stored_budget
from budgets.models import Workload
from budgets.services import budget_estimate, configuration_device, workload_validate
from catalog.models import Configuration, Node
from workers.probes.model import InventoryError, read_inventory
from workers.runner.plan import PlaceholderError, program_argv, template_placeholders

from . import acceptance, calibration
from .choices import FailureKind, JobStatus, MeasurementSource, OrderStatus
from .document import MAX_BYTES, MAX_MS, MeasurementDocument
from .models import AcceptanceJob, Measurement, MeasurementReview, Order, RegisteredProgram

logger = logging.getLogger(__name__)

SILENT_AFTER_PERIODS = 3  # the heartbeat rule of workers.tasks: a node is live when heard from within 3 periods

OUTCOME_FAILURE_KIND = {
    "oom": FailureKind.OOM,
    "timeout": FailureKind.TIMEOUT,
    "cancelled": FailureKind.CANCELLED,
    "failed": FailureKind.ERROR,
    "signalled": FailureKind.ERROR,
}


class ServiceError(Exception):
    """A request the current state does not allow; ``field`` names what to change (a 400 or 409)."""

    def __init__(self, message: str, *, field: str = "detail", conflict: bool = False) -> None:
        super().__init__(message)
        self.field = field
        self.conflict = conflict


class ConcurrentStart(ServiceError):
    """Another request changed the order while this one was starting a job on it: nothing was started."""

    def __init__(self, message: str) -> None:
        super().__init__(message, conflict=True)


def heartbeat_period_s() -> float:
    return float(settings.CELERY_BEAT_SCHEDULE["node-heartbeat"]["schedule"])


def stale_after_s() -> float:
    return SILENT_AFTER_PERIODS * heartbeat_period_s()


# --- orders --------------------------------------------------------------------------------------


@transaction.atomic
def order_create(
    *,
    owner,
    workload: Workload,
    configuration: Configuration,
    recommended_verdict: str = "",
    recommended_reasons: list[dict[str, Any]] | None = None,
    override_reason: str = "",
) -> Order:
    """Place an order; it keeps the budget estimated now, the workload's acceptance criteria, and the verdict the
    recommender gave the configuration (the API passes it). An ``unsupported`` configuration needs an override reason.
    """
    if recommended_verdict == "unsupported" and not override_reason.strip():
        why = "; ".join(str(r.get("message", "")) for r in recommended_reasons or []) or "a compatibility rule failed"
        raise ServiceError(
            f"the recommender judged {configuration.slug} unsupported for this workload ({why}); give"
            " override_reason to order it anyway",
            field="override_reason",
        )
    spec = workload_validate(workload.description)
    budget = budget_estimate(spec, configuration_device(configuration.slug))  # vLLM: the pool on this GPU
    return Order.objects.create(
        owner=owner,
        workload=workload,
        configuration=configuration,
        budget=budget,
        min_headroom_fraction=spec.acceptance.min_headroom_fraction,
        max_ms_per_output_token=spec.acceptance.max_ms_per_output_token,
        recommended_verdict=recommended_verdict,
        recommended_reasons=recommended_reasons or [],
        override_reason=override_reason.strip(),
    )


def order_need_bytes(order: Order) -> int | None:
    """What the order's workload needs per device: for vLLM its share of the pool it fills (``serving.need_bytes``),
    beside the whole pool the engine preallocates (``per_device.total``); otherwise the budget's peak. None when the
    stored budget does not read."""
    budget, _ = stored_budget(order.budget)
    if budget is None:
        return None
    if budget.serving is not None and budget.serving.need_bytes is not None:
        return budget.serving.need_bytes
    return budget.per_device.total_bytes


def order_transition(order: Order, new_status: str) -> Order:
    """Change an order's status if the transition table allows it (the only place that writes status)."""
    with transaction.atomic():
        locked = Order.objects.select_for_update().get(pk=order.pk)
        try:
            acceptance.check_transition(locked.status, new_status)
        except acceptance.TransitionError as exc:
            raise ServiceError(str(exc), field="status", conflict=True) from None
        locked.status = new_status
        locked.save(update_fields=["status", "updated_at"])
    order.status = new_status
    return order


def order_confirm(order: Order) -> Order:
    return order_transition(order, OrderStatus.CONFIRMED)


def order_cancel(order: Order) -> Order:
    order = order_transition(order, OrderStatus.CANCELLED)
    for job in order.jobs.filter(status__in=[JobStatus.QUEUED, JobStatus.RUNNING]):
        acceptance_job_cancel(job)
    return order


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def order_upload_token_issue(order: Order) -> str:
    """A new upload token for this order alone (the previous one stops working); only its hash is kept."""
    token = f"vpu_{order.pk}_{secrets.token_urlsafe(32)}"
    order.upload_token_hash = _token_hash(token)
    order.upload_token_created_at = timezone.now()
    order.save(update_fields=["upload_token_hash", "upload_token_created_at", "updated_at"])
    return token


def upload_token_refusal(token: str, order_id: str | None) -> str:
    """Why an upload token was refused, said from its shape alone (no lookup, so no oracle for guessing tokens): an
    upload token is `vpu_<order id>_<secret>` (``order_upload_token_issue``); anything else is another credential."""
    if not token.startswith("vpu_"):
        return (
            "This is not an upload token: upload tokens start with 'vpu_' (POST /api/v1/orders/{id}/upload-token/ "
            "makes one). An API token goes in 'Authorization: Token <key>'."
        )
    owner = token[4:].split("_", 1)[0]
    if owner.isascii() and owner.isdigit() and owner != order_id:
        return f"This upload token is for order {owner}, not order {order_id}."
    return "The upload token is not valid for this order (a newer one replaces it)."


def order_upload_token_matches(order: Order, token: str) -> bool:
    return bool(order.upload_token_hash) and hmac.compare_digest(order.upload_token_hash, _token_hash(token))


# --- nodes ---------------------------------------------------------------------------------------


def live_nodes(configuration: Configuration | None = None, *, now: datetime | None = None) -> models.QuerySet[Node]:
    """Nodes (of ``configuration``; None: of any) heard from within ``SILENT_AFTER_PERIODS`` heartbeat
    periods, in name order."""
    since = (now or timezone.now()) - timedelta(seconds=stale_after_s())
    nodes = Node.objects.filter(last_heartbeat_at__gte=since).order_by("name")
    return nodes if configuration is None else nodes.filter(configuration=configuration)


def node_usable_memory_bytes(node: Node | None, configuration: Configuration) -> int | None:
    """Usable memory per device, best evidence first: the node's own reading, then the catalog.

    A GPU node: NVML's total less the driver's reserve. A host-probe node: its RAM. Otherwise the
    configuration's usable figure (the accelerator's, or host RAM for a CPU configuration).
    """
    if node is not None:
        if node.verified_usable_memory_bytes:
            return int(node.verified_usable_memory_bytes)
        try:
            inventory = read_inventory(node.inventory)
        except InventoryError:  # a stored inventory that does not read: the catalog's figure, as for no inventory
            inventory = None
        if node.device_count == 0 and inventory is not None and inventory.host.ram_total_bytes > 0:
            return inventory.host.ram_total_bytes
    annotated = Configuration.objects.with_memory().filter(pk=configuration.pk).values("usable_memory_bytes").first()
    return int(annotated["usable_memory_bytes"]) if annotated and annotated["usable_memory_bytes"] else None


# --- programs ------------------------------------------------------------------------------------


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


# --- acceptance jobs -----------------------------------------------------------------------------


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
    if program is not None:
        if not program.enabled:
            raise ServiceError(f"program {program.slug!r} is disabled", field="program")
        if not program.allowed_configurations.filter(pk=order.configuration_id).exists():
            raise ServiceError(
                f"program {program.slug!r} is not allowed on configuration {order.configuration.slug!r}",
                field="program",
            )
        try:
            program_argv(program.argv_template, _placeholder_values(order, program))
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
        job = AcceptanceJob.objects.create(
            order=order, program=program, expandable_segments=expandable_segments, time_limit_seconds=time_limit
        )
        if not live_nodes(order.configuration).exists():
            job.status = JobStatus.FAILED
            job.failure_kind = FailureKind.NO_NODE
            job.error = (
                f"No live node of configuration {order.configuration.slug!r} ({order.configuration.name}): none has "
                f"sent a heartbeat in the last {stale_after_s():.0f} s. Start a worker on such a node."
            )
            job.finished_at = timezone.now()
            job.save(update_fields=["status", "failure_kind", "error", "finished_at"])
            return job
        if locked.status != OrderStatus.ACCEPTANCE_PENDING:
            order_transition(order, OrderStatus.ACCEPTANCE_PENDING)
    acceptance_jobs_dispatch()
    job.refresh_from_db()
    return job


def _refuse_final(status: str) -> None:
    if status in (OrderStatus.CONFIRMED, OrderStatus.CANCELLED):
        raise ServiceError(f"the order is {status}; start a job on an open order", conflict=True)


def _placeholder_values(order: Order, program: RegisteredProgram | None = None) -> dict[str, str]:
    from workers.runner.plan import placeholder_values

    return placeholder_values(order.workload.description, order.configuration.device_count)


def _send(job_id: int, node_name: str) -> None:
    from workers.tasks import acceptance_job_send

    acceptance_job_send(job_id, node_name)


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
            _job_end(job, JobStatus.CANCELLED, FailureKind.CANCELLED, "Cancelled before it started.", now)
            return None
        if job.attempt >= job.max_attempts:
            _job_end(job, JobStatus.FAILED, FailureKind.INTERRUPTED,
                     f"{job.attempt} attempts were interrupted; not trying again.", now)  # fmt: skip
            return None
        job.status = JobStatus.RUNNING
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
            placeholders=_placeholder_values(job.order, job.program),
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


def _job_end(job: AcceptanceJob, status: str, failure_kind: str, error: str, now: datetime) -> None:
    job.status = status
    job.failure_kind = failure_kind
    job.error = error[:20_000]
    job.finished_at = now
    job.save(update_fields=["status", "failure_kind", "error", "finished_at"])


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
            _job_end(job, JobStatus.FAILED, FailureKind.ERROR, f"the run's measurement is not valid: {fields}",
                     timezone.now())  # fmt: skip
            return None
        measurement, _ = measurement_record(job.order, parsed, source=MeasurementSource.JOB, job=job, node=job.node)
        outcome = parsed.outcome
        if outcome == "succeeded":  # a note from an earlier, interrupted attempt stays as the job's history
            _job_end(job, JobStatus.SUCCEEDED, "", job.error, timezone.now())
        else:
            status = JobStatus.CANCELLED if outcome == "cancelled" else JobStatus.FAILED
            _job_end(job, status, OUTCOME_FAILURE_KIND[outcome], _failure_text(parsed), timezone.now())
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
            _job_end(job, JobStatus.FAILED, FailureKind.ERROR, error, timezone.now())
    acceptance_jobs_dispatch()


def acceptance_job_cancel(job: AcceptanceJob) -> AcceptanceJob:
    """Cancel a queued job at once; ask a running one to stop (its worker kills the child's process group)."""
    with transaction.atomic():
        job = AcceptanceJob.objects.select_for_update().get(pk=job.pk)
        if job.status == JobStatus.QUEUED:
            job.cancel_requested = True
            job.save(update_fields=["cancel_requested"])
            _job_end(job, JobStatus.CANCELLED, FailureKind.CANCELLED, "Cancelled while queued.", timezone.now())
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
                _job_end(job, JobStatus.CANCELLED, FailureKind.CANCELLED, "Cancelled; its node went silent.", now)
                continue
            where = job.node.name if job.node else "its node"
            since = f"{job.heartbeat_at:%Y-%m-%d %H:%M:%S} UTC"
            note = f"attempt {job.attempt}: {where} went silent (no progress since {since})"
            if job.attempt >= job.max_attempts:
                _job_end(
                    job, JobStatus.FAILED, FailureKind.INTERRUPTED, f"{note}; {job.attempt} attempts used up.", now
                )
                interrupted += 1
                continue
            job.status = JobStatus.QUEUED
            job.node = None
            job.dispatched_at = None
            job.progress_phase, job.progress_percent = "requeued", 0.0
            job.error = f"{note}; re-queued."
            job.save(update_fields=["status", "node", "dispatched_at", "progress_phase", "progress_percent", "error"])
            requeued += 1
    sent = acceptance_jobs_dispatch(now=now)
    return {"requeued": requeued, "interrupted": interrupted, "sent": sent}


# --- measurements --------------------------------------------------------------------------------


def measurement_record(
    order: Order,
    document: MeasurementDocument | dict[str, Any],
    *,
    source: str,
    job: AcceptanceJob | None = None,
    node: Node | None = None,
) -> tuple[Measurement, bool]:
    """Store a measurement once per run id, compare it with the order's budget and decide the order.

    Returns (measurement, created). Posting the same run again returns the stored one, unchanged.
    Raises pydantic.ValidationError for a bad document (the API turns it into a 400 naming the field).
    """
    parsed = document if isinstance(document, MeasurementDocument) else MeasurementDocument.model_validate(document)
    existing = Measurement.objects.filter(order=order, upload_key=parsed.run_id).first()
    if existing is not None:
        return existing, False
    peaks = parsed.peaks.by_view()
    budget, _ = stored_budget(order.budget)
    need, _ = acceptance.vllm_need(parsed.program_report, _needed_kv_tokens(order))
    judged = peaks | ({"vllm_need": need} if need is not None else {})
    try:
        with transaction.atomic():
            measurement = Measurement.objects.create(
                order=order,
                job=job,
                source=source,
                upload_key=parsed.run_id,
                node=node,
                outcome=parsed.outcome,
                device_used_peak_bytes=peaks["device_used"],
                framework_allocated_peak_bytes=peaks["framework_allocated"],
                framework_reserved_peak_bytes=peaks["framework_reserved"],
                host_rss_peak_bytes=peaks["host_rss"],
                document=parsed.dump(),
                budget=order.budget,
                ratios=acceptance.view_ratios(judged, budget),
            )
    except IntegrityError:  # the same run posted concurrently: the other request stored it
        return Measurement.objects.get(order=order, upload_key=parsed.run_id), False
    order_decide(order, measurement, parsed)
    return measurement, True


def stored_budget(data: Any) -> tuple[Budget | None, str | None]:
    """A stored budget (an order's or a measurement's) through the engine's typed reader
    (``read_stored_budget``): (budget, None), (None, None) when there is none, or (None, why) when it does not
    read — the comparison is then skipped, the measurement kept, and the decision says why."""
    stored = read_stored_budget(data)
    if stored.error is None:
        return stored.budget, None
    logger.warning("stored budget does not read: %s", stored.error)
    return None, f"the order's stored budget does not read ({stored.error}); measured peaks were not compared with it"


def order_decide(order: Order, measurement: Measurement, document: MeasurementDocument) -> None:
    """Decide an open order from a measurement (a confirmed or cancelled order keeps its decision)."""
    peaks = dict(measurement.peaks)
    need, why = acceptance.vllm_need(document.program_report, _needed_kv_tokens(order))
    if need is not None:
        peaks["vllm_need"] = need
    node = measurement.node
    budget, unreadable = stored_budget(order.budget)
    decision = acceptance.decide(
        outcome=document.outcome,
        peaks=peaks,
        host_only=order.configuration.kind == "cpu" or (node is not None and node.device_count == 0),
        usable_memory_bytes=node_usable_memory_bytes(node, order.configuration),
        criteria=acceptance.Criteria(order.min_headroom_fraction, order.max_ms_per_output_token),
        ms_per_output_token=document.ms_per_output_token,
        budget=budget,
        oom_phase=(document.framework or {}).get("oom_phase") if document.framework else None,
    )
    # an upload decides only when it ran on the ordered hardware; otherwise it is attached as evidence
    mismatch = _upload_hardware_mismatch(order, measurement, document)
    if mismatch is not None:
        decision = replace(
            decision,
            verdict="undecided",
            sentence=f"Not decided by this upload: {mismatch}. It is kept as evidence; an acceptance job on a node of"
            " the configuration, or an upload measured on it, decides the order.",
            broken_by=None,
        )
    with transaction.atomic():
        locked = Order.objects.select_for_update().get(pk=order.pk)
        if locked.status in (OrderStatus.CONFIRMED, OrderStatus.CANCELLED):
            return
        record = {**decision.as_dict(), "measurement": measurement.pk}
        if why:
            record["vllm_need_unavailable"] = why
        if unreadable:
            record["budget_unreadable"] = unreadable
        if decision.verdict == "undecided":
            if locked.decided_by_id is None:  # an earlier verdict stands; an undecided run does not erase it
                locked.decision = record
                locked.save(update_fields=["decision", "updated_at"])
                order.decision = record
            return
        if locked.status == OrderStatus.DRAFT:  # an upload on a draft order: it is being accepted now
            acceptance.check_transition(locked.status, OrderStatus.ACCEPTANCE_PENDING)
            locked.status = OrderStatus.ACCEPTANCE_PENDING
        if locked.status != decision.verdict:
            acceptance.check_transition(locked.status, decision.verdict)
            locked.status = decision.verdict
        locked.decision = record
        locked.decided_by = measurement
        locked.decided_at = timezone.now()
        locked.save(update_fields=["status", "decision", "decided_by", "decided_at", "updated_at"])
    order.status, order.decision = locked.status, record


def _upload_hardware_mismatch(order: Order, measurement: Measurement, document: MeasurementDocument) -> str | None:
    """Why an uploaded run is not one of the ordered configuration (``acceptance.hardware_mismatch``); None for a
    node's acceptance job, whose node the scheduler matched to the configuration."""
    if measurement.source != MeasurementSource.UPLOAD:
        return None
    configuration = order.configuration
    accelerator = configuration.accelerator
    count = configuration.device_count if accelerator is not None else 0
    marketed = accelerator.marketed_memory_bytes if accelerator is not None else None
    return acceptance.hardware_mismatch(document.devices, count, marketed)


def _needed_kv_tokens(order: Order) -> int:
    """KV tokens the workload holds at once: concurrent sessions × the longest request (inference)."""
    inference = (order.workload.description or {}).get("inference") or {}
    sessions = int(inference.get("concurrent_sessions") or 1)
    return sessions * (int(inference.get("max_input_tokens") or 0) + int(inference.get("max_output_tokens") or 0))


def validation_message(exc: ValidationError) -> dict[str, list[str]]:
    from budgets.engine import validation_errors

    return validation_errors(exc)


# --- calibration ---------------------------------------------------------------------------------


def calibration_records(
    queryset: models.QuerySet[Measurement],
    *,
    estimate_ms_per_output_token: Callable[[Measurement], float | None] | None = None,
) -> list[calibration.CalibrationRecord]:
    """Calibration records of the succeeded measurements in ``queryset`` that were compared with a budget:
    one per view of ``Measurement.ratios`` (a failed or out-of-memory run measured no completed peak).

    The latency view joins when the run measured ms per output token and ``estimate_ms_per_output_token``
    gives the estimate it is compared with (the recommender's roofline; measurements do not depend on it).
    One query: the order, workload, configuration and architecture come with each row.
    """
    rows = queryset.filter(outcome=acceptance.OUTCOME_SUCCEEDED, budget__isnull=False).select_related(
        "order__workload", "order__configuration__accelerator__architecture", "review"
    )
    records: list[calibration.CalibrationRecord] = []
    for measurement in rows:
        figures = [
            (view, measured, estimated)
            for view, ratio in sorted((measurement.ratios or {}).items())
            if isinstance(ratio, dict)
            and (measured := _stored_figure(ratio.get("measured_bytes"), MAX_BYTES)) is not None
            and (estimated := _stored_figure(ratio.get("estimated_bytes"), MAX_BYTES)) is not None
        ]
        latency = _latency_figures(measurement, estimate_ms_per_output_token)
        records.extend(_records(measurement, figures + latency))
    return records


def _stored_figure(value: Any, limit: float) -> float | None:
    """A stored figure as a float, or None when it is not a number in (0, ``limit``]: a row stored before
    uploads were bounded (``measurements.document``) may hold anything, and one such row must not make every
    recommendation that reads it fail."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= limit:
        return None
    return float(value)


def _latency_figures(
    measurement: Measurement, estimate: Callable[[Measurement], float | None] | None
) -> list[tuple[str, float, float]]:
    timing = (measurement.document or {}).get("timing")
    measured = _stored_figure(timing.get("ms_per_output_token") if isinstance(timing, dict) else None, MAX_MS)
    if estimate is None or measured is None:
        return []
    estimated = estimate(measurement)
    return [(calibration.LATENCY_VIEW, measured, estimated)] if estimated else []


def _records(measurement: Measurement, figures: list[tuple[str, float, float]]) -> list[calibration.CalibrationRecord]:
    figures = [(view, measured, estimated) for view, measured, estimated in figures if estimated > 0]
    if not figures:
        return []
    order = measurement.order
    bounds = acceptance.estimated_bounds(stored_budget(measurement.budget)[0])
    workload = workload_summary(order.workload.description)
    return [
        calibration.CalibrationRecord(
            measurement_id=measurement.pk,
            order_id=order.pk,
            job_id=measurement.job_id,
            configuration=order.configuration.slug,
            architecture=_architecture_slug(order.configuration),
            view=view,
            measured=measured,
            estimated=estimated,
            estimated_low=bounds.get(view, (None, None))[0],
            estimated_high=bounds.get(view, (None, None))[1],
            workload=workload,
            provenance=_provenance(measurement),
        )
        for view, measured, estimated in figures
    ]


def _provenance(measurement: Measurement) -> str:
    """Where a measurement came from, as calibration names it: an upload nobody reviewed is its owner's own."""
    kind = measurement.provenance
    return calibration.OWN_UPLOAD if kind == "upload" else kind


#: What the admin and the API call each provenance (``Measurement.provenance``).
PROVENANCE_LABELS = {
    "node_verified": "node-verified (an acceptance job on a registered node)",
    "reviewed_upload": "upload, reviewed by staff",
    "upload": "upload, reported by its owner (not reviewed)",
}


def review_uploads(queryset: models.QuerySet[Measurement], reviewer: Any, note: str = "") -> int:
    """Mark the unreviewed uploads of ``queryset`` reviewed by ``reviewer``; how many were marked."""
    pending = queryset.filter(source=MeasurementSource.UPLOAD, review__isnull=True)
    reviews = [MeasurementReview(measurement=m, reviewer=reviewer, note=note) for m in pending]
    MeasurementReview.objects.bulk_create(reviews, ignore_conflicts=True)
    return len(reviews)


def trusted_measurements(queryset: models.QuerySet[Measurement]) -> models.QuerySet[Measurement]:
    """The measurements that may calibrate for someone other than their owner: acceptance jobs' runs on registered
    nodes, and uploads staff have reviewed (``MeasurementReview``)."""
    return queryset.filter(Q(source=MeasurementSource.JOB) | Q(review__isnull=False))


def _architecture_slug(configuration: Configuration) -> str:
    if configuration.accelerator is None:
        return f"cpu:{configuration.host_cpu_architecture}"
    return configuration.accelerator.architecture.slug


def workload_summary(description: dict[str, Any]) -> calibration.WorkloadSummary:
    """What makes two stored workloads similar (``calibration.similar_workload``), from a description."""
    spec = workload_validate(description)
    precision = spec.precision.weights
    if spec.task == "custom":
        assert spec.custom is not None
        name = _digest(description.get("custom"))
        return calibration.WorkloadSummary(name, "custom", "custom", precision, spec.custom.concurrency, 0)
    assert spec.model is not None
    model = spec.model.preset or _digest(description.get("model"))
    if spec.task == "training":
        t = spec.training
        assert t is not None
        return calibration.WorkloadSummary(model, "training", "transformers", precision, t.micro_batch_size,
                                           t.sequence_length)  # fmt: skip
    i = spec.inference
    assert i is not None
    return calibration.WorkloadSummary(model, "inference", i.engine, precision, i.concurrent_sessions,
                                       i.max_request_tokens)  # fmt: skip


def _digest(value: Any) -> str:
    """A short, stable name for a given model (an hf_config or architecture): its canonical JSON's hash."""
    return "sha256:" + hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]
