"""Budget services: validate a description once, estimate it, store it. Views, admin and commands call these."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from .engine import Workload as WorkloadSpec
from .engine import estimate
from .models import Workload


def workload_validate(data: Any) -> WorkloadSpec:
    """The edge: raw JSON → typed workload (raises pydantic.ValidationError naming each bad field)."""
    return WorkloadSpec.model_validate(data)


def budget_estimate(spec: WorkloadSpec) -> dict[str, Any]:
    """The budget object of the contract for a validated workload."""
    return estimate(spec).as_contract()


def _model_label(spec: WorkloadSpec) -> str:
    if spec.model is None:
        return "custom"
    if spec.model.preset:
        return spec.model.preset
    if spec.model.hf_config:
        return str(spec.model.hf_config.get("model_type", "hf_config"))
    return "architecture"


@transaction.atomic
def workload_create(*, owner, data: Any) -> Workload:  # type: ignore[no-untyped-def]
    spec = workload_validate(data)
    budget = budget_estimate(spec)
    return Workload.objects.create(
        owner=owner,
        name=spec.name,
        task=spec.task,
        model_label=_model_label(spec),
        description=spec.model_dump(mode="json", exclude_none=False),
        budget=budget,
        peak_bytes=budget["per_device"]["total"]["bytes"],
        device_count=budget["devices"],
        estimated_at=timezone.now(),
    )


@transaction.atomic
def workload_reestimate(workload: Workload) -> Workload:
    """Recompute the stored budget (after the engine or the presets changed)."""
    spec = workload_validate(workload.description)
    budget = budget_estimate(spec)
    workload.budget = budget
    workload.peak_bytes = budget["per_device"]["total"]["bytes"]
    workload.device_count = budget["devices"]
    workload.estimated_at = timezone.now()
    workload.save(update_fields=["budget", "peak_bytes", "device_count", "estimated_at", "updated_at"])
    return workload
