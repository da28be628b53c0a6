"""Orders: placing one with its budget and the recommender's verdict, its status, and its upload token."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any

from django.db import transaction
from django.utils import timezone

from budgets.models import Workload
from budgets.services import budget_estimate, configuration_device, workload_validate
from catalog.models import Configuration

from .choices import JobStatus, OrderStatus
from .errors import ServiceError
from .evidence import stored_budget
from .jobs import acceptance_job_cancel
from .models import Order
from .states import order_transition


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
