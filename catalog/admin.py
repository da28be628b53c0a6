"""The catalog in the admin: memory in GB and GiB, sources and uncertain fields in plain sight.

Rows are saved through the catalog services (``catalog.services.<entity>_create`` / ``_update``), as the API
and loadcatalog save them; the forms show the services' own rules (``catalog_rules_check``) on their fields.

Every changelist selects its relations up front, so its query count stays constant as rows grow
(tests/catalog/test_admin.py proves it).
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, Q, QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from . import services
from .choices import MEMORY_BANDS_GB, VendorSlug
from .models import (
    PRICE_STALE_AFTER_DAYS,
    Accelerator,
    Architecture,
    Configuration,
    CudaToolkit,
    Node,
    Precision,
    Price,
    PriceOffer,
    PyTorchWheel,
    Vendor,
    price_is_stale,
)
from .units import HOURS_PER_MONTH, UnitError, driver_branch, format_bytes, parse_driver_branch
from .usable import UsableMemory


def _memory(value: int | None) -> str:
    return format_bytes(value) if value else "—"


def _usable(usable: UsableMemory) -> str:
    """``79.19 GiB (observed)``: the figure and the kind of evidence behind it."""
    return f"{_memory(usable.bytes)} ({usable.basis})"


def _stale(read_on: date) -> str:
    """`` (stale)`` for a price read more than 90 days before today, else nothing."""
    return " (stale)" if price_is_stale(read_on, timezone.localdate()) else ""


def _offer(offer: PriceOffer | None) -> str:
    """``Cudo Compute no-kristiansand-1, read 2026-12-02`` (`` (stale)`` when it is); where a price comes from."""
    if offer is None:
        return "set without a source"
    return f"{offer.provider} {offer.region}, read {offer.read_on.isoformat()}{_stale(offer.read_on)}"


def _source(url: str) -> SafeString:
    return format_html('<a href="{}" rel="noopener noreferrer" target="_blank">source</a>', url)


class MemoryBandFilter(admin.SimpleListFilter):
    """Per-device marketed memory in bands (GB = 1e9 B)."""

    title = "memory per device"
    parameter_name = "memory_band"
    field = "marketed_memory_bytes"

    def lookups(self, request, model_admin):
        return [(slug, label) for slug, label, _, _ in MEMORY_BANDS_GB]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        for slug, _, low, high in MEMORY_BANDS_GB:
            if self.value() == slug:
                condition = Q(**{f"{self.field}__gte": low * 10**9})
                if high is not None:
                    condition &= Q(**{f"{self.field}__lt": high * 10**9})
                return queryset.filter(condition)
        return queryset


class ConfigurationMemoryBandFilter(MemoryBandFilter):
    """Per-device memory as the API's ``min_memory`` counts it: the accelerator's, or host RAM for a CPU
    configuration (``per_device_memory_bytes`` from ``Configuration.objects.with_memory()``)."""

    field = "per_device_memory_bytes"


class DriverBranchFilter(admin.SimpleListFilter):
    """NVIDIA driver branches (R550, R570, …); a blank or unreadable driver version is in no branch."""

    title = "driver branch"
    parameter_name = "driver_branch"

    def lookups(self, request, model_admin):
        versions = (
            Configuration.objects.filter(accelerator__architecture__vendor__slug=VendorSlug.NVIDIA)
            .values_list("driver_version", flat=True)
            .distinct()
        )
        branches = sorted({b for b in map(driver_branch, versions) if b is not None})
        return [(str(b), f"R{b}") for b in branches]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if not self.value():
            return queryset
        try:
            branch = parse_driver_branch(self.value() or "")  # not empty: checked above
        except UnitError as exc:
            raise IncorrectLookupParameters(str(exc)) from None
        return queryset.in_driver_branch(branch)  # type: ignore[attr-defined]  # a ConfigurationQuerySet


class CatalogForm(forms.ModelForm):
    """A catalog row's form: the model's validation (ModelForm), then the rules the services add, so that a
    row the service would refuse is a form error on its field, not a failure after the form was accepted."""

    def _post_clean(self) -> None:
        super()._post_clean()  # type: ignore[misc]  # BaseModelForm._post_clean: not in django-stubs
        try:
            services.catalog_rules_check(self.instance)
        except ValidationError as exc:
            for name, messages in exc.message_dict.items():
                if name in self.fields:
                    self.add_error(name, messages)
                else:
                    self.add_error(None, [f"{name}: {message}" for message in messages])


class CatalogAdmin(admin.ModelAdmin):
    """Saves through the entity's service (``catalog.services.WRITERS``) with the form's cleaned values."""

    form = CatalogForm

    def save_model(self, request: HttpRequest, obj: Any, form: forms.ModelForm, change: bool) -> None:
        fields = dict(form.cleaned_data)
        if change:
            services.catalog_row_update(obj, fields)
            return
        created = services.catalog_row_create(type(obj), fields)
        for model_field in created._meta.concrete_fields:  # the admin goes on with obj (its pk, its history entry)
            setattr(obj, model_field.attname, getattr(created, model_field.attname))
        obj._state.adding, obj._state.db = False, created._state.db

    def save_related(self, request: HttpRequest, form: forms.ModelForm, formsets: Any, change: bool) -> None:
        # The service set the many-to-many values (form.save_m2m() would write them a second time).
        for formset in formsets:
            self.save_formset(request, form, formset, change=change)


@admin.register(Vendor)
class VendorAdmin(CatalogAdmin):
    list_display = ["name", "slug"]
    search_fields = ["name", "slug"]


@admin.register(Precision)
class PrecisionAdmin(CatalogAdmin):
    list_display = ["slug", "description"]
    search_fields = ["slug"]


@admin.register(Architecture)
class ArchitectureAdmin(CatalogAdmin):
    list_display = ["name", "vendor", "family", "compute_capability", "gfx_target", "precision_list"]
    list_filter = ["vendor", "family", "precisions"]
    search_fields = ["name", "family", "gfx_target"]
    list_select_related = ["vendor"]
    filter_horizontal = ["precisions"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Architecture]:
        return super().get_queryset(request).prefetch_related("precisions")

    @admin.display(description="native precisions")
    def precision_list(self, obj: Architecture) -> str:
        return ", ".join(p.slug for p in obj.precisions.all())


@admin.register(Accelerator)
class AcceleratorAdmin(CatalogAdmin):
    list_display = [
        "name",
        "vendor",
        "architecture",
        "memory",
        "usable",
        "memory_type",
        "memory_bandwidth_gbps",
        "uncertain",
        "source",
    ]
    list_filter = [
        ("architecture__vendor", admin.RelatedOnlyFieldListFilter),
        ("architecture", admin.RelatedOnlyFieldListFilter),
        MemoryBandFilter,
        "architecture__precisions",
    ]
    search_fields = ["name", "slug", "architecture__name", "architecture__family", "form_factor"]
    list_select_related = ["architecture__vendor"]
    readonly_fields = ["memory", "observed_memory", "usable", "usable_source"]
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    fieldsets = [
        (None, {"fields": ["name", "slug", "architecture", "form_factor", "release_year"]}),
        (
            "Memory",
            {
                "fields": [
                    "marketed_memory_bytes",
                    "memory",
                    "usable_memory_bytes",
                    "observed_memory",
                    "usable_memory_source",
                    "usable",
                    "usable_source",
                    "memory_type",
                    "memory_bandwidth_gbps",
                ]
            },
        ),
        ("Compute and links", {"fields": ["dense_tflops", "interconnect", "nvlink_bandwidth_gbps", "tdp_watts"]}),
        ("Evidence", {"fields": ["source_url", "uncertain_fields", "notes", "max_devices_per_node"]}),
    ]

    @admin.display(description="vendor", ordering="architecture__vendor__name")
    def vendor(self, obj: Accelerator) -> str:
        return obj.architecture.vendor.name

    @admin.display(description="memory (marketed)", ordering="marketed_memory_bytes")
    def memory(self, obj: Accelerator) -> str:
        return _memory(obj.marketed_memory_bytes)

    @admin.display(description="usable (observed)", ordering="usable_memory_bytes")
    def observed_memory(self, obj: Accelerator) -> str:
        return _memory(obj.usable_memory_bytes)

    @admin.display(description="usable per device")
    def usable(self, obj: Accelerator) -> str:
        return _usable(obj.usable_memory)

    @admin.display(description="usable: evidence")
    def usable_source(self, obj: Accelerator) -> str:
        return obj.usable_memory.source

    @admin.display(description="uncertain fields")
    def uncertain(self, obj: Accelerator) -> str:
        return ", ".join(obj.uncertain_fields) or "—"

    @admin.display(description="source")
    def source(self, obj: Accelerator) -> str:
        return format_html('<a href="{}" rel="noopener noreferrer" target="_blank">source</a>', obj.source_url)


#: The offer columns of a configuration's page (PriceInline), read-only.
PRICE_COLUMNS = (
    "provider",
    "kind",
    "usd_per_hour",
    "per_month",
    "region",
    "regions",
    "instance_type",
    "host",
    "read",
    "source",
)


class PriceInline(admin.TabularInline):
    """The configuration's offers, as the price file lists them: read-only (loadcatalog is their one writer)."""

    model = Price
    extra = 0
    can_delete = False
    fields = PRICE_COLUMNS
    readonly_fields = PRICE_COLUMNS

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="USD per month")
    def per_month(self, obj: Price) -> str:
        return f"${obj.usd_per_hour * HOURS_PER_MONTH:,.0f}"

    @admin.display(description="host")
    def host(self, obj: Price) -> str:
        return f"{obj.vcpus or '?'} vCPU, {obj.host_memory_gib or '?'} GiB"

    @admin.display(description="read on")
    def read(self, obj: Price) -> str:
        return obj.read_on.isoformat() + _stale(obj.read_on)

    @admin.display(description="source")
    def source(self, obj: Price) -> SafeString:
        return _source(obj.source_url)


