"""Recommendation API shapes, for the OpenAPI schema. Each serializer mirrors one dataclass's ``as_dict()``
(``recommendations.recommend.Entry`` and its parts); tests/recommendations/test_api.py checks that the keys
agree and that a real answer validates against the generated schema."""

from __future__ import annotations

from rest_framework import serializers

from catalog.choices import VendorSlug
from measurements.calibration import EvidenceLevel

from ..services import DEFAULT_TOP, MAX_TOP
from ..verdicts import Verdict

VENDORS = ", ".join(VendorSlug.values)


class RecommendQuerySerializer(serializers.Serializer):
    """The query parameters of both recommendation endpoints."""

    top = serializers.IntegerField(
        min_value=1,
        max_value=MAX_TOP,
        default=DEFAULT_TOP,
        help_text=f"How many ranked entries to return (1–{MAX_TOP}).",
        error_messages={
            key: f"top must be a whole number from 1 to {MAX_TOP}."
            for key in ("invalid", "min_value", "max_value", "max_string_length")
        },
    )
    vendor = serializers.ChoiceField(
        choices=VendorSlug.choices,
        required=False,
        help_text="Only configurations whose accelerators are this vendor's.",
        error_messages={"invalid_choice": f"{{input}} is not one of the allowed values: {VENDORS}."},
    )
    max_devices = serializers.IntegerField(
        min_value=1,
        max_value=1024,
        required=False,
        help_text="Only configurations of at most this many devices (1–1024).",
        error_messages={
            key: "max_devices must be a whole number from 1 to 1024."
            for key in ("invalid", "min_value", "max_value", "max_string_length")
        },
    )
    max_price = serializers.DecimalField(
        max_digits=12,
        decimal_places=4,
        min_value=0,
        required=False,
        help_text="Only configurations with a catalog price of at most this many USD per hour (≥ 0).",
        error_messages={
            key: "max_price must be a number of USD per hour, at least 0, with at most 4 decimal places."
            for key in (
                "invalid",
                "min_value",
                "max_digits",
                "max_decimal_places",
                "max_whole_digits",
                "max_string_length",
            )
        },
    )


class ConfigurationRefSerializer(serializers.Serializer):
    id = serializers.IntegerField(allow_null=True, help_text="The catalog configuration's primary key.")
    slug = serializers.CharField()
    accelerator_name = serializers.CharField(allow_null=True, help_text="null for a CPU-only configuration.")
    device_count = serializers.IntegerField()
    driver_version = serializers.CharField(allow_blank=True)


class PlanSerializer(serializers.Serializer):
    tensor = serializers.IntegerField(help_text="Tensor-parallel degree.")
    pipeline = serializers.IntegerField(help_text="Pipeline-parallel stages.")
    replicas = serializers.IntegerField(help_text="Serving replicas, or the training data-parallel degree.")
    zero_stage = serializers.IntegerField()
    activation_checkpointing = serializers.CharField(
        allow_null=True, help_text="Set by the plan; null: the workload's setting."
    )
    devices = serializers.IntegerField(help_text="Devices the plan uses (tensor × pipeline × replicas).")
    label = serializers.CharField()  # type: ignore[assignment]  # a declared field, not Field.label


class MarginSerializer(serializers.Serializer):
    bytes = serializers.IntegerField(help_text="Headroom a fit must keep, bytes.")
    fraction = serializers.FloatField(help_text="Of usable memory.")
    set_by = serializers.ChoiceField(choices=["min_headroom_fraction", "estimate_uncertainty", "calibration_spread"])
    candidates = serializers.DictField(child=serializers.IntegerField(), help_text="Each rule's figure, bytes.")


class ReasonSerializer(serializers.Serializer):
    rule = serializers.CharField(help_text="A compatibility rule, or vllm, memory, host_ram, disk, latency, headroom.")
    message = serializers.CharField()
    action = serializers.CharField(allow_blank=True, help_text="What to do about it.")
    component = serializers.CharField(allow_null=True, help_text="The budget component that overflows.")
    overflow_bytes = serializers.IntegerField(allow_null=True)


class EvidenceMeasurementSerializer(serializers.Serializer):
    measurement = serializers.IntegerField(help_text="GET /api/v1/measurements/{id}/")
    order = serializers.IntegerField(help_text="GET /api/v1/orders/{id}/")
    job = serializers.IntegerField(allow_null=True, help_text="GET /api/v1/acceptance-jobs/{id}/; null for an upload.")
    configuration = serializers.CharField(help_text="The measured configuration's slug.")
    view = serializers.CharField(help_text="The measurement view compared with the estimate.")


class EvidenceSerializer(serializers.Serializer):
    level = serializers.ChoiceField(choices=[level.label for level in EvidenceLevel])
    sentence = serializers.CharField()
    measurements = EvidenceMeasurementSerializer(many=True)
    correction = serializers.CharField(help_text="How the per-device need was corrected, or why it was not.")
    usable_source = serializers.CharField(help_text="Where the usable memory figure comes from.")


class LatencySerializer(serializers.Serializer):
    """Roofline estimates for one replica at its share of the sessions."""

    sessions_per_replica = serializers.IntegerField()
    ms_per_output_token = serializers.FloatField(help_text="Expected; corrected when a calibration applies.")
    ms_per_output_token_low = serializers.FloatField()
    ms_per_output_token_high = serializers.FloatField()
    prefill_ms = serializers.FloatField(help_text="One prompt of max_input_tokens.")
    bound = serializers.ChoiceField(choices=["memory", "compute"])
    output_tokens_per_s = serializers.FloatField(help_text="All sessions decoding together, over the replicas.")
    target_ms = serializers.FloatField(allow_null=True)
    max_sessions_within_target = serializers.IntegerField(allow_null=True)
    correction = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]  # a declared field, not Field.label


