"""Choices for the catalog, in one place (STYLE.md §5)."""

from django.db import models

from .compat.precision import CANONICAL_PRECISIONS, PRECISION_LABELS


class VendorSlug(models.TextChoices):
    NVIDIA = "nvidia", "NVIDIA"
    AMD = "amd", "AMD"
    INTEL = "intel", "Intel"
    GENERIC = "generic", "Generic"


class ConfigurationKind(models.TextChoices):
    GPU = "gpu", "GPU server"
    CPU = "cpu", "CPU only (no accelerator)"


class CpuArchitecture(models.TextChoices):
    X86_64 = "x86_64", "x86_64"
    AARCH64 = "aarch64", "aarch64 (Arm)"


class ProbeKind(models.TextChoices):
    NVML = "nvml", "NVML (GPU devices)"
    HOST = "host", "Host only (no NVML: CPU and RAM)"


# Canonical tensor-core formats, named in one place (catalog.compat.precision). ``fp8`` is OCP e4m3/e5m2;
# AMD CDNA3's FNUZ variant is ``fp8_fnuz``.
PrecisionSlug = models.TextChoices(  # type: ignore[call-overload]  # the stubs take no (value, label) pairs
    "PrecisionSlug", [(slug.upper(), (slug, PRECISION_LABELS[slug])) for slug in CANONICAL_PRECISIONS]
)


MEMORY_BANDS_GB: tuple[tuple[str, str, int, int | None], ...] = (
    # (slug, label, lower bound GB inclusive, upper bound GB exclusive) on marketed per-device memory
    ("lt24", "under 24 GB", 0, 24),
    ("24-48", "24–47 GB", 24, 48),
    ("48-80", "48–79 GB", 48, 80),
    ("80-160", "80–159 GB", 80, 160),
    ("160plus", "160 GB and more", 160, None),
)


class PriceKind(models.TextChoices):
    ON_DEMAND = "on_demand", "on-demand"
    SPOT = "spot", "spot"
    RESERVED_1Y = "reserved_1y", "1-year reserved"
