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
