"""Order, acceptance-job, measurement and program shapes. Writes go through ``measurements.services``."""

from __future__ import annotations

import logging
from typing import Any

from rest_framework import serializers

from budgets.engine.budget import read_stored_budget
from budgets.models import Workload
from catalog.api.serializers import NullableObjectField
from catalog.models import Configuration

from ..choices import FailureKind
from ..models import AcceptanceJob, Measurement, Order, RegisteredProgram
from ..services import PROVENANCE_LABELS, order_need_bytes

logger = logging.getLogger(__name__)


class MeasurementSerializer(serializers.ModelSerializer):
    node = serializers.CharField(source="node.name", allow_null=True, read_only=True, default=None)
    peaks = serializers.SerializerMethodField(help_text="Peak bytes per view (null when the view could not be read).")
    reasons = serializers.SerializerMethodField(help_text="Why each null view could not be read.")
    provenance = serializers.ChoiceField(
        choices=sorted(PROVENANCE_LABELS),
        read_only=True,
        help_text="node_verified: an acceptance job's run on a registered node; upload: reported by the order's "
        "owner (calibrates only the owner's own recommendations); reviewed_upload: an upload staff have reviewed.",
    )

    class Meta:
        model = Measurement
        fields = ["id", "order", "job", "source", "provenance", "node", "outcome", "peaks", "reasons", "ratios",
                  "document", "created_at"]  # fmt: skip
        read_only_fields = fields

    def get_peaks(self, obj: Measurement) -> dict[str, int | None]:
        return obj.peaks

    def get_reasons(self, obj: Measurement) -> dict[str, str]:
        return dict(((obj.document or {}).get("peaks") or {}).get("reasons") or {})


class ProgressSerializer(serializers.Serializer):
    phase = serializers.CharField()
    percent = serializers.FloatField()


class FailureKindField(serializers.ChoiceField):
    """The failure kind, or null while the job has not failed (stored as an empty string)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(choices=FailureKind.choices, allow_null=True, read_only=True, **kwargs)

    def to_representation(self, value: str) -> str | None:  # type: ignore[override]  # null while not failed
        return value or None


class AcceptanceJobSerializer(serializers.ModelSerializer):
    program: serializers.SlugRelatedField[RegisteredProgram] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True
    )
    failure_kind = FailureKindField()
    node = serializers.CharField(source="node.name", allow_null=True, read_only=True, default=None)
    progress = serializers.SerializerMethodField()
    measurement = serializers.SerializerMethodField()

    class Meta:
        model = AcceptanceJob
        fields = ["id", "order", "program", "expandable_segments", "status", "failure_kind", "error", "attempt",
                  "max_attempts", "time_limit_seconds", "progress", "node", "cancel_requested", "queued_at",
                  "started_at", "heartbeat_at", "finished_at", "measurement"]  # fmt: skip
        read_only_fields = fields

    def get_progress(self, obj: AcceptanceJob) -> dict[str, Any]:
        return {"phase": obj.progress_phase, "percent": obj.progress_percent}

    def get_measurement(self, obj: AcceptanceJob) -> dict[str, Any] | None:
        measurement = getattr(obj, "measurement", None)
        return MeasurementSerializer(measurement).data if measurement is not None else None


class AcceptanceJobStartSerializer(serializers.Serializer):
    program = serializers.SlugRelatedField(
        slug_field="slug",
        queryset=RegisteredProgram.objects.all(),
        required=False,
        allow_null=True,
        help_text="A registered program's slug; omit for the built-in run: the synthetic workload, or for a custom"
        " workload the replay of its declared components.",
    )
    expandable_segments = serializers.BooleanField(
        default=False, help_text="Run again with PYTORCH_ALLOC_CONF=expandable_segments:True (fragmentation)."
    )


class OrderSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username", read_only=True)
    workload = serializers.PrimaryKeyRelatedField(queryset=Workload.objects.none())
    configuration = serializers.SlugRelatedField(slug_field="slug", queryset=Configuration.objects.all())
    budget_peak_bytes = serializers.SerializerMethodField(
        help_text="What the engine holds per device (`budget.per_device.total.bytes`: for vLLM its whole preallocated "
        "pool), bytes; null when the stored `budget` does not read as the contract's budget object."
    )
    need_bytes = serializers.SerializerMethodField(
        help_text="What the workload needs per device, bytes: for vLLM its share of the pool it fills "
        "(`budget.serving.need_bytes`), otherwise the budget's peak; null when the stored budget does not read."
    )
    acceptance = serializers.SerializerMethodField()
    decision = NullableObjectField(read_only=True, allow_null=True, help_text="The sentence and its numbers.")
    override_reason = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=2000,
        help_text="Required to order a configuration the recommender judges `unsupported` for the workload: why.",
    )

    class Meta:
        model = Order
        fields = ["id", "owner", "workload", "configuration", "status", "budget_peak_bytes", "need_bytes", "acceptance",
                  "decision",
                  "decided_at", "recommended_verdict", "recommended_reasons", "override_reason", "budget",
                  "created_at", "updated_at"]  # fmt: skip
        read_only_fields = ["id", "owner", "status", "budget_peak_bytes", "need_bytes", "acceptance", "decision",
                            "decided_at",
                            "recommended_verdict", "recommended_reasons", "budget", "created_at",
                            "updated_at"]  # fmt: skip

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        request = self.context.get("request")
        if request is not None and request.user.is_authenticated:
            self.fields["workload"].queryset = Workload.objects.visible_to(request.user)  # type: ignore[attr-defined]

    def get_need_bytes(self, obj: Order) -> int | None:
        return order_need_bytes(obj)

    def get_budget_peak_bytes(self, obj: Order) -> int | None:
        stored = read_stored_budget(obj.budget)
        if stored.error is not None:
            logger.warning("order %s: unreadable stored budget: %s", obj.pk, stored.error)
        return stored.budget.per_device.total_bytes if stored.budget is not None else None

    def get_acceptance(self, obj: Order) -> dict[str, float | None]:
        return {
            "min_headroom_fraction": obj.min_headroom_fraction,
            "max_ms_per_output_token": obj.max_ms_per_output_token,
        }


class UploadTokenSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="Shown once. Send as `Authorization: Upload <token>`.")
    order = serializers.IntegerField()


class RegisteredProgramSerializer(serializers.ModelSerializer):
    allowed_configurations = serializers.SlugRelatedField(
        slug_field="slug", queryset=Configuration.objects.all(), many=True, required=False
    )
    argv_template = serializers.ListField(child=serializers.CharField(max_length=1024), min_length=1, max_length=128)
    time_limit_seconds = serializers.IntegerField(min_value=1, max_value=7 * 86_400, required=False)

    class Meta:
        model = RegisteredProgram
        fields = ["id", "slug", "name", "description", "argv_template", "allowed_configurations",
                  "time_limit_seconds", "enabled", "created_at"]  # fmt: skip
        read_only_fields = ["id", "created_at"]

    def validate_argv_template(self, value: list[str]) -> list[str]:
        from ..services import ServiceError, program_validate_template

        try:
            return program_validate_template(value)
        except ServiceError as exc:
            raise serializers.ValidationError(str(exc)) from None
