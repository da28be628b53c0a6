"""Catalog serializers. Memory is in bytes everywhere; ``*_gb``/``*_gib`` never appear in the API."""

from __future__ import annotations

import logging

from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from workers.probes.model import InventoryError, read_inventory

from .. import services
from ..models import (
    Accelerator,
    Architecture,
    Configuration,
    Node,
    Precision,
    Vendor,
    validate_dense_tflops,
    validate_field_names,
)
from ..usable import UsableBasis

logger = logging.getLogger(__name__)

USABLE_FIELDS = ["usable_bytes", "usable_basis", "usable_source"]


class UsableMemoryFields(serializers.Serializer):
    """Usable memory per device and its evidence (catalog.usable), read from the row's ``usable_memory``."""

    usable_bytes = serializers.IntegerField(
        source="usable_memory.bytes", read_only=True, help_text="Usable memory per device, bytes."
    )
    usable_basis = serializers.ChoiceField(
        source="usable_memory.basis",
        choices=[basis.value for basis in UsableBasis],
        read_only=True,
        help_text="verified on a node > observed in a public source > derived from the marketed size by the "
        "rule for its memory type > marketed (no rule); host_ram for a CPU-only configuration.",
    )
    usable_source = serializers.CharField(
        source="usable_memory.source", read_only=True, help_text="The node, the source, or the rule applied."
    )


class WrittenByServices:
    """``save()`` writes through ``catalog.services`` (the one write path of the admin, the API and
    loadcatalog); the view turns the services' validation errors into a 400 per field."""

    def create(self, validated_data):
        return services.catalog_row_create(self.Meta.model, validated_data)  # type: ignore[attr-defined]

    def update(self, instance, validated_data):
        return services.catalog_row_update(instance, validated_data)


class VendorSerializer(serializers.ModelSerializer):
    class Meta:
        model = Vendor
        fields = ["id", "slug", "name"]


@extend_schema_serializer(component_name="CatalogArchitecture")  # "Architecture" is the workload's model field
class ArchitectureSerializer(WrittenByServices, serializers.ModelSerializer):
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
    vendor: serializers.SlugRelatedField[Vendor] = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    compute_capability = serializers.CharField(read_only=True, allow_null=True)

    class Meta:
        model = Architecture
        fields = ["id", "slug", "name", "family", "vendor", "compute_capability", "gfx_target"]


class AcceleratorSerializer(WrittenByServices, UsableMemoryFields, serializers.ModelSerializer):
    architecture = serializers.SlugRelatedField(slug_field="slug", queryset=Architecture.objects.all())
    vendor = serializers.SerializerMethodField()
    precisions = serializers.SerializerMethodField()
    marketed_memory_bytes = serializers.IntegerField(min_value=1, max_value=2**50)
    usable_memory_bytes = serializers.IntegerField(min_value=1, max_value=2**50, allow_null=True, required=False)
    dense_tflops = serializers.DictField(
        child=serializers.FloatField(allow_null=True, min_value=0),
        required=False,
        validators=[validate_dense_tflops],
        help_text="Peak dense TFLOPS per precision (int8 in TOPS); null = unsupported.",
    )
    uncertain_fields = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False, validators=[validate_field_names]
    )

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
            *USABLE_FIELDS,
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


class ConfigurationSerializer(WrittenByServices, UsableMemoryFields, serializers.ModelSerializer):
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
    driver_branch = serializers.CharField(read_only=True)
    host_ram_bytes = serializers.IntegerField(min_value=1, max_value=2**50)
    disk_bytes = serializers.IntegerField(min_value=1, max_value=2**56)
    device_count = serializers.IntegerField(
        min_value=1, max_value=1024, default=1, help_text="Devices over all the nodes."
    )
    node_count = serializers.IntegerField(
        min_value=1,
        max_value=1024,
        default=1,
        help_text="Machines the configuration spans; device_count divides among them.",
    )
    devices_per_node = serializers.IntegerField(read_only=True)
    topology = serializers.CharField(
        read_only=True, help_text='"1 node", or "2 nodes × 8, <scale-out fabric>, 400 Gb/s per GPU".'
    )

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
            *USABLE_FIELDS,
            "nvlink_domain_size",
            "node_count",
            "devices_per_node",
            "scale_out_fabric",
            "scale_out_gbps_per_device",
            "topology",
            "host_cpu_architecture",
            "vcpus",
            "host_ram_bytes",
            "disk_bytes",
            "driver_version",
            "driver_branch",
            "hourly_price_usd",
            "notes",
        ]


