"""Workloads in the admin: the stored description, the budget as a table and a stacked bar, and the
workload's recommendations (``recommendations.admin_views``)."""

from __future__ import annotations

import json

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from pydantic import ValidationError

from catalog.units import format_bytes
from recommendations.admin_views import workload_recommendations

from . import services
from .engine import validation_errors
from .engine.budget import StoredBudget, read_stored_budget
from .models import Workload

COMPONENT_COLOURS = {
    "weights": "#4e79a7",
    "activations": "#f28e2b",
    "kv_cache": "#e15759",
    "gradients": "#76b7b2",
    "optimizer_state": "#59a14f",
    "workspace": "#edc948",
    "runtime": "#b07aa1",
    "fragmentation": "#9c755f",
}


def unreadable_budget(stored: StoredBudget) -> SafeString:
    """A stored budget that does not read, said so in red with the field it stopped at (escaped); the admin
    pages of workloads, orders and measurements all show it so."""
    return format_html('<span class="unreadable-budget" style="color:#ba2121">{}</span>', stored.message)


@admin.register(Workload)
class WorkloadAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "task", "model_label", "peak", "device_count", "estimated_at"]
    list_filter = ["task", "model_label"]
    search_fields = ["name", "model_label", "owner__username"]
    list_select_related = ["owner"]
    readonly_fields = ["budget_bar", "budget_table", "assumptions", "recommendations", "pretty_description",
                       "estimated_at"]  # fmt: skip
    fieldsets = [
        (None, {"fields": ["name", "owner", "task", "model_label"]}),
        ("Budget", {"fields": ["budget_bar", "budget_table", "assumptions"]}),
        ("Recommendations", {"fields": ["recommendations"]}),
        ("Description", {"fields": ["pretty_description", "estimated_at"]}),
    ]
    actions = ["reestimate"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # workloads come through the API, validated by the engine

    def get_readonly_fields(self, request, obj=None):
        # The name is part of the stored description and its budget: edit through the API, not here.
        return [*self.readonly_fields, "name", "owner", "task", "model_label"]

    @admin.display(description="peak per device", ordering="peak_bytes")
    def peak(self, obj: Workload) -> str:
        return format_bytes(obj.peak_bytes) if obj.peak_bytes is not None else "—"

    @admin.display(description="budget per device")
    def budget_bar(self, obj: Workload) -> SafeString | str:
        stored = read_stored_budget(obj.budget)
        if stored.budget is None:
            return unreadable_budget(stored) if stored.error is not None else "—"
        per_device = stored.budget.per_device
        shown = [c for c in per_device.components if c.bytes > 0]
        total = sum(c.bytes for c in per_device.components) or 1
        segments = format_html_join(
            "",
            '<div title="{}: {}" style="width:{}%;background:{};height:100%;float:left"></div>',
            (
                (c.name, format_bytes(c.bytes), f"{100 * c.bytes / total:.3f}", COMPONENT_COLOURS.get(c.name, "#999"))
                for c in shown
            ),
        )
        legend = format_html_join(
            " ",
            '<span style="white-space:nowrap"><span style="display:inline-block;width:.8em;height:.8em;'
            'background:{}"></span> {}</span>',
            ((COMPONENT_COLOURS.get(c.name, "#999"), c.name) for c in shown),
        )
        return format_html(
            '<div style="width:40em;height:1.6em;border:1px solid #888">{}</div><div>{}</div>'
            "<div>Peak {} set by phase <b>{}</b> (the stacked bar shows each component's own peak).</div>",
            segments,
            legend,
            self.peak(obj),
            per_device.peak_phase or "—",
        )

    @admin.display(description="components")
    def budget_table(self, obj: Workload) -> SafeString | str:
        stored = read_stored_budget(obj.budget)
        if stored.budget is None:
            return unreadable_budget(stored) if stored.error is not None else "—"
        per_device = stored.budget.per_device
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (c.name, format_bytes(c.bytes), format_bytes(c.low), format_bytes(c.high), c.note)
                for c in per_device.components
            ),
        )
        return format_html(
            "<table><thead><tr><th>component</th><th>expected</th><th>low</th><th>high</th><th>note</th></tr>"
            "</thead><tbody>{}<tr><th>peak</th><th>{}</th><th>{}</th><th>{}</th><th></th></tr></tbody></table>",
            rows,
            format_bytes(per_device.total_bytes),
            format_bytes(per_device.total_low_bytes),
            format_bytes(per_device.total_high_bytes),
        )

    @admin.display(description="assumptions")
    def assumptions(self, obj: Workload) -> SafeString | str:
        stored = read_stored_budget(obj.budget)
        if stored.budget is None:
            return unreadable_budget(stored) if stored.error is not None else "—"
        items = stored.budget.assumptions
        return format_html("<ul>{}</ul>", format_html_join("", "<li>{}</li>", ((a,) for a in items))) if items else "—"

    @admin.display(description="ranked configurations")
    def recommendations(self, obj: Workload) -> SafeString:
        return workload_recommendations(obj, COMPONENT_COLOURS)

    @admin.display(description="description (JSON)")
    def pretty_description(self, obj: Workload) -> SafeString:
        return format_html("<pre>{}</pre>", json.dumps(obj.description, indent=2))

    @admin.action(description="Re-estimate the selected workloads")
    def reestimate(self, request: HttpRequest, queryset: QuerySet[Workload]) -> None:
        done = 0
        for workload in queryset:
            try:
                services.workload_reestimate(workload)
            except ValidationError as exc:
                # A description stored under an older schema or preset list: say which, keep going.
                reasons = "; ".join(m for ms in validation_errors(exc).values() for m in ms)
                self.message_user(request, f"{workload}: not re-estimated: {reasons}", messages.ERROR)
            except services.BudgetOutOfRange as exc:
                self.message_user(request, f"{workload}: not re-estimated: {exc}", messages.ERROR)
            else:
                done += 1
        self.message_user(request, f"Re-estimated {done} workload(s).", messages.SUCCESS)
