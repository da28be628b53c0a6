"""FilterSets: the catalog's query language for the API (the admin has its own list filters in admin.py).

A bad value is a 400 that says what was expected: each field below validates its input and names the
allowed values in its message.
"""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError
from django.db.models import Q, QuerySet
from django_filters import rest_framework as filters
from rest_framework.exceptions import ValidationError as ApiValidationError

from . import compat
from .choices import ConfigurationKind, PrecisionSlug, VendorSlug
from .models import Accelerator, Architecture, Configuration, ConfigurationQuerySet, CudaToolkit, Node
from .units import MEMORY_HELP, UnitError, parse_driver_branch, parse_memory


def _invalid(message: str) -> ValidationError:
    """A form error whose message may quote the user's input: django-filter %-formats messages later,
    so a ``%`` in the input must be escaped, or it becomes a TypeError and a 500."""
    return ValidationError(message.replace("%", "%%"), code="invalid")


class MemoryField(forms.CharField):
    """``80GB``, ``79GiB``, ``81920MiB`` or bare bytes → int bytes."""

    def to_python(self, value):
        value = super().to_python(value)
        if value in self.empty_values:
            return None
        try:
            return parse_memory(value)
        except UnitError as exc:
            raise _invalid(str(exc)) from None


class MemoryFilter(filters.Filter):
    field_class = MemoryField


class CudaVersionField(forms.CharField):
    """``12.4``, ``12.4.1`` or ``cu124`` → the normalized version string (catalog.compat.parse_cuda_version)."""

    def to_python(self, value):
        value = super().to_python(value)
        if value in self.empty_values:
            return None
        try:
            return compat.parse_cuda_version(value)
        except compat.CompatError as exc:
            raise _invalid(str(exc)) from None


class CudaVersionFilter(filters.Filter):
    field_class = CudaVersionField


class ComputeCapabilityField(forms.CharField):
    """``8.9``, ``89`` or ``sm_90`` → a ComputeCapability (catalog.compat.parse_compute_capability)."""

    def to_python(self, value):
        value = super().to_python(value)
        if value in self.empty_values:
            return None
        try:
            return compat.parse_compute_capability(value)
        except compat.CompatError as exc:
            raise _invalid(str(exc)) from None


class ComputeCapabilityFilter(filters.Filter):
    field_class = ComputeCapabilityField


class DriverBranchField(forms.CharField):
    """``R550`` or ``550`` → 550 (catalog.units.parse_driver_branch)."""

    def to_python(self, value):
        value = super().to_python(value)
        if value in self.empty_values:
            return None
        try:
            return parse_driver_branch(value)
        except UnitError as exc:
            raise _invalid(str(exc)) from None


class DriverBranchFilter(filters.Filter):
    field_class = DriverBranchField


class StrictChoiceFilter(filters.ChoiceFilter):
    """A choice filter whose error lists the allowed values."""

    def __init__(self, *args, **kwargs):
        choices = kwargs["choices"]
        allowed = ", ".join(str(value) for value, _ in choices)
        kwargs.setdefault(
            "error_messages", {"invalid_choice": f"%(value)s is not one of the allowed values: {allowed}."}
        )
        super().__init__(*args, **kwargs)


class StrictBooleanField(forms.CharField):
    """``true``/``false`` (or 1/0, yes/no); anything else is an error, not a silently ignored filter."""

    def to_python(self, value):
        value = super().to_python(value)
        if value in self.empty_values:
            return None
        text = value.strip().lower()
        if text in {"true", "1", "yes"}:
            return True
        if text in {"false", "0", "no"}:
            return False
        raise _invalid(f"{value!r} is not a boolean; use true or false.")


class StrictBooleanFilter(filters.Filter):
    field_class = StrictBooleanField


class AcceleratorFilterSet(filters.FilterSet):
    vendor = StrictChoiceFilter(field_name="architecture__vendor__slug", choices=VendorSlug.choices)
    architecture = filters.CharFilter(field_name="architecture__slug")
    family = filters.CharFilter(field_name="architecture__family", lookup_expr="iexact")
    precision = StrictChoiceFilter(field_name="architecture__precisions__slug", choices=PrecisionSlug.choices)
    min_memory = MemoryFilter(field_name="marketed_memory_bytes", lookup_expr="gte", help_text=MEMORY_HELP)
    max_memory = MemoryFilter(field_name="marketed_memory_bytes", lookup_expr="lte", help_text=MEMORY_HELP)

    class Meta:
        model = Accelerator
        fields = ["vendor", "architecture", "family", "precision", "min_memory", "max_memory"]


