"""Catalog serializers. Memory is in bytes everywhere; ``*_gb``/``*_gib`` never appear in the API."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from ..models import Accelerator, Architecture, Configuration, Node, Precision, Vendor


class FullCleanMixin:
    """Run the model's own validation (fields and database constraints) before saving.

    A violated constraint then becomes a 400 naming the field, never an IntegrityError and a 500.
    """

    def _clean(self, instance):  # type: ignore[no-untyped-def]
        try:
            instance.full_clean()
        except DjangoValidationError as exc:
            raise serializers.ValidationError(serializers.as_serializer_error(exc)) from None

    def create(self, validated_data):  # type: ignore[no-untyped-def]
        many = {k: validated_data.pop(k) for k in list(validated_data) if isinstance(validated_data[k], list)}
        instance = self.Meta.model(**validated_data)  # type: ignore[attr-defined]
        self._clean(instance)
        instance.save()
        for field, values in many.items():
            getattr(instance, field).set(values)
        return instance

    def update(self, instance, validated_data):  # type: ignore[no-untyped-def]
        many = {k: validated_data.pop(k) for k in list(validated_data) if isinstance(validated_data[k], list)}
        for field, value in validated_data.items():
            setattr(instance, field, value)
        self._clean(instance)
        instance.save()
        for field, values in many.items():
            getattr(instance, field).set(values)
        return instance


class VendorSerializer(serializers.ModelSerializer):
    class Meta:
        model = Vendor
        fields = ["id", "slug", "name"]


@extend_schema_serializer(component_name="CatalogArchitecture")  # "Architecture" is the workload's model field
class ArchitectureSerializer(FullCleanMixin, serializers.ModelSerializer):
    vendor = serializers.SlugRelatedField(slug_field="slug", queryset=Vendor.objects.all())
    precisions = serializers.SlugRelatedField(slug_field="slug", many=True, queryset=Precision.objects.all())
    compute_capability = serializers.CharField(read_only=True, allow_null=True)

    class Meta:
        model = Architecture
        fields = [
            "id",
            "slug",
            "name",
            "family",
            "vendor",
            "compute_capability",
            "compute_capability_major",
            "compute_capability_minor",
            "gfx_target",
            "precisions",
        ]
        extra_kwargs = {
            "compute_capability_major": {"write_only": True},
            "compute_capability_minor": {"write_only": True},
        }


class ArchitectureSummarySerializer(serializers.ModelSerializer):
    vendor = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    compute_capability = serializers.CharField(read_only=True, allow_null=True)

    class Meta:
        model = Architecture
        fields = ["id", "slug", "name", "family", "vendor", "compute_capability", "gfx_target"]


class AcceleratorSerializer(FullCleanMixin, serializers.ModelSerializer):
    architecture = serializers.SlugRelatedField(slug_field="slug", queryset=Architecture.objects.all())
    vendor = serializers.SerializerMethodField()
    precisions = serializers.SerializerMethodField()
    marketed_memory_bytes = serializers.IntegerField(min_value=1, max_value=2**50)
    usable_memory_bytes = serializers.IntegerField(min_value=1, max_value=2**50, allow_null=True, required=False)

    class Meta:
        model = Accelerator
        fields = [
            "id",
            "slug",
            "name",
            "vendor",
            "architecture",
            "precisions",
            "marketed_memory_bytes",
            "usable_memory_bytes",
            "usable_memory_source",
            "memory_type",
            "memory_bandwidth_gbps",
            "dense_tflops",
            "form_factor",
            "interconnect",
            "nvlink_bandwidth_gbps",
            "tdp_watts",
            "max_devices_per_node",
            "release_year",
            "source_url",
            "uncertain_fields",
            "notes",
        ]

    @extend_schema_field(serializers.CharField())
    def get_vendor(self, obj: Accelerator) -> str:
        return obj.architecture.vendor.slug

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_precisions(self, obj: Accelerator) -> list[str]:
        return [p.slug for p in obj.architecture.precisions.all()]


class AcceleratorSummarySerializer(serializers.ModelSerializer):
    vendor = serializers.CharField(source="architecture.vendor.slug", read_only=True)
    architecture = serializers.CharField(source="architecture.slug", read_only=True)

    class Meta:
        model = Accelerator
        fields = ["id", "slug", "name", "vendor", "architecture", "marketed_memory_bytes", "usable_memory_bytes"]


class ConfigurationSerializer(FullCleanMixin, serializers.ModelSerializer):
    accelerator = AcceleratorSummarySerializer(read_only=True, allow_null=True)
    accelerator_slug = serializers.SlugRelatedField(
        source="accelerator",
        slug_field="slug",
        queryset=Accelerator.objects.all(),
        write_only=True,
        allow_null=True,
        required=False,
    )
    per_device_memory_bytes = serializers.IntegerField(read_only=True)
    total_memory_bytes = serializers.IntegerField(read_only=True)
    usable_memory_bytes = serializers.IntegerField(read_only=True)
    driver_branch = serializers.CharField(read_only=True)
    host_ram_bytes = serializers.IntegerField(min_value=1, max_value=2**50)
    disk_bytes = serializers.IntegerField(min_value=1, max_value=2**56)
    device_count = serializers.IntegerField(min_value=1, max_value=1024, default=1)

    class Meta:
        model = Configuration
        fields = [
            "id",
            "slug",
            "name",
            "kind",
            "accelerator",
            "accelerator_slug",
            "device_count",
            "per_device_memory_bytes",
            "total_memory_bytes",
            "usable_memory_bytes",
            "nvlink_domain_size",
            "host_cpu_architecture",
            "vcpus",
            "host_ram_bytes",
            "disk_bytes",
            "driver_version",
            "driver_branch",
            "hourly_price_usd",
            "notes",
        ]


class NodeSerializer(FullCleanMixin, serializers.ModelSerializer):
    configuration = serializers.SlugRelatedField(
        slug_field="slug", queryset=Configuration.objects.all(), allow_null=True, required=False
    )

    class Meta:
        model = Node
        fields = [
            "id",
            "name",
            "configuration",
            "probe",
            "hostname",
            "device_count",
            "verified_usable_memory_bytes",
            "driver_version",
            "cuda_driver_version",
            "inventory",
            "last_heartbeat_at",
            "created_at",
        ]
        read_only_fields = ["inventory", "last_heartbeat_at", "created_at", "verified_usable_memory_bytes"]
