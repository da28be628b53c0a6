"""The device catalog, split into types and instances as NetBox does.

Vendor → Architecture → Accelerator (a device type with its memory facts) → Configuration (an
accelerator × a device count in a host with a driver) → Node (a real machine attached to vramplan,
running a worker, with its verified inventory). Memory is always in bytes; GB = 1e9 B, GiB = 2**30 B.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Case, ExpressionWrapper, F, OuterRef, Q, Subquery, Value, When
from django.db.models.functions import Cast, Floor, Mod, NullIf
from django.db.models.lookups import Exact
from django.utils.functional import cached_property

from .choices import ConfigurationKind, CpuArchitecture, PriceKind, ProbeKind, VendorSlug
from .units import UnitError, driver_branch, driver_branch_key_range, version_key
from .usable import (
    DERIVATION_RULES,
    UsableMemory,
    accelerator_usable_memory,
    host_usable_memory,
    verified_source,
)

#: A price read more than this many days before today is flagged stale (issue 18: prices a buyer can check).
PRICE_STALE_AFTER_DAYS = 90


def price_is_stale(read_on: date, today: date) -> bool:
    """Whether a price read on ``read_on`` is too old to quote as today's: more than 90 days before ``today``."""
    return (today - read_on).days > PRICE_STALE_AFTER_DAYS


@dataclass(frozen=True)
class PriceOffer:
    """Which offer a configuration's ``hourly_price_usd`` is: a provider's on-demand price, where and when read."""

    provider: str
    region: str
    instance_type: str
    read_on: date
    source_url: str

    def is_stale(self, today: date) -> bool:
        return price_is_stale(self.read_on, today)


def validate_version(value: str) -> None:
    """A driver or toolkit version that :func:`catalog.units.version_key` reads (``save()`` stores its key)."""
    try:
        version_key(value)
    except UnitError as exc:
        raise ValidationError(str(exc), code="invalid_version") from None


def validate_dense_tflops(value: object) -> None:
    """``{"bf16": 989.5, "fp64": null, ...}``: precision names to a number, or null where unsupported."""
    if not isinstance(value, dict):
        raise ValidationError(
            'must be an object of precision → TFLOPS (a number, or null), e.g. {"bf16": 989.5}.', code="invalid"
        )
    for precision, tflops in value.items():
        if not isinstance(precision, str) or not precision.strip():
            raise ValidationError(f"{precision!r} is not a precision name.", code="invalid")
        if tflops is not None and (isinstance(tflops, bool) or not isinstance(tflops, int | float)):
            raise ValidationError(f"{precision}: {tflops!r} is not a number or null.", code="invalid")
        if tflops is not None and not (0 <= tflops < float("inf")):
            raise ValidationError(f"{precision}: {tflops!r} must be a finite number ≥ 0.", code="invalid")


def validate_field_names(value: object) -> None:
    """A list of field names (strings), e.g. ``["usable_memory_bytes", "tdp_watts"]``."""
    if not isinstance(value, list) or not all(isinstance(item, str) and item.strip() for item in value):
        raise ValidationError('must be a list of field names, e.g. ["tdp_watts"].', code="invalid")