@admin.register(Configuration)
class ConfigurationAdmin(CatalogAdmin):
    # what a buyer compares, narrow enough for a 1,400 px screen beside the filters: the name says the accelerator and
    # host; the accelerator, vendor, architecture and CPU are filters
    list_display = ["name", "gpus", "memory", "total_memory", "nvlink", "driver", "price", "price_from"]
    list_filter = [
        "kind",
        ("accelerator__architecture__vendor", admin.RelatedOnlyFieldListFilter),
        ("accelerator__architecture", admin.RelatedOnlyFieldListFilter),
        ConfigurationMemoryBandFilter,
        "accelerator__architecture__precisions",
        DriverBranchFilter,
        "device_count",
        "host_cpu_architecture",
    ]
    search_fields = ["name", "slug", "accelerator__name", "driver_version"]
    list_select_related = ["accelerator__architecture__vendor"]
    autocomplete_fields = ["accelerator"]
    readonly_fields = [
        "per_device_memory",
        "usable",
        "usable_source",
        "total_memory",
        "driver_branch",
        "topology",
        "price_from",
        "no_price_reason",
    ]
    inlines = [PriceInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Configuration]:
        return super().get_queryset(request).with_memory().with_price_offer()  # type: ignore[attr-defined]

    @admin.display(description="USD per hour (per month)", ordering=F("hourly_price_usd").asc(nulls_last=True))
    def price(self, obj: Configuration) -> str:
        """``$15.32 ($11,184/month)``: the cheapest on-demand price; "no price" (with why, on the change page)."""
        if obj.hourly_price_usd is None:
            return "no price"
        return f"${obj.hourly_price_usd:,.2f} (${obj.hourly_price_usd * HOURS_PER_MONTH:,.0f}/month)"

    @admin.display(description="price from")
    def price_from(self, obj: Configuration) -> str:
        """Which offer the price is: provider, region, the day read, and whether that is stale; or why none."""
        if obj.hourly_price_usd is None:
            return obj.no_price_reason or "—"
        return _offer(obj.price_offer)

    @admin.display(description="devices", ordering="device_count")
    def gpus(self, obj: Configuration) -> int:
        """All the configuration's devices; a cluster's name says its nodes ("x16, 2 nodes × 8") and its page the
        network between them (``topology``): no column or filter of their own, so that the list still fits the
        admin's box on a 1,400 px screen (tests/browser/test_first_hour.py)."""
        return obj.device_count

    @admin.display(description="nodes and scale-out network")
    def topology(self, obj: Configuration) -> str:
        return obj.topology

    @admin.display(description="per device (usable)", ordering="per_device_memory_bytes")
    def memory(self, obj: Configuration) -> str:
        return f"{_memory(getattr(obj, 'per_device_memory_bytes', None))}; usable {_usable(obj.usable_memory)}"

    @admin.display(description="NVLink domain", ordering="nvlink_domain_size")
    def nvlink(self, obj: Configuration) -> int:
        return obj.nvlink_domain_size

    @admin.display(description="driver", ordering="driver_version")
    def driver(self, obj: Configuration) -> str:
        return obj.driver_version or "—"

    @admin.display(description="per device", ordering="per_device_memory_bytes")
    def per_device_memory(self, obj: Configuration) -> str:
        return _memory(getattr(obj, "per_device_memory_bytes", None))

    @admin.display(description="usable per device", ordering="usable_memory_bytes")
    def usable(self, obj: Configuration) -> str:
        return _usable(obj.usable_memory)

    @admin.display(description="usable: evidence")
    def usable_source(self, obj: Configuration) -> str:
        return obj.usable_memory.source

    @admin.display(description="total", ordering="total_memory_bytes")
    def total_memory(self, obj: Configuration) -> str:
        return _memory(getattr(obj, "total_memory_bytes", None))


