"""Budget API shapes. The workload body itself is the engine's pydantic model (one source of truth);
these serializers describe the answers for the OpenAPI schema and render stored workloads."""

from __future__ import annotations

from rest_framework import serializers

from ..models import Workload


class ComponentSerializer(serializers.Serializer):
    bytes = serializers.IntegerField(help_text="Expected bytes.")
    low = serializers.IntegerField()
    high = serializers.IntegerField()
    note = serializers.CharField()


class ComponentsSerializer(serializers.Serializer):
    weights = ComponentSerializer()
    activations = ComponentSerializer()
    kv_cache = ComponentSerializer()
    gradients = ComponentSerializer()
    optimizer_state = ComponentSerializer()
    workspace = ComponentSerializer()
    runtime = ComponentSerializer()
    fragmentation = ComponentSerializer()


class TotalSerializer(serializers.Serializer):
    bytes = serializers.IntegerField(help_text="Expected per-device peak: the maximum over phases, not a sum.")
    low = serializers.IntegerField()
    high = serializers.IntegerField()


class PerDeviceSerializer(serializers.Serializer):
    components = ComponentsSerializer()
    total = TotalSerializer()
    peak_phase = serializers.CharField(required=False, help_text="The phase that sets the peak.")
    phases = serializers.DictField(child=serializers.IntegerField(), required=False)


class HostSerializer(serializers.Serializer):
    ram_bytes = serializers.IntegerField()
    disk_bytes = serializers.IntegerField()


class BudgetSerializer(serializers.Serializer):
    """The budget object of the v1 contract (WORKLOAD.md)."""

    workload = serializers.CharField()
    device = serializers.ChoiceField(choices=["cuda", "cpu"])
    devices = serializers.IntegerField()
    per_device = PerDeviceSerializer()
    host = HostSerializer()
    assumptions = serializers.ListField(child=serializers.CharField())
    calibration = serializers.JSONField(help_text="Calibration applied to the estimate, or null (none yet).")


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
    source = serializers.CharField(allow_blank=True)
    config_verbatim_status = serializers.CharField(allow_blank=True)
