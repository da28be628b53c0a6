"""Budget API shapes. The workload body and the budget answer are the engine's pydantic models (each defined once:
``budgets.engine.Workload`` and ``budgets.engine.document.BudgetDocument``); these serializers render stored workloads
and the model presets."""

from __future__ import annotations

from rest_framework import serializers

from ..models import Workload


class WorkloadSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username", read_only=True)

    class Meta:
        model = Workload
        fields = [
            "id",
            "name",
            "owner",
            "task",
            "model_label",
            "description",
            "peak_bytes",
            "device_count",
            "estimated_at",
            "created_at",
        ]
        read_only_fields = fields


class ModelPresetSerializer(serializers.Serializer):
    id = serializers.CharField()
    display_name = serializers.CharField()
    model_type = serializers.CharField()
    parameter_count = serializers.IntegerField()
    hf_repo = serializers.CharField(allow_blank=True)
    source = serializers.CharField(allow_blank=True)  # type: ignore[assignment]  # a declared field, not Field.source
    config_verbatim_status = serializers.CharField(allow_blank=True)
