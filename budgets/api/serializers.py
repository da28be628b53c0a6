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


class ViewsSerializer(serializers.Serializer):
    """What each measurement view would read at the peak: PyTorch's allocated and reserved peaks, NVML's used."""

    framework_allocated = TotalSerializer(help_text="torch.cuda.max_memory_allocated() (on cpu: the tensor peak).")
    framework_reserved = TotalSerializer(required=False, help_text="torch.cuda.max_memory_reserved(); cuda only.")
    device_used = TotalSerializer(required=False, help_text="NVML device used (nvidia-smi); cuda only.")


class PerDeviceSerializer(serializers.Serializer):
    components = ComponentsSerializer()
    total = TotalSerializer()
    views = ViewsSerializer(required=False)
    peak_phase = serializers.CharField(required=False, help_text="The phase that sets the peak.")
    phases = serializers.DictField(child=serializers.IntegerField(), required=False)


class HostSerializer(serializers.Serializer):
    ram_bytes = serializers.IntegerField()
    disk_bytes = serializers.IntegerField()


class ServingSerializer(serializers.Serializer):
    """vLLM-style KV pool arithmetic (engine ``vllm`` only; the pool needs the device's memory)."""

    kv_bytes_per_token = serializers.IntegerField(help_text="KV bytes per token, per device, all layers.")
    kv_bytes_needed = serializers.IntegerField(help_text="KV bytes the longest request × concurrency needs.")
    kv_pool_bytes = serializers.IntegerField(allow_null=True, help_text="The KV pool; null without device memory.")
    max_concurrent_sessions_at_max_request = serializers.IntegerField(allow_null=True)
    max_request_tokens_at_concurrency = serializers.IntegerField(allow_null=True)
    device_memory_bytes = serializers.IntegerField(
        allow_null=True, help_text="Device memory T (cudaMemGetInfo total) the pool was computed for; null without."
    )
    kv_pool_tokens = serializers.IntegerField(
        allow_null=True, required=False, help_text="Tokens the pool's whole blocks hold (vLLM's 'GPU KV cache size')."
    )
    max_concurrency = serializers.FloatField(
        allow_null=True,
        required=False,
        help_text="Requests of max_model_len the pool holds, as vLLM prints it ('Maximum concurrency … 1.30x').",
    )
    starts = serializers.BooleanField(
        allow_null=True, required=False, help_text="Whether vLLM starts (null without device memory)."
    )
    reason = serializers.CharField(allow_null=True, required=False, help_text="Why vLLM does not start; else null.")
    shortfall_bytes = serializers.IntegerField(
        allow_null=True, required=False, help_text="KV memory missing within u·T for one max_model_len request."
    )
    max_model_len = serializers.IntegerField(allow_null=True, required=False, help_text="Tokens (start-up check).")
    max_num_seqs = serializers.IntegerField(allow_null=True, required=False, help_text="Sequence budget profiled.")
    max_num_batched_tokens = serializers.IntegerField(
        allow_null=True, required=False, help_text="Tokens in vLLM's profile run."
    )
    profile = serializers.CharField(
        allow_null=True, required=False, help_text="The vLLM release profile used, e.g. '0.11' (0.11–0.20)."
    )
    need_bytes = serializers.IntegerField(
        allow_null=True,
        required=False,
        help_text="What the workload needs of vLLM's share: weights, profile-run peak, non-torch memory and CUDA"
        " graphs, plus the KV its sessions fill; what an acceptance job's vllm_need view measures.",
    )


class BudgetSerializer(serializers.Serializer):
    """The budget object of the v1 contract (WORKLOAD.md)."""

    workload = serializers.CharField()
    device = serializers.ChoiceField(choices=["cuda", "cpu"])
    devices = serializers.IntegerField()
    per_device = PerDeviceSerializer()
    host = HostSerializer()
    assumptions = serializers.ListField(child=serializers.CharField())
    calibration = serializers.JSONField(help_text="Calibration applied to the estimate, or null (none yet).")
    plan = serializers.DictField(help_text="The parallel plan the budget assumes (degrees, ZeRO stage, …).")
    serving = ServingSerializer(required=False, help_text="vLLM workloads only.")


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