class StaleFilter(admin.SimpleListFilter):
    """Prices read more than 90 days before today (to refresh), or within them."""

    title = "read"
    parameter_name = "stale"

    def lookups(self, request, model_admin):
        return [("yes", f"more than {PRICE_STALE_AFTER_DAYS} days ago (stale)"), ("no", "recently")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        cutoff = timezone.localdate() - timedelta(days=PRICE_STALE_AFTER_DAYS)
        if self.value() == "yes":
            return queryset.filter(read_on__lt=cutoff)
        if self.value() == "no":
            return queryset.filter(read_on__gte=cutoff)
        return queryset


@admin.register(Price)
class PriceAdmin(admin.ModelAdmin):
    """Every offer of every configuration, read-only: prices come from fixtures/catalog/prices.json (loadcatalog)."""

    list_display = [
        "slug",
        "provider",
        "kind",
        "usd_per_hour",
        "per_gpu",
        "per_month",
        "region",
        "regions",
        "instance_type",
        "read",
        "source",
    ]
    list_filter = ["provider", "kind", StaleFilter]
    search_fields = ["configuration__slug", "provider", "instance_type", "region"]
    list_select_related = ["configuration"]
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="configuration", ordering="configuration__slug")
    def slug(self, obj: Price) -> str:
        return obj.configuration.slug

    @admin.display(description="USD per GPU-hour", ordering="usd_per_hour")
    def per_gpu(self, obj: Price) -> str:
        return f"${obj.usd_per_gpu_hour:,.4f}"

    @admin.display(description="USD per month", ordering="usd_per_hour")
    def per_month(self, obj: Price) -> str:
        return f"${obj.usd_per_hour * HOURS_PER_MONTH:,.0f}"

    @admin.display(description="read on", ordering="read_on")
    def read(self, obj: Price) -> str:
        return obj.read_on.isoformat() + _stale(obj.read_on)

    @admin.display(description="source")
    def source(self, obj: Price) -> SafeString:
        return _source(obj.source_url)


