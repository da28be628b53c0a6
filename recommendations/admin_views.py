"""The recommender in the admin: a workload's recommendations (a read-only section of its change page)
and the calibration page (estimate against measurement per view, with the corrections and spreads).

Both go through ``recommendations.services`` (the path of the API and the command) as staff, who see every
acceptance measurement; the charts come from the pure ``recommendations.charts``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe
from pydantic import ValidationError

from budgets.engine import validation_errors
from budgets.models import Workload
from budgets.services import BudgetOutOfRange, workload_validate
from catalog.units import format_bytes
from measurements.calibration import (
    CORRECTION_BAND,
    LATENCY_VIEW,
    MIN_ORDERS,
    OUTLIER_Z,
    CalibrationRecord,
    build_calibration,
)

from . import services
from .charts import Point, budget_bar_svg, scatter_svg
from .recommend import Entry


def _size(value: int | None) -> str:
    if value is None:
        return "—"
    return format_bytes(value) if value >= 0 else f"−{format_bytes(-value)}"


def _evidence_links(entry: Entry) -> list[dict[str, str | None]]:
    """One row per measurement behind the evidence (a record per view repeats it), with its admin pages."""
    links: dict[int, dict[str, str | None]] = {}
    for item in entry.evidence.measurements:
        links.setdefault(
            item["measurement"],
            {
                "measurement": str(item["measurement"]),
                "measurement_url": reverse("admin:measurements_measurement_change", args=[item["measurement"]]),
                "order_url": reverse("admin:measurements_order_change", args=[item["order"]]),
                "job_url": reverse("admin:measurements_acceptancejob_change", args=[item["job"]])
                if item["job"] is not None
                else None,
                "configuration": item["configuration"],
            },
        )
    return list(links.values())


def _bar(entry: Entry, colours: Mapping[str, str]) -> SafeString | str:
    if entry.budget is None:
        return ""
    components = [(c.name, c.bytes) for c in entry.budget.per_device.components]
    svg = budget_bar_svg(
        components,
        usable_bytes=entry.usable_bytes,
        need_bytes=entry.per_device_bytes,
        margin_bytes=entry.margin.bytes if entry.margin else None,
        colours=colours,
        title=f"{entry.configuration['slug']}: budget per device against usable memory",
    )
    return mark_safe(svg)  # recommendations.charts escapes every text it writes


# the suggested settings a person copies into a launch: vLLM's as its flags (a setting's name with dashes, as
# workers/runner/programs passes them), the training plan's in words
_VLLM_FLAGS = (
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "gpu_memory_utilization",
    "max_model_len",
    "max_num_seqs",
    "max_num_batched_tokens",
)
_WORDS = (
    ("replicas", "{} replicas"),
    ("tensor", "tensor {}"),
    ("pipeline", "pipeline {}"),
    ("data", "data {}"),
    ("zero_stage", "ZeRO-{}"),
    ("activation_checkpointing", "checkpointing {}"),
    ("max_micro_batch_size", "micro-batch ≤ {}"),
)


def _settings(settings: Mapping[str, Any]) -> list[str]:
    """The suggested settings worth a glance in the table (the API has all of them)."""
    lines = [f"--{key.replace('_', '-')} {settings[key]}" for key in _VLLM_FLAGS if settings.get(key) is not None]
    lines += [label.format(settings[key]) for key, label in _WORDS if settings.get(key) is not None]
    cuda = settings.get("cuda_version")
    if isinstance(cuda, Mapping) and cuda.get("value"):
        lines.append(f"CUDA {cuda['value']} (assumed: newest its driver runs)")
    return lines


def _latency(entry: Entry) -> str:
    latency = entry.latency
    if latency is None:
        return "—"
    return (
        f"{latency.ms_per_output_token:.1f} ms/token ({latency.ms_per_output_token_low:.1f}–"
        f"{latency.ms_per_output_token_high:.1f}), {latency.bound}-bound"
    )


def _costs(entry: Entry) -> dict[str, str]:
    """The price per month (730 h) and per million output tokens (inference), and the catalog file the price was
    read from (the "ranked on price" column names the offer); "no price" without one."""
    cost = entry.cost
    if cost is None:
        return {"per_month": "no price", "per_million": "no price", "price_source": ""}
    per_million = cost.usd_per_million_output_tokens
    return {
        "per_month": f"${cost.usd_per_month:,.0f}",
        "per_million": f"${per_million:,.2f}" if per_million is not None else "— (no throughput: per hour only)",
        "price_source": cost.source_url,
    }


def _row(entry: Entry, colours: Mapping[str, str]) -> dict[str, Any]:
    margin = entry.margin
    return {
        "configuration": entry.configuration,
        "configuration_url": reverse("admin:catalog_configuration_change", args=[entry.configuration["id"]]),
        "verdict": entry.verdict.value,
        "plan": entry.plan.label() if entry.plan else "—",
        "need": _size(entry.per_device_bytes),
        "reserved": _size(entry.reserved_bytes),
        "usable": f"{_size(entry.usable_bytes)} ({entry.usable_basis})",
        "headroom": _size(entry.headroom_bytes),
        "margin": f"{_size(margin.bytes)} ({margin.fraction:.1%} of usable)" if margin else "—",
        "margin_set_by": margin.set_by.replace("_", " ") if margin else "",
        "evidence": entry.evidence,
        "evidence_links": _evidence_links(entry),
        "reasons": entry.reasons,
        "bar": _bar(entry, colours),
        "price": entry.price_basis.text,
        **_costs(entry),
        "latency": _latency(entry),
        "settings": _settings(entry.suggested_settings),
        "launch": entry.launch,
    }


def workload_recommendations(workload: Workload, colours: Mapping[str, str]) -> SafeString:
    """The first ``services.DEFAULT_TOP`` recommendations for a stored workload, as an admin section."""
    context: dict[str, Any] = {"top": services.DEFAULT_TOP}
    try:
        entries = services.recommend_for(workload_validate(workload.description), top=services.DEFAULT_TOP)
    except ValidationError as exc:  # a description stored under an older schema or preset list
        context["error"] = "; ".join(m for ms in validation_errors(exc).values() for m in ms)
    except BudgetOutOfRange as exc:
        context["error"] = str(exc)
    else:
        context["rows"] = [_row(entry, colours) for entry in entries]
    return render_to_string("recommendations/admin/workload_recommendations.html", context)


def _point(record: CalibrationRecord) -> Point:
    return Point(
        estimated=record.estimated,
        measured=record.measured,
        label=f"measurement #{record.measurement_id} on {record.configuration}: ratio {record.ratio:.3f}",
        href=reverse("admin:measurements_measurement_change", args=[record.measurement_id]),
    )


def _charts(records: list[CalibrationRecord]) -> list[dict[str, Any]]:
    by_view: dict[str, list[CalibrationRecord]] = defaultdict(list)
    for record in records:
        by_view[record.view].append(record)
    return [
        {
            "view": view,
            "svg": mark_safe(  # recommendations.charts escapes every text it writes
                scatter_svg([_point(r) for r in members], unit="ms" if view == LATENCY_VIEW else "bytes", title=view)
            ),
        }
        for view, members in sorted(by_view.items())
    ]


def calibration_view(request: HttpRequest, site: admin.AdminSite) -> HttpResponse:
    """Every acceptance measurement compared with its budget: a scatter per view and the corrections."""
    records = services.acceptance_records(services.catalog_views(), user=None)
    corrections = [
        {
            "correction": correction,
            "spread": f"±{correction.spread:.1%}",
            "links": [
                (i, reverse("admin:measurements_measurement_change", args=[i])) for i in correction.measurement_ids
            ],
        }
        for correction in build_calibration(records).values()
    ]
    context = {
        **site.each_context(request),
        "title": "Calibration: estimate against measurement",
        "charts": _charts(records),
        "corrections": corrections,
        "measurement_count": len({r.measurement_id for r in records}),
        "min_orders": MIN_ORDERS,
        "outlier_z": OUTLIER_Z,
        "band_low": CORRECTION_BAND[0],
        "band_high": CORRECTION_BAND[1],
    }
    return render(request, "recommendations/admin/calibration.html", context)
