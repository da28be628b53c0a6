"""The two state machines, each written through one function that checks its table (``acceptance.ORDER_TRANSITIONS``,
``acceptance.JOB_TRANSITIONS``): an order's status and an acceptance job's."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from . import acceptance
from .errors import ServiceError
from .models import AcceptanceJob, Order


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


def job_transition(job: AcceptanceJob, new_status: str) -> None:
    """Set a job's status (the caller saves the row, with its other fields) if the job table allows it."""
    try:
        acceptance.check_job_transition(job.status, new_status)
    except acceptance.TransitionError as exc:
        raise ServiceError(str(exc), field="status", conflict=True) from None
    job.status = new_status


def job_end(job: AcceptanceJob, status: str, failure_kind: str, error: str, now: datetime) -> None:
    """End a job: a final status with its failure kind and text."""
    job_transition(job, status)
    job.failure_kind = failure_kind
    job.error = error[:20_000]
    job.finished_at = now
    job.save(update_fields=["status", "failure_kind", "error", "finished_at"])
