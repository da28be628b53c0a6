"""Budget services: validate a description once, estimate it, store it. Views, admin and commands call these.

``manage.py estimate`` and ``POST /api/v1/estimate`` both go ``workload_validate`` → ``budget_compute`` (the 1 EiB
guard); a budget stored as JSON is read back through ``budgets.engine.budget.read_budget``."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from .engine import Budget, estimate
from .engine import Workload as WorkloadSpec
from .engine.device import NO_DEVICE, Device
from .models import Workload

MAX_BUDGET_BYTES = 2**60  # 1 EiB per device or host: beyond any machine, and beyond 64-bit columns' comfort


class BudgetOutOfRange(ValueError):
    """A valid description whose budget no machine could hold (a typo in a size, most often)."""


def workload_validate(data: Any) -> WorkloadSpec:
    """The edge: raw JSON → typed workload (raises pydantic.ValidationError naming each bad field)."""
    return WorkloadSpec.model_validate(data)


def budget_compute(spec: WorkloadSpec, device: Device = NO_DEVICE) -> Budget:
    """The engine's budget for a validated workload, refused past 1 EiB (every caller goes through here).

    ``device.memory_bytes`` (usable memory of one device) lets a vLLM workload size its KV pool and report the
    concurrency it holds (the budget's ``serving`` block); ``device.name`` picks vLLM's defaults for the GPU
    class (an A100 gets the small-GPU scheduler defaults); ``device.compute_capability`` (the catalog's) decides
    the architecture-dependent terms.
    Raises BudgetOutOfRange, naming the largest component, when any figure passes 1 EiB.
    """
    budget = estimate(spec, device.memory_bytes, device.name, device.compute_capability)
    per_device = budget.per_device
    figures = [per_device.total_high_bytes, budget.host.ram_bytes, budget.host.disk_bytes]
    if max(figures) > MAX_BUDGET_BYTES:
        largest = max(per_device.components, key=lambda c: c.high)
        raise BudgetOutOfRange(
            f"the budget passes 1 EiB per device (largest component: {largest.name}, {largest.high:.3e} bytes); "
            "check the sizes, token counts and concurrency"
        )
    return budget


def budget_estimate(spec: WorkloadSpec, device: Device = NO_DEVICE) -> dict[str, Any]:
    """The budget object of the contract for a validated workload (see :func:`budget_compute`)."""
    return budget_compute(spec, device).as_contract()


def configuration_device(slug: str) -> Device:
    """Usable memory per device of catalog configuration ``slug`` (the accelerator's usable figure where
    a source or node verified it, else its marketed size; host RAM for a CPU configuration).

    Returns the Device: its usable bytes, the accelerator's name and compute capability (None for a CPU
    configuration). Raises LookupError naming the configuration when there is none by that slug.
    """
    from catalog.models import Configuration

    row = (
        Configuration.objects.with_memory()
        .filter(slug=slug)
        .values(
            "usable_memory_bytes",
            "accelerator__name",
            "accelerator__architecture__compute_capability_major",
            "accelerator__architecture__compute_capability_minor",
        )
        .first()
    )
    if row is None or not row["usable_memory_bytes"]:
        raise LookupError(f"no catalog configuration {slug!r}; list them at /api/v1/configurations/")
    major = row["accelerator__architecture__compute_capability_major"]
    minor = row["accelerator__architecture__compute_capability_minor"]
    cc = (major, minor) if major is not None and minor is not None else None
    return Device(int(row["usable_memory_bytes"]), row["accelerator__name"], cc)


def _model_label(spec: WorkloadSpec) -> str:
    if spec.model is None:
        return "custom"
    if spec.model.preset:
        return spec.model.preset
    if spec.model.hf_config:
        return str(spec.model.hf_config.get("model_type", "hf_config"))
    return "architecture"


@transaction.atomic
def workload_create(*, owner, data: Any) -> Workload:
    spec = workload_validate(data)
    budget = budget_compute(spec)
    return Workload.objects.create(
        owner=owner,
        name=spec.name,
        task=spec.task,
        model_label=_model_label(spec),
        description=spec.model_dump(mode="json", exclude_none=False),
        budget=budget.as_contract(),
        peak_bytes=budget.per_device.total_bytes,
        device_count=budget.devices,
        estimated_at=timezone.now(),
    )


@transaction.atomic
def workload_reestimate(workload: Workload) -> Workload:
    """Recompute the stored budget (after the engine or the presets changed)."""
    spec = workload_validate(workload.description)
    budget = budget_compute(spec)
    workload.budget = budget.as_contract()
    workload.peak_bytes = budget.per_device.total_bytes
    workload.device_count = budget.devices
    workload.estimated_at = timezone.now()
    workload.save(update_fields=["budget", "peak_bytes", "device_count", "estimated_at", "updated_at"])
    return workload
