"""Choices for the catalog, in one place (STYLE.md §5)."""

from django.db import models


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


class PrecisionSlug(models.TextChoices):
    """Canonical tensor-core formats. ``fp8`` is OCP e4m3/e5m2; AMD CDNA3's FNUZ variant is ``fp8_fnuz``."""

    FP64 = "fp64", "FP64"
    FP32 = "fp32", "FP32"
    TF32 = "tf32", "TF32"
    BF16 = "bf16", "BF16"
    FP16 = "fp16", "FP16"
    FP8 = "fp8", "FP8 (OCP e4m3/e5m2)"
    FP8_FNUZ = "fp8_fnuz", "FP8 FNUZ (AMD CDNA3)"
    MXFP8 = "mxfp8", "MXFP8"
    FP6 = "fp6", "FP6"
    FP4 = "fp4", "FP4 (NVFP4/MXFP4)"
    INT8 = "int8", "INT8"
    INT4 = "int4", "INT4"


MEMORY_BANDS_GB: tuple[tuple[str, str, int, int | None], ...] = (
    # (slug, label, lower bound GB inclusive, upper bound GB exclusive) on marketed per-device memory
    ("lt24", "under 24 GB", 0, 24),
    ("24-48", "24–47 GB", 24, 48),
    ("48-80", "48–79 GB", 48, 80),
    ("80-160", "80–159 GB", 80, 160),
    ("160plus", "160 GB and more", 160, None),
)