class NodeDeviceSummarySerializer(serializers.Serializer):
    name = serializers.CharField()
    total_memory_bytes = serializers.IntegerField(allow_null=True)
    usable_memory_bytes = serializers.IntegerField(allow_null=True)


class NodeInventorySummarySerializer(serializers.Serializer):
    """What any signed-in user may see of a node's probe report: no hostname, processes or free memory."""

    probe = serializers.CharField()
    device_count = serializers.IntegerField()
    devices = NodeDeviceSummarySerializer(many=True)
    total_device_memory_bytes = serializers.IntegerField(
        allow_null=True, help_text="Sum of the devices' total memory; null when a device reports none."
    )
    host_ram_total_bytes = serializers.IntegerField(allow_null=True)
    driver_version = serializers.CharField()
    cuda_driver_version = serializers.CharField()


@extend_schema_field({"type": "object", "additionalProperties": {}})
class NullableObjectField(serializers.JSONField):
    """A JSON object, documented as ``type: [object, null]`` with ``allow_null`` (a plain nullable JSONField
    is documented as ``oneOf: [{}, null]``, which null matches twice)."""


class NodeSerializer(WrittenByServices, serializers.ModelSerializer):
    """A node. ``hostname`` and the full ``inventory`` (per-process GPU memory, free memory, host details)
    are for staff only and null for everyone else; ``inventory_summary`` is for every signed-in user."""

    configuration = serializers.SlugRelatedField(
        slug_field="slug", queryset=Configuration.objects.all(), allow_null=True, required=False
    )
    hostname = serializers.CharField(
        max_length=255, allow_blank=True, allow_null=True, required=False, help_text="Staff only; null for others."
    )
    inventory = NullableObjectField(
        read_only=True, allow_null=True, help_text="The probe's full report; staff only, null for others."
    )
    inventory_summary = serializers.SerializerMethodField()

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
            "inventory_summary",
            "last_heartbeat_at",
            "created_at",
        ]
        read_only_fields = ["inventory", "last_heartbeat_at", "created_at", "verified_usable_memory_bytes"]

    def _is_staff(self) -> bool:
        request = self.context.get("request")
        user = getattr(request, "user", None)
        return bool(user and user.is_authenticated and user.is_staff)

    def validate_hostname(self, value: str | None) -> str:
        return value or ""

    @extend_schema_field(NodeInventorySummarySerializer)
    def get_inventory_summary(self, obj: Node) -> dict:
        """The public part of the node's inventory, read through ``workers.probes.model.read_inventory``. A stored
        inventory that does not read (hand-edited, another layout) shows no devices and is logged by field."""
        try:
            inventory = read_inventory(obj.inventory)
        except InventoryError as exc:
            logger.warning("node %s: unreadable stored inventory: %s", obj.name, exc)
            inventory = None
        devices = [
            {"name": d.name, "total_memory_bytes": d.total_memory_bytes, "usable_memory_bytes": d.usable_memory_bytes}
            for d in (inventory.devices if inventory else ())
        ]
        totals = [d.total_memory_bytes for d in (inventory.devices if inventory else ())]
        return {
            "probe": obj.probe,
            "device_count": obj.device_count,
            "devices": devices,
            "total_device_memory_bytes": None if None in totals else sum(t for t in totals if t is not None),
            "host_ram_total_bytes": inventory.host.ram_total_bytes if inventory else None,
            "driver_version": obj.driver_version,
            "cuda_driver_version": obj.cuda_driver_version,
        }

    def to_representation(self, instance: Node) -> dict:
        data = super().to_representation(instance)
        if not self._is_staff():
            data["hostname"] = None
            data["inventory"] = None
        return data