class ArchitectureFilterSet(filters.FilterSet):
    vendor = StrictChoiceFilter(field_name="vendor__slug", choices=VendorSlug.choices)
    precision = StrictChoiceFilter(field_name="precisions__slug", choices=PrecisionSlug.choices)

    class Meta:
        model = Architecture
        fields = ["vendor", "precision", "family"]


class ConfigurationFilterSet(filters.FilterSet):
    vendor = StrictChoiceFilter(
        field_name="accelerator__architecture__vendor__slug", choices=VendorSlug.choices, help_text="Vendor slug."
    )
    architecture = filters.CharFilter(field_name="accelerator__architecture__slug", help_text="Architecture slug.")
    family = filters.CharFilter(field_name="accelerator__architecture__family", lookup_expr="iexact")
    accelerator = filters.CharFilter(field_name="accelerator__slug", help_text="Accelerator slug.")
    device_count = filters.NumberFilter(field_name="device_count", min_value=1, max_value=1024)
    min_device_count = filters.NumberFilter(field_name="device_count", lookup_expr="gte", min_value=1)
    max_device_count = filters.NumberFilter(field_name="device_count", lookup_expr="lte", min_value=1)
    min_memory = MemoryFilter(
        field_name="per_device_memory_bytes", lookup_expr="gte", help_text=f"Per-device memory at least: {MEMORY_HELP}."
    )
    max_memory = MemoryFilter(
        field_name="per_device_memory_bytes", lookup_expr="lte", help_text=f"Per-device memory at most: {MEMORY_HELP}."
    )
    min_total_memory = MemoryFilter(
        field_name="total_memory_bytes", lookup_expr="gte", help_text=f"Memory of all devices together: {MEMORY_HELP}."
    )
    precision = StrictChoiceFilter(
        choices=PrecisionSlug.choices, method="filter_precision", help_text="Natively supported tensor precision."
    )
    min_compute_capability = ComputeCapabilityFilter(
        method="filter_min_compute_capability", help_text="Minimum NVIDIA compute capability, e.g. 8.0."
    )
    cuda = CudaVersionFilter(
        method="filter_cuda",
        help_text="A CUDA version (e.g. 12.4) the installed driver supports, by NVIDIA's driver tables.",
    )
    nvlink = StrictBooleanFilter(
        method="filter_nvlink", help_text="Devices joined by NVLink/NVSwitch (AMD: Infinity Fabric)."
    )
    device = StrictChoiceFilter(
        choices=[("cpu", "cpu"), ("gpu", "gpu")],
        method="filter_device",
        help_text="`cpu`: configurations without an accelerator; `gpu`: with one.",
    )
    driver_branch = DriverBranchFilter(method="filter_driver_branch", help_text="NVIDIA driver branch, e.g. R550.")

    class Meta:
        model = Configuration
        fields: list[str] = []

    def filter_precision(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(accelerator__architecture__precisions__slug=value).distinct()

    def filter_min_compute_capability(self, queryset: QuerySet, name: str, value: compat.ComputeCapability) -> QuerySet:
        return queryset.filter(
            Q(accelerator__architecture__compute_capability_major__gt=value.major)
            | Q(
                accelerator__architecture__compute_capability_major=value.major,
                accelerator__architecture__compute_capability_minor__gte=value.minor,
            )
        )

    def filter_cuda(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        toolkits = [
            compat.Toolkit.from_row(row)
            for row in CudaToolkit.objects.values(
                "version", "family", "min_driver_linux", "minor_compat_min_driver_linux"
            )
        ]
        try:
            floor = compat.min_driver_key_for_cuda(value, toolkits)
        except compat.CompatError as exc:
            raise ApiValidationError({"cuda": [str(exc)]}) from None
        # The driver tables are NVIDIA's: a ROCm version is not a driver that runs CUDA, however its key compares.
        return queryset.filter(
            kind=ConfigurationKind.GPU,
            accelerator__architecture__vendor__slug=VendorSlug.NVIDIA,
            driver_version_key__gte=floor,
        )

    def filter_nvlink(self, queryset: QuerySet, name: str, value: bool | None) -> QuerySet:
        if value is None:
            return queryset
        return queryset.filter(nvlink_domain_size__gt=1) if value else queryset.filter(nvlink_domain_size=1)

    def filter_device(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        return queryset.filter(kind=ConfigurationKind.CPU if value == "cpu" else ConfigurationKind.GPU)

    def filter_driver_branch(self, queryset: ConfigurationQuerySet, name: str, value: int) -> ConfigurationQuerySet:
        return queryset.in_driver_branch(value)


class NodeFilterSet(filters.FilterSet):
    configuration = filters.CharFilter(field_name="configuration__slug")
    probe = filters.CharFilter(field_name="probe")

    class Meta:
        model = Node
        fields = ["configuration", "probe"]
