"""Budget services: validate a description once, estimate it, store it. Views, admin and commands call these."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from .engine import Workload as WorkloadSpec
from .engine import estimate
from .models import Workload

MAX_BUDGET_BYTES = 2**60  # 1 EiB per device or host: beyond any machine, and beyond 64-bit columns' comfort


class BudgetOutOfRange(ValueError):
    """A valid description whose budget no machine could hold (a typo in a size, most often)."""


def workload_validate(data: Any) -> WorkloadSpec:
    """The edge: raw JSON → typed workload (raises pydantic.ValidationError naming each bad field)."""
    return WorkloadSpec.model_validate(data)


def budget_estimate(spec: WorkloadSpec) -> dict[str, Any]:
    """The budget object of the contract for a validated workload.

    Raises BudgetOutOfRange, naming the largest component, when any figure passes 1 EiB.
    """
    budget = estimate(spec).as_contract()
    per_device = budget["per_device"]
    figures = [per_device["total"]["high"], budget["host"]["ram_bytes"], budget["host"]["disk_bytes"]]
    if max(figures) > MAX_BUDGET_BYTES:
        name, component = max(per_device["components"].items(), key=lambda item: item[1]["high"])
        raise BudgetOutOfRange(
            f"the budget passes 1 EiB per device (largest component: {name}, {component['high']:.3e} bytes); "
            "check the sizes, token counts and concurrency"
        )
    return budget


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