class Vendor(models.Model):
    slug = models.SlugField(max_length=32, unique=True)
    name = models.CharField(max_length=64, unique=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Precision(models.Model):
    """A numeric format with native tensor/matrix-core support (``fp8`` = OCP e4m3/e5m2)."""

    slug = models.SlugField(max_length=32, unique=True)
    description = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Architecture(models.Model):
    vendor = models.ForeignKey(Vendor, on_delete=models.PROTECT, related_name="architectures")
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=64, unique=True)  # e.g. "Hopper (sm_90)"
    family = models.CharField(max_length=64)  # e.g. "Hopper", "CDNA3"
    # NVIDIA compute capability as (major, minor); AMD devices carry a gfx target instead.
    compute_capability_major = models.PositiveSmallIntegerField(null=True, blank=True)
    compute_capability_minor = models.PositiveSmallIntegerField(null=True, blank=True)
    gfx_target = models.CharField(max_length=16, blank=True)
    precisions = models.ManyToManyField(Precision, related_name="architectures", blank=True)

    class Meta:
        ordering = ["vendor__name", "compute_capability_major", "compute_capability_minor", "name"]
        constraints = [
            models.CheckConstraint(
                name="architecture_cc_complete",
                condition=Q(compute_capability_major__isnull=True, compute_capability_minor__isnull=True)
                | Q(compute_capability_major__isnull=False, compute_capability_minor__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def compute_capability(self) -> str | None:
        if self.compute_capability_major is None:
            return None
        return f"{self.compute_capability_major}.{self.compute_capability_minor}"


class Accelerator(models.Model):
    """A device type: one GPU model with its memory and compute facts, each traceable to a source."""

    architecture = models.ForeignKey(Architecture, on_delete=models.PROTECT, related_name="accelerators")
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=128, unique=True)
    marketed_memory_bytes = models.BigIntegerField(help_text="Capacity as marketed (GB = 1e9 bytes).")
    usable_memory_bytes = models.BigIntegerField(
        null=True,
        blank=True,
        help_text="Capacity CUDA reports, where a public source observed it (usable_memory_source says where).",
    )
    usable_memory_source = models.CharField(max_length=300, blank=True)
    memory_type = models.CharField(max_length=32, blank=True)
    memory_bandwidth_gbps = models.FloatField(null=True, blank=True, help_text="Peak bandwidth, decimal GB/s.")
    dense_tflops = models.JSONField(
        default=dict,
        blank=True,
        validators=[validate_dense_tflops],
        help_text="Peak dense TFLOPS per precision (int8 in TOPS); null = unsupported.",
    )
    form_factor = models.CharField(max_length=120, blank=True)
    interconnect = models.CharField(max_length=120, blank=True)
    nvlink_bandwidth_gbps = models.FloatField(null=True, blank=True)
    tdp_watts = models.PositiveIntegerField(null=True, blank=True)
    max_devices_per_node = models.PositiveSmallIntegerField(default=8)
    release_year = models.PositiveSmallIntegerField(null=True, blank=True)
    source_url = models.URLField(max_length=500)
    uncertain_fields = models.JSONField(default=list, blank=True, validators=[validate_field_names])
    notes = models.TextField(blank=True)

    class Meta:
        ordering = ["architecture__vendor__name", "name"]
        constraints = [
            models.CheckConstraint(name="accelerator_memory_positive", condition=Q(marketed_memory_bytes__gt=0)),
            models.CheckConstraint(
                name="accelerator_usable_memory_positive",
                condition=Q(usable_memory_bytes__isnull=True) | Q(usable_memory_bytes__gt=0),
            ),
            models.CheckConstraint(name="accelerator_max_devices_positive", condition=Q(max_devices_per_node__gte=1)),
        ]

    def __str__(self) -> str:
        return self.name

    @cached_property
    def usable_memory(self) -> UsableMemory:
        """Observed in a public source, else derived from the marketed size (catalog.usable)."""
        return self.usable_memory_with()

    def usable_memory_with(self, *, verified_bytes: int | None = None, node_name: str = "") -> UsableMemory:
        """This accelerator's usable memory, a node's verified figure first when there is one."""
        return accelerator_usable_memory(
            marketed_bytes=self.marketed_memory_bytes,
            memory_type=self.memory_type,
            observed_bytes=self.usable_memory_bytes,
            observed_source=self.usable_memory_source,
            verified_bytes=verified_bytes,
            verified_source=verified_source(node_name) if verified_bytes else "",
        )


class CudaToolkit(models.Model):
    """CUDA toolkit release → the Linux driver it needs (NVIDIA release notes, Tables 2 and 3)."""

    version = models.CharField(max_length=16, unique=True, validators=[validate_version])  # "12.4.1"
    version_key = models.PositiveBigIntegerField(editable=False, db_index=True)
    label = models.CharField(max_length=40, blank=True)  # "12.4 Update 1"
    family = models.CharField(max_length=8)  # "12.x"
    min_driver_linux = models.CharField(
        max_length=24, validators=[validate_version], help_text="Driver shipped with the toolkit (full features)."
    )
    min_driver_linux_key = models.PositiveBigIntegerField(editable=False)
    minor_compat_min_driver_linux = models.CharField(
        max_length=24,
        blank=True,
        validators=[validate_version],
        help_text="Floor for minor-version compatibility within the family.",
    )
    minor_compat_min_driver_linux_key = models.PositiveBigIntegerField(null=True, blank=True, editable=False)
    source_url = models.CharField(max_length=500, blank=True)
    uncertain = models.BooleanField(default=False)

    class Meta:
        ordering = ["-version_key"]
        verbose_name = "CUDA toolkit"

    def __str__(self) -> str:
        return f"CUDA {self.version}"

    def save(self, *args, **kwargs) -> None:
        self.version_key = version_key(self.version)
        self.min_driver_linux_key = version_key(self.min_driver_linux)
        self.minor_compat_min_driver_linux_key = (
            version_key(self.minor_compat_min_driver_linux) if self.minor_compat_min_driver_linux else None
        )
        super().save(*args, **kwargs)


class PyTorchWheel(models.Model):
    """A PyTorch wheel variant (torch version × CUDA variant) and the compute capabilities it ships SASS for."""

    torch_versions = models.CharField(max_length=32)  # "2.12-2.14"
    variant = models.CharField(max_length=16)  # "cu128"
    cuda_version = models.CharField(max_length=16)  # "12.8"
    compute_capabilities = models.JSONField(default=list)  # ["7.5", "8.0", ...]
    embeds_ptx = models.BooleanField(default=False)
    source = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["torch_versions", "variant"]
        verbose_name = "PyTorch wheel"
        constraints = [
            models.UniqueConstraint(fields=["torch_versions", "variant"], name="pytorch_wheel_unique_variant"),
        ]

    def __str__(self) -> str:
        return f"torch {self.torch_versions}+{self.variant}"


def _scaled(field: str, ratio: object) -> Cast:
    """``floor(field × ratio)`` as a 64-bit integer, in exact numeric arithmetic (as catalog.usable does)."""
    product = ExpressionWrapper(
        F(field) * Value(ratio, output_field=models.DecimalField(max_digits=12, decimal_places=6)),
        output_field=models.DecimalField(max_digits=30, decimal_places=6),
    )
    return Cast(Floor(product), output_field=models.BigIntegerField())


def _derived_usable() -> Case:
    """catalog.usable.derived_usable_bytes in SQL: the memory type's ratio times the marketed size; the
    marketed size for a memory type with no rule."""
    marketed = "accelerator__marketed_memory_bytes"
    return Case(
        *[
            When(accelerator__memory_type__istartswith=kind, then=_scaled(marketed, rule.ratio))
            for kind, rule in DERIVATION_RULES.items()
        ],
        default=F(marketed),
        output_field=models.BigIntegerField(),
    )


class ConfigurationQuerySet(models.QuerySet):
    def with_memory(self) -> ConfigurationQuerySet:
        """Annotate per-device and total memory (bytes) — the accelerator's marketed capacity, or host RAM for
        CPU configurations — and usable memory per device, best evidence first (catalog.usable): the smallest
        figure verified on one of the configuration's nodes (``verified_usable_memory_bytes``, from node
        ``verified_node_name``), else the accelerator's observed figure, else the one derived from its size.
        ``Configuration.usable_memory`` then says which, with no further query."""
        per_device = Case(
            When(kind=ConfigurationKind.CPU, then=F("host_ram_bytes")),
            default=F("accelerator__marketed_memory_bytes"),
            output_field=models.BigIntegerField(),
        )
        verified_nodes = Node.objects.filter(
            configuration=OuterRef("pk"), verified_usable_memory_bytes__isnull=False
        ).order_by("verified_usable_memory_bytes", "name")
        annotated = self.annotate(
            per_device_memory_bytes=per_device,
            # 64-bit explicitly: PostgreSQL would otherwise compare the product as a 32-bit integer.
            total_memory_bytes=ExpressionWrapper(per_device * F("device_count"), output_field=models.BigIntegerField()),
            verified_usable_memory_bytes=Subquery(verified_nodes.values("verified_usable_memory_bytes")[:1]),
            verified_node_name=Subquery(verified_nodes.values("name")[:1]),
        )
        return annotated.annotate(
            usable_memory_bytes=Case(
                When(kind=ConfigurationKind.CPU, then=F("host_ram_bytes")),
                When(verified_usable_memory_bytes__isnull=False, then=F("verified_usable_memory_bytes")),
                When(accelerator__usable_memory_bytes__isnull=False, then=F("accelerator__usable_memory_bytes")),
                default=_derived_usable(),
                output_field=models.BigIntegerField(),
            )
        )

    def with_price_offer(self) -> ConfigurationQuerySet:
        """Annotate the on-demand offer that ``hourly_price_usd`` is (``price_provider``, ``price_region``,
        ``price_instance_type``, ``price_read_on``, ``price_source_url``): the Price row at that figure, the first
        by provider and region; empty for a price set by hand that no offer has. ``Configuration.price_offer``
        then reads them with no further query."""
        offer = Price.objects.filter(
            configuration=OuterRef("pk"), kind=PriceKind.ON_DEMAND, usd_per_hour=OuterRef("hourly_price_usd")
        ).order_by("provider", "region")
        fields = ("provider", "region", "instance_type", "read_on", "source_url")
        return self.annotate(**{f"price_{name}": Subquery(offer.values(name)[:1]) for name in fields})

    def in_driver_branch(self, branch: int) -> ConfigurationQuerySet:
        """NVIDIA configurations whose driver is in ``branch`` (550 → 550.x.y), by the indexed version key."""
        low, high = driver_branch_key_range(branch)
        return self.filter(
            accelerator__architecture__vendor__slug=VendorSlug.NVIDIA,
            driver_version_key__gte=low,
            driver_version_key__lt=high,
        )


class Configuration(models.Model):
    """An orderable machine: an accelerator × device count in a host with a driver (or a CPU-only host); or a
    cluster of ``node_count`` such hosts joined by a scale-out network (``device_count`` is over all of them, the
    host fields are per node)."""

    slug = models.SlugField(max_length=100, unique=True)
    name = models.CharField(max_length=160, unique=True)
    kind = models.CharField(max_length=8, choices=ConfigurationKind.choices, default=ConfigurationKind.GPU)
    accelerator = models.ForeignKey(
        Accelerator, on_delete=models.PROTECT, related_name="configurations", null=True, blank=True
    )
    device_count = models.PositiveSmallIntegerField(default=1, help_text="Devices over all the nodes.")
    nvlink_domain_size = models.PositiveSmallIntegerField(
        default=1,
        help_text="Devices joined by NVLink/NVSwitch (1 = no peer links): the scale-up domain, which may span nodes "
        "(72 in an NVL72 rack).",
    )
    node_count = models.PositiveSmallIntegerField(
        default=1, help_text="Machines the configuration spans; device_count is a multiple of it."
    )
    scale_out_fabric = models.CharField(
        max_length=120, blank=True, help_text="The network between the nodes (empty for one node)."
    )
    scale_out_gbps_per_device = models.FloatField(
        null=True, blank=True, help_text="Scale-out bandwidth per GPU between nodes, Gbit/s one direction."
    )
    host_cpu_architecture = models.CharField(
        max_length=16, choices=CpuArchitecture.choices, default=CpuArchitecture.X86_64
    )
    vcpus = models.PositiveIntegerField()
    host_ram_bytes = models.BigIntegerField()
    disk_bytes = models.BigIntegerField()
    driver_version = models.CharField(
        max_length=24, blank=True, validators=[validate_version], help_text="Installed NVIDIA/ROCm driver."
    )
    driver_version_key = models.PositiveBigIntegerField(default=0, editable=False, db_index=True)
    hourly_price_usd = models.DecimalField(
        max_digits=10,
        decimal_places=4,
        null=True,
        blank=True,
        help_text="What ranking compares: the cheapest on-demand price of its Price rows (loadcatalog sets it).",
    )
    no_price_reason = models.TextField(
        blank=True, help_text="Why no public catalog read prices this configuration (fixtures/catalog/prices.json)."
    )
    notes = models.TextField(blank=True)

    objects = ConfigurationQuerySet.as_manager()

    class Meta:
        ordering = ["kind", "accelerator__name", "device_count", "driver_version_key"]
        constraints = [
            models.CheckConstraint(name="configuration_device_count_positive", condition=Q(device_count__gte=1)),
            models.CheckConstraint(name="configuration_node_count_positive", condition=Q(node_count__gte=1)),
            models.CheckConstraint(
                # NULLIF: a node_count of 0 fails the check above, not a division by zero here
                name="configuration_devices_divide_among_nodes",
                condition=Q(Exact(Mod(F("device_count"), NullIf(F("node_count"), Value(0))), Value(0))),
            ),
            models.CheckConstraint(
                name="configuration_scale_out_positive",
                condition=Q(scale_out_gbps_per_device__isnull=True) | Q(scale_out_gbps_per_device__gt=0),
            ),
            models.CheckConstraint(name="configuration_host_ram_positive", condition=Q(host_ram_bytes__gt=0)),
            models.CheckConstraint(name="configuration_disk_positive", condition=Q(disk_bytes__gt=0)),
            models.CheckConstraint(name="configuration_vcpus_positive", condition=Q(vcpus__gte=1)),
            models.CheckConstraint(
                name="configuration_nvlink_domain_within_devices",
                condition=Q(nvlink_domain_size__gte=1) & Q(nvlink_domain_size__lte=F("device_count")),
            ),
            models.CheckConstraint(
                name="configuration_kind_matches_accelerator",
                condition=Q(kind=ConfigurationKind.GPU, accelerator__isnull=False)
                | Q(kind=ConfigurationKind.CPU, accelerator__isnull=True),
            ),
            models.CheckConstraint(
                name="configuration_price_non_negative",
                condition=Q(hourly_price_usd__isnull=True) | Q(hourly_price_usd__gte=0),
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs) -> None:
        self.driver_version_key = version_key(self.driver_version) if self.driver_version else 0
        super().save(*args, **kwargs)

    def clean(self) -> None:
        """Device counts the accelerator, the nodes and the links allow, each error on its own field."""
        errors: dict[str, str] = {}
        accelerator = None
        if self.accelerator_id is not None:
            try:
                accelerator = self.accelerator
            except Accelerator.DoesNotExist:
                accelerator = None  # clean_fields already reported the missing accelerator
        count, nodes = self.device_count, self.node_count
        whole = isinstance(count, int) and isinstance(nodes, int) and nodes >= 1
        if whole and count % nodes:
            errors["node_count"] = (
                f"device_count={count} is not a multiple of node_count={nodes}: every node holds as many devices."
            )
        elif whole and accelerator is not None and count // nodes > accelerator.max_devices_per_node:
            per_node = count // nodes
            errors["device_count"] = (
                f"device_count={count} exceeds max_devices_per_node={accelerator.max_devices_per_node} "
                f"of {accelerator.name}: a node holds no more of them."
                if nodes == 1
                else f"{per_node} devices per node (device_count={count} over node_count={nodes}) exceeds "
                f"max_devices_per_node={accelerator.max_devices_per_node} of {accelerator.name}."
            )
        domain = self.nvlink_domain_size
        if isinstance(count, int) and isinstance(domain, int) and domain > count:
            errors["nvlink_domain_size"] = (
                f"nvlink_domain_size={domain} exceeds device_count={count}: "
                "an NVLink domain cannot span more devices than the configuration has."
            )
        if isinstance(nodes, int) and nodes == 1 and (self.scale_out_fabric or self.scale_out_gbps_per_device):
            errors["scale_out_fabric"] = "a single node has no scale-out network: leave it empty with node_count=1."
        if errors:
            raise ValidationError(errors)

    @property
    def devices_per_node(self) -> int:
        """Devices in each node (``device_count`` over ``node_count``)."""
        return self.device_count // max(self.node_count or 1, 1)

    @property
    def topology(self) -> str:
        """``2 nodes × 8, InfiniBand NDR …, 400 Gb/s per GPU``; ``1 node`` for a single machine."""
        if (self.node_count or 1) <= 1:
            return "1 node"
        text = f"{self.node_count} nodes × {self.devices_per_node}"
        if self.scale_out_fabric:
            text += f", {self.scale_out_fabric}"
        if self.scale_out_gbps_per_device is not None:
            text += f", {self.scale_out_gbps_per_device:g} Gb/s per GPU"
        return text

    @cached_property
    def usable_memory(self) -> UsableMemory:
        """Usable memory per device and its evidence: verified on a node > observed > derived; host RAM for a
        CPU configuration. Rows from ``with_memory()`` carry the node's figure; others query it."""
        if self.accelerator is None:
            return host_usable_memory(self.host_ram_bytes)
        if hasattr(self, "verified_node_name"):
            verified, node_name = self.verified_usable_memory_bytes, self.verified_node_name or ""  # type: ignore[attr-defined]
        else:
            row = (
                self.nodes.filter(verified_usable_memory_bytes__isnull=False)
                .order_by("verified_usable_memory_bytes", "name")
                .values_list("verified_usable_memory_bytes", "name")
                .first()
            )
            verified, node_name = row if row else (None, "")
        return self.accelerator.usable_memory_with(verified_bytes=verified, node_name=node_name)

    @cached_property
    def price_offer(self) -> PriceOffer | None:
        """The on-demand offer ``hourly_price_usd`` is; None without a price or for one no Price row has (set by
        hand). Rows from ``with_price_offer()`` carry it; others query it."""
        if self.hourly_price_usd is None:
            return None
        if hasattr(self, "price_provider"):
            found = self.__dict__
        else:
            row = (
                self.prices.filter(kind=PriceKind.ON_DEMAND, usd_per_hour=self.hourly_price_usd)
                .order_by("provider", "region")
                .values("provider", "region", "instance_type", "read_on", "source_url")
                .first()
            )
            found = {f"price_{name}": value for name, value in (row or {}).items()}
        if not found.get("price_provider"):
            return None
        return PriceOffer(
            provider=found["price_provider"],
            region=found["price_region"],
            instance_type=found["price_instance_type"],
            read_on=found["price_read_on"],
            source_url=found["price_source_url"],
        )

    @property
    def driver_branch(self) -> str:
        """``R550`` for NVIDIA driver 550.54.15, ``ROCm 6.4`` for an AMD host; empty for CPU hosts and for a
        driver version that is blank or unreadable."""
        if not self.driver_version or self.accelerator is None:
            return ""
        if self.accelerator.architecture.vendor.slug == VendorSlug.AMD:
            return "ROCm " + ".".join(self.driver_version.split(".")[:2])
        branch = driver_branch(self.driver_version)
        return "" if branch is None else f"R{branch}"


class Price(models.Model):
    """One provider's cheapest offer of a configuration (per kind), as a public catalog listed it on the day it
    was read: what a buyer can check. Loaded from fixtures/catalog/prices.json by loadcatalog."""

    configuration = models.ForeignKey(Configuration, on_delete=models.CASCADE, related_name="prices")
    provider = models.CharField(max_length=80, help_text="Who sells it; an aggregator names its upstream cloud.")
    kind = models.CharField(max_length=16, choices=PriceKind.choices)
    usd_per_hour = models.DecimalField(
        max_digits=10, decimal_places=4, help_text="USD per hour for the whole instance (every GPU of it)."
    )
    region = models.CharField(max_length=64, help_text="The provider's cheapest region for this offer.")
    regions = models.PositiveSmallIntegerField(default=1, help_text="Regions of the provider that list the offer.")
    instance_type = models.CharField(max_length=120)
    vcpus = models.PositiveIntegerField(null=True, blank=True, help_text="The instance's vCPUs.")
    host_memory_gib = models.FloatField(null=True, blank=True, help_text="The instance's host RAM, GiB.")
    source_url = models.URLField(max_length=500, help_text="The catalog file at the commit read.")
    read_on = models.DateField(help_text="The day the price was read; stale after 90 days.")

    class Meta:
        ordering = ["configuration__slug", "kind", "usd_per_hour", "provider"]
        constraints = [
            models.UniqueConstraint(fields=["configuration", "provider", "kind"], name="price_one_per_provider_kind"),
            models.CheckConstraint(name="price_usd_positive", condition=Q(usd_per_hour__gt=0)),
            models.CheckConstraint(name="price_regions_positive", condition=Q(regions__gte=1)),
        ]

    def __str__(self) -> str:
        return f"{self.provider} {self.get_kind_display()} ${self.usd_per_hour}/h"

    @property
    def usd_per_gpu_hour(self) -> float:
        return float(self.usd_per_hour) / self.configuration.device_count

    def is_stale(self, today: date) -> bool:
        return price_is_stale(self.read_on, today)


class Node(models.Model):
    """A real machine with a vramplan worker; its inventory is what NVML (or the host probe) reported."""

    name = models.CharField(max_length=128, unique=True)
    configuration = models.ForeignKey(
        Configuration, on_delete=models.PROTECT, related_name="nodes", null=True, blank=True
    )
    probe = models.CharField(max_length=8, choices=ProbeKind.choices, default=ProbeKind.HOST)
    hostname = models.CharField(max_length=255, blank=True)
    inventory = models.JSONField(default=dict, blank=True)
    device_count = models.PositiveSmallIntegerField(default=0)
    verified_usable_memory_bytes = models.BigIntegerField(
        null=True,
        blank=True,
        help_text="Smallest usable memory of a device on this node: NVML total less the driver reserve (bytes).",
    )
    driver_version = models.CharField(max_length=24, blank=True)
    cuda_driver_version = models.CharField(max_length=16, blank=True)
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                name="node_verified_memory_positive",
                condition=Q(verified_usable_memory_bytes__isnull=True) | Q(verified_usable_memory_bytes__gt=0),
            ),
        ]

    def __str__(self) -> str:
        return self.name
