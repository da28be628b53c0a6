"""Catalog reads for the recommender: configurations with their usable memory and compatibility facts.

The rules themselves are pure (``catalog.compat``, ``catalog.usable``); this module only turns catalog rows
into their inputs, in a constant number of queries however many configurations there are.
"""

from __future__ import annotations

from dataclasses import dataclass

from .compat import Facts, Toolkit, Wheel
from .models import Configuration, ConfigurationQuerySet, CudaToolkit, PyTorchWheel
from .usable import UsableMemory


@dataclass(frozen=True)
class CompatTables:
    """The catalog-wide tables every configuration's facts share."""

    toolkits: tuple[Toolkit, ...]
    wheels: tuple[Wheel, ...]


def compat_tables() -> CompatTables:
    """CUDA toolkits and PyTorch wheels from the catalog (two queries)."""
    toolkits = CudaToolkit.objects.values(
        "version", "family", "min_driver_linux", "minor_compat_min_driver_linux", "uncertain"
    )
    wheels = PyTorchWheel.objects.values(
        "torch_versions", "variant", "cuda_version", "compute_capabilities", "embeds_ptx"
    )
    return CompatTables(tuple(map(Toolkit.from_row, toolkits)), tuple(map(Wheel.from_row, wheels)))


def configuration_facts(configuration: Configuration, tables: CompatTables) -> Facts:
    """What ``configuration`` offers, as ``catalog.compat.check_configuration`` reads it."""
    accelerator = configuration.accelerator
    if accelerator is None:
        return Facts(
            label=f"{configuration.name} (CPU only)",
            host_cpu_architecture=configuration.host_cpu_architecture,
            toolkits=tables.toolkits,
            wheels=tables.wheels,
        )
    architecture = accelerator.architecture
    fields = {
        "vendor": architecture.vendor.slug,
        "compute_capability_major": architecture.compute_capability_major,
        "compute_capability_minor": architecture.compute_capability_minor,
        "gfx_target": architecture.gfx_target,
        "precisions": [p.slug for p in architecture.precisions.all()],
    }
    major, minor = architecture.compute_capability_major, architecture.compute_capability_minor
    target = f"CC {major}.{minor}" if major is not None else architecture.gfx_target
    return Facts.of_device(
        f"{accelerator.name} ({architecture.family}, {target})",
        fields,
        driver_version=configuration.driver_version,
        host_cpu_architecture=configuration.host_cpu_architecture,
        toolkits=tables.toolkits,
        wheels=tables.wheels,
    )


def configurations_for_recommendation(queryset: ConfigurationQuerySet | None = None) -> ConfigurationQuerySet:
    """Configurations annotated with their memory (``with_memory()``) and with everything
    :func:`configuration_facts` and ``Configuration.usable_memory`` read already loaded: a fixed number of
    queries for the whole list."""
    rows = queryset if queryset is not None else Configuration.objects.all()
    return (
        rows.with_memory()
        .select_related("accelerator__architecture__vendor")
        .prefetch_related("accelerator__architecture__precisions")
    )


@dataclass(frozen=True)
class ConfigurationCandidate:
    """One configuration as the recommender weighs it."""

    configuration: Configuration
    usable: UsableMemory
    facts: Facts


def configuration_candidates(queryset: ConfigurationQuerySet | None = None) -> list[ConfigurationCandidate]:
    """Every configuration (or those of ``queryset``) with its usable memory and compatibility facts."""
    tables = compat_tables()
    return [
        ConfigurationCandidate(row, row.usable_memory, configuration_facts(row, tables))
        for row in configurations_for_recommendation(queryset)
    ]