@admin.register(CudaToolkit)
class CudaToolkitAdmin(CatalogAdmin):
    list_display = ["version", "label", "family", "min_driver_linux", "minor_compat_min_driver_linux", "uncertain"]
    list_filter = ["family", "uncertain"]
    search_fields = ["version", "label"]


@admin.register(PyTorchWheel)
class PyTorchWheelAdmin(CatalogAdmin):
    list_display = ["torch_versions", "variant", "cuda_version", "capabilities", "embeds_ptx"]
    list_filter = ["variant", "embeds_ptx"]

    @admin.display(description="compute capabilities")
    def capabilities(self, obj: PyTorchWheel) -> str:
        return ", ".join(obj.compute_capabilities)


@admin.register(Node)
class NodeAdmin(CatalogAdmin):
    list_display = [
        "name",
        "configuration",
        "probe",
        "device_count",
        "verified_memory",
        "driver_version",
        "cuda_driver_version",
        "last_heartbeat_at",
    ]
    list_filter = ["probe", ("configuration", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["name", "hostname"]
    list_select_related = ["configuration"]
    readonly_fields = ["inventory", "last_heartbeat_at", "created_at"]

    @admin.display(description="verified memory per device", ordering="verified_usable_memory_bytes")
    def verified_memory(self, obj: Node) -> str:
        return _memory(obj.verified_usable_memory_bytes)
