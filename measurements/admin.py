"""Orders with their acceptance jobs and measurements, read-only; each measurement's timeline as an SVG chart."""

from __future__ import annotations

import json

from django import forms
from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from budgets.admin import unreadable_budget
from budgets.engine.budget import read_stored_budget
from catalog.units import format_bytes

from .chart import timeline_svg
from .models import AcceptanceJob, Measurement, Order, RegisteredProgram
from .services import (
    PROVENANCE_LABELS,
    ServiceError,
    node_usable_memory_bytes,
    order_need_bytes,
    program_validate_template,
    review_uploads,
)


def _size(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "—"
    return format_bytes(int(value))


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows written by services (API, workers) only: the admin shows them."""

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class JobInline(ReadOnlyInline):
    model = AcceptanceJob
    fields = readonly_fields = ("status", "failure_kind", "attempt", "progress_phase", "progress_percent", "node",
                                "queued_at", "finished_at")  # fmt: skip


class MeasurementInline(ReadOnlyInline):
    model = Measurement
    fields = readonly_fields = ("outcome", "source", "job", "device_used", "framework_allocated", "host_rss",
                                "created_at")  # fmt: skip

    @admin.display(description="device used")
    def device_used(self, obj: Measurement) -> str:
        return _size(obj.device_used_peak_bytes)

    @admin.display(description="framework allocated")
    def framework_allocated(self, obj: Measurement) -> str:
        return _size(obj.framework_allocated_peak_bytes)

    @admin.display(description="host RSS")
    def host_rss(self, obj: Measurement) -> str:
        return _size(obj.host_rss_peak_bytes)


@admin.register(Order)
class OrderAdmin(ReadOnlyAdmin):
    list_display = ["id", "owner", "workload", "configuration", "recommended_verdict", "status", "budget_peak",
                    "decided_at", "created_at"]  # fmt: skip
    list_filter = ["status", "recommended_verdict", "configuration__kind"]
    search_fields = ["workload__name", "owner__username", "configuration__slug"]
    list_select_related = ["owner", "workload", "configuration"]
    fields = readonly_fields = (
        "owner", "workload", "configuration", "recommended_verdict", "recommended_reasons", "override_reason",
        "status", "need", "budget_peak", "min_headroom_fraction", "max_ms_per_output_token", "decision_sentence",
        "decision_numbers", "decided_at", "created_at",
    )  # fmt: skip
    inlines = [JobInline, MeasurementInline]

    @admin.display(description="the workload needs per device")
    def need(self, obj: Order) -> str:
        return _size(order_need_bytes(obj))

    @admin.display(description="the engine reserves per device")
    def budget_peak(self, obj: Order) -> SafeString | str:
        stored = read_stored_budget(obj.budget)
        if stored.error is not None:
            return unreadable_budget(stored)
        return _size(stored.budget.per_device.total_bytes if stored.budget is not None else None)

    @admin.display(description="decision")
    def decision_sentence(self, obj: Order) -> str:
        return (obj.decision or {}).get("sentence", "—")

    @admin.display(description="decision numbers")
    def decision_numbers(self, obj: Order) -> SafeString | str:
        if not obj.decision:
            return "—"
        return format_html("<pre>{}</pre>", json.dumps(obj.decision, indent=2))


@admin.register(AcceptanceJob)
class AcceptanceJobAdmin(ReadOnlyAdmin):
    list_display = ["id", "order", "status", "failure_kind", "attempt", "progress_phase", "progress_percent", "node",
                    "queued_at", "finished_at"]  # fmt: skip
    list_filter = ["status", "failure_kind"]
    list_select_related = ["order__workload", "order__configuration", "node"]
    readonly_fields = fields = ("order", "program", "status", "failure_kind", "error", "attempt", "max_attempts",
                                "progress_phase", "progress_percent", "node", "cancel_requested", "queued_at",
                                "dispatched_at", "started_at", "heartbeat_at", "finished_at")  # fmt: skip


@admin.register(Measurement)
class MeasurementAdmin(ReadOnlyAdmin):
    list_display = ["id", "order", "outcome", "provenance_label", "device_used", "framework_allocated", "host_rss",
                    "created_at"]  # fmt: skip
    list_filter = ["outcome", "source", ("review", admin.EmptyFieldListFilter)]
    list_select_related = ["order__workload", "order__configuration", "review"]
    fields = readonly_fields = ("order", "job", "source", "provenance_label", "node", "outcome", "timeline_chart",
                                "peaks_table", "ratios_table", "pretty_document", "created_at")  # fmt: skip
    actions = ["mark_reviewed"]

    @admin.display(description="provenance")
    def provenance_label(self, obj: Measurement) -> str:
        return PROVENANCE_LABELS[obj.provenance]

    def has_review_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("measurements.add_measurementreview")

    @admin.action(description="Mark the selected uploads reviewed (they then calibrate for every viewer)",
                  permissions=["review"])  # fmt: skip
    def mark_reviewed(self, request: HttpRequest, queryset) -> None:
        reviewed = review_uploads(queryset, request.user)
        self.message_user(request, f"{reviewed} upload{'s' if reviewed != 1 else ''} marked reviewed.")

    @admin.display(description="device used", ordering="device_used_peak_bytes")
    def device_used(self, obj: Measurement) -> str:
        return _size(obj.device_used_peak_bytes)

    @admin.display(description="framework allocated", ordering="framework_allocated_peak_bytes")
    def framework_allocated(self, obj: Measurement) -> str:
        return _size(obj.framework_allocated_peak_bytes)

    @admin.display(description="host RSS", ordering="host_rss_peak_bytes")
    def host_rss(self, obj: Measurement) -> str:
        return _size(obj.host_rss_peak_bytes)

    @admin.display(description="memory timeline")
    def timeline_chart(self, obj: Measurement) -> SafeString:
        stored = read_stored_budget(obj.budget)  # the budget line; none when there is none or it does not read
        usable = node_usable_memory_bytes(obj.node, obj.order.configuration)
        svg = mark_safe(  # measurements.chart escapes every text it writes
            timeline_svg(
                (obj.document or {}).get("timeline") or [],
                # a cpu budget is framework tensors only: not a line to read host RSS against
                budget_bytes=stored.budget.per_device.total_bytes
                if stored.budget is not None and stored.budget.device == "cuda"
                else None,
                usable_bytes=usable,
                title=f"measurement {obj.pk}: {obj.outcome}",
            )
        )
        if stored.error is not None:
            return format_html("<div>{} (no budget line drawn)</div>{}", unreadable_budget(stored), svg)
        return svg

    @admin.display(description="peaks by view")
    def peaks_table(self, obj: Measurement) -> SafeString:
        reasons = ((obj.document or {}).get("peaks") or {}).get("reasons") or {}
        rows = "".join(
            format_html(
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                view,
                _size(value),
                "" if value is not None else reasons.get(f"{view}_bytes", ""),
            )
            for view, value in obj.peaks.items()
        )
        # every cell went through format_html above
        return mark_safe(f"<table><tr><th>view</th><th>peak</th><th>why null</th></tr>{rows}</table>")

    @admin.display(description="measured / estimated")
    def ratios_table(self, obj: Measurement) -> SafeString | str:
        if not obj.ratios:
            return "—"
        # format_html escapes its arguments into strings first, so the number is formatted here (a "{:.3f}" in the
        # template raised ValueError, which the admin showed as "-")
        rows = "".join(
            format_html(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                view,
                _size(r.get("measured_bytes")),
                _size(r.get("estimated_bytes")),
                _ratio(r.get("ratio")),
                r.get("basis", ""),
            )
            for view, r in obj.ratios.items()
            if isinstance(r, dict)
        )
        head = "<tr><th>view</th><th>measured</th><th>estimated</th><th>ratio</th><th>budget figure</th></tr>"
        return mark_safe(f"<table>{head}{rows}</table>")

    @admin.display(description="document")
    def pretty_document(self, obj: Measurement) -> SafeString:
        shown = {k: v for k, v in (obj.document or {}).items() if k != "timeline"}
        return format_html("<pre>{}</pre>", json.dumps(shown, indent=2))


def _ratio(value: object) -> str:
    """measured / estimated to three decimals; a stored value that is not a number shows as "—"."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "—"
    return f"{value:.3f}"


class RegisteredProgramForm(forms.ModelForm):
    class Meta:
        model = RegisteredProgram
        fields = ["slug", "name", "description", "argv_template", "allowed_configurations",
                  "time_limit_seconds", "enabled"]  # fmt: skip

    def clean_argv_template(self) -> list[str]:
        try:
            return program_validate_template(self.cleaned_data.get("argv_template"))
        except ServiceError as exc:
            raise forms.ValidationError(str(exc)) from None


@admin.register(RegisteredProgram)
class RegisteredProgramAdmin(admin.ModelAdmin):
    form = RegisteredProgramForm
    list_display = ["slug", "name", "enabled", "time_limit_seconds"]
    filter_horizontal = ["allowed_configurations"]
    search_fields = ["slug", "name"]
