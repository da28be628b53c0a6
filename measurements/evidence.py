"""Evidence: measurements stored once per run, the order decisions they make, and the calibration records they give
(with their provenance: node-verified, reviewed upload, or an owner's own upload)."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from django.db import IntegrityError, models, transaction
from django.db.models import Q
from django.utils import timezone

from budgets.engine import Workload as WorkloadSpec
from budgets.engine.budget import Budget, read_stored_budget
from budgets.services import workload_validate
from catalog.models import Configuration, Node

from . import acceptance, calibration
from .choices import MeasurementSource, OrderStatus
from .document import MAX_BYTES, MAX_MS, MeasurementDocument
from .models import AcceptanceJob, Measurement, MeasurementReview, Order
from .nodes import node_usable_memory_bytes

logger = logging.getLogger(__name__)


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
    stored, sessions, longest = _compared_with(order, job)
    budget, _ = stored_budget(stored)
    view, need, _ = acceptance.engine_need(parsed.program_report, sessions, longest)
    judged = peaks | ({view: need} if view is not None and need is not None else {})
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
                budget=stored,
                ratios=acceptance.view_ratios(judged, budget, _engine(order)),
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
    peaks: dict[str, int | None] = dict(measurement.peaks)
    stored, sessions, longest = _compared_with(order, measurement.job)
    view, need, why = acceptance.engine_need(document.program_report, sessions, longest)
    if view is not None and need is not None:
        peaks[view] = need
    node = measurement.node
    budget, unreadable = stored_budget(stored)
    host_only = order.configuration.kind == "cpu" or (node is not None and node.device_count == 0)
    decision = acceptance.decide(
        outcome=document.outcome,
        peaks=peaks,
        host_only=host_only,
        usable_memory_bytes=_usable_memory_bytes(node, order, document, host_only),
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
            record[f"{view}_unavailable"] = why
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


def _usable_memory_bytes(node: Node | None, order: Order, document: MeasurementDocument, host_only: bool) -> int | None:
    """What the run is judged against: its node's reading, else, for a run without a GPU (an upload: no node), the RAM
    of the machine it ran on as the run reports it (``conditions.host_ram_bytes``), not the catalog's figure for the
    configuration; else the catalog's (``node_usable_memory_bytes``)."""
    if node is None and host_only:
        reported = (document.conditions or {}).get("host_ram_bytes")
        if isinstance(reported, int) and not isinstance(reported, bool) and 0 < reported <= MAX_BYTES:
            return reported
    return node_usable_memory_bytes(node, order.configuration)


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


def _compared_with(order: Order, job: AcceptanceJob | None) -> tuple[Any, int, int]:
    """What a run is compared with: the stored budget, the sessions one server holds at once and the longest request
    (inference). A job that ran the recommended launch (``AcceptanceJob.launch``) is compared with that plan's budget
    and one replica's share of the sessions, as the recommender budgeted it; any other run with the order's budget
    and the workload's sessions."""
    inference = (order.workload.description or {}).get("inference") or {}
    longest = int(inference.get("max_input_tokens") or 0) + int(inference.get("max_output_tokens") or 0)
    recorded = job.launch if job is not None and isinstance(job.launch, dict) else {}
    if recorded.get("launch") and recorded.get("budget") is not None:
        return recorded["budget"], int(recorded.get("sessions_per_replica") or 1), longest
    return order.budget, int(inference.get("concurrent_sessions") or 1), longest


def _engine(order: Order) -> str:
    """The workload's serving engine ("vllm" where it names none): it names the need view its budget predicts."""
    inference = (order.workload.description or {}).get("inference") or {}
    return str(inference.get("engine") or "vllm")


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
    return summary_of(workload_validate(description), description)


def summary_of(spec: WorkloadSpec, description: dict[str, Any]) -> calibration.WorkloadSummary:
    """``workload_summary`` of a workload already validated (``spec``) from ``description``."""
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
        return calibration.WorkloadSummary(model, "training", t.framework, precision, t.micro_batch_size,
                                           t.sequence_length)  # fmt: skip
    i = spec.inference
    assert i is not None
    return calibration.WorkloadSummary(model, "inference", i.engine, precision, i.concurrent_sessions,
                                       i.max_request_tokens)  # fmt: skip


def _digest(value: Any) -> str:
    """A short, stable name for a given model (an hf_config or architecture): its canonical JSON's hash."""
    return "sha256:" + hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]