class CostSerializer(serializers.Serializer):
    usd_per_hour = serializers.FloatField()
    usd_per_million_output_tokens = serializers.FloatField(allow_null=True)
    output_tokens_per_s = serializers.FloatField(allow_null=True)
    label = serializers.CharField()  # type: ignore[assignment]  # a declared field, not Field.label


class ChangeBudgetSerializer(serializers.Serializer):
    total = serializers.IntegerField(help_text="Per-device total, bytes.")
    components = serializers.DictField(child=serializers.IntegerField(), help_text="Bytes per component.")


class ChangeSerializer(serializers.Serializer):
    """A change under which the workload fits, with the plan and per-device budget it fits under."""

    kind = serializers.ChoiceField(
        choices=["fewer_sessions", "smaller_micro_batch", "fp8_kv_cache", "shorter_context", "more_devices"]
    )
    description = serializers.CharField()
    changes = serializers.DictField(help_text="Dotted workload field (or device_count) → the value that fits.")
    plan = PlanSerializer()
    per_device_bytes = serializers.IntegerField()
    usable_bytes = serializers.IntegerField()
    headroom_bytes = serializers.IntegerField()
    budget = ChangeBudgetSerializer()


def _optional_int(help_text: str = "") -> serializers.IntegerField:
    return serializers.IntegerField(required=False, allow_null=True, help_text=help_text)


class AssumedCudaSerializer(serializers.Serializer):
    value = serializers.CharField(help_text="The CUDA version this configuration was judged with, e.g. 12.8.")
    basis = serializers.CharField(help_text="Why: runtime.cuda_version not given, the newest its driver runs.")


class SuggestedSettingsSerializer(serializers.Serializer):
    """vLLM settings (vLLM workloads), training settings (training), the nearest changes (does_not_fit)."""

    tensor_parallel_size = _optional_int("vLLM")
    pipeline_parallel_size = _optional_int("vLLM")
    replicas = _optional_int("vLLM")
    gpu_memory_utilization = serializers.FloatField(required=False, help_text="vLLM")
    max_model_len = _optional_int("vLLM")
    max_num_seqs = _optional_int("vLLM")
    max_num_batched_tokens = _optional_int("vLLM")
    kv_cache_bytes = _optional_int("vLLM: the KV pool per device, bytes.")
    kv_cache_tokens = _optional_int("vLLM")
    max_concurrency_at_longest_request_per_replica = _optional_int("vLLM")
    max_concurrency_at_longest_request = _optional_int("vLLM, over the replicas.")
    tensor = _optional_int("training")
    pipeline = _optional_int("training")
    data = _optional_int("training: data-parallel degree.")  # type: ignore[assignment]  # a field, not .data
    zero_stage = _optional_int("training")
    activation_checkpointing = serializers.CharField(required=False, allow_null=True, help_text="training")
    max_micro_batch_size = _optional_int("training: the largest that fits under the plan.")
    max_concurrency_within_latency_target = _optional_int("With acceptance.max_ms_per_output_token.")
    nearest_changes = ChangeSerializer(many=True, required=False, help_text="does_not_fit only.")
    cuda_version = AssumedCudaSerializer(required=False, help_text="Only when the workload names no CUDA version.")


class PriceBasisSerializer(serializers.Serializer):
    basis = serializers.ChoiceField(choices=["usd_per_million_output_tokens", "usd_per_hour", "no_price"])
    value = serializers.FloatField(allow_null=True, help_text="USD, on that basis; null without a price.")
    text = serializers.CharField(help_text='e.g. "$1.84 per million output tokens", "no price in the catalog".')


class RecommendationSerializer(serializers.Serializer):
    configuration = ConfigurationRefSerializer()
    verdict = serializers.ChoiceField(choices=[v.value for v in Verdict])
    plan = PlanSerializer(allow_null=True, help_text="The chosen plan (the closest for does_not_fit).")
    per_device_bytes = serializers.IntegerField(
        allow_null=True, help_text="What the workload needs per device under the plan (the verdict is judged on it)."
    )
    reserved_bytes = serializers.IntegerField(
        allow_null=True,
        help_text="What the engine holds per device under the plan: vLLM's whole preallocated pool"
        " (gpu_memory_utilization × memory), otherwise the budget's peak.",
    )
    usable_bytes = serializers.IntegerField(help_text="Usable memory per device (host RAM for a cpu workload).")
    usable_basis = serializers.CharField(help_text="verified, observed, derived, marketed or host_ram.")
    headroom_bytes = serializers.IntegerField(allow_null=True)
    margin = MarginSerializer(allow_null=True)
    reasons = ReasonSerializer(many=True)
    evidence = EvidenceSerializer()
    suggested_settings = SuggestedSettingsSerializer()
    latency = LatencySerializer(allow_null=True, help_text="Inference only, where the catalog has the figures.")
    cost = CostSerializer(allow_null=True, help_text="Where the catalog has a price.")
    price_basis = PriceBasisSerializer(
        help_text="The price the entry was ranked on (after the verdict and the evidence): per million output tokens"
        " where the plan's throughput is known, else per hour; configurations without a price come after the priced."
    )


class RecommendedWorkloadSerializer(serializers.Serializer):
    id = serializers.IntegerField(allow_null=True, help_text="The stored workload; null for POST /recommend.")
    name = serializers.CharField(allow_blank=True)
    description = serializers.JSONField(help_text="The workload as validated.")


class RecommendationsSerializer(serializers.Serializer):
    workload = RecommendedWorkloadSerializer()
    recommendations = RecommendationSerializer(many=True, help_text="Ranked: feasible first.")
