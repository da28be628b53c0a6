"""Catalog rows → the recommender's configuration views. The Django side of ``recommendations.recommend``.

A fixed number of queries for the whole catalog (``catalog.selectors.configuration_candidates``).
"""

from __future__ import annotations

from typing import Any

from catalog.models import ConfigurationQuerySet
from catalog.selectors import ConfigurationCandidate, configuration_candidates

from .plans import ConfigurationView


def configuration_view(candidate: ConfigurationCandidate) -> ConfigurationView:
    row = candidate.configuration
    accelerator = row.accelerator
    price = float(row.hourly_price_usd) if row.hourly_price_usd is not None else None
    common: dict[str, Any] = {
        "id": row.pk,
        "slug": row.slug,
        "name": row.name,
        "device_count": row.device_count,
        "nvlink_domain_size": row.nvlink_domain_size,
        "usable_bytes": candidate.usable.bytes,
        "usable_basis": str(candidate.usable.basis),
        "usable_source": candidate.usable.source,
        "facts": candidate.facts,
        "driver_version": row.driver_version,
        "hourly_price_usd": price,
        "host_ram_bytes": row.host_ram_bytes,
        "disk_bytes": row.disk_bytes,
    }
    if accelerator is None:
        return ConfigurationView(architecture=f"cpu:{row.host_cpu_architecture}", **common)
    return ConfigurationView(
        architecture=accelerator.architecture.slug,
        accelerator_name=accelerator.name,
        memory_bandwidth_gbps=accelerator.memory_bandwidth_gbps,
        dense_tflops=dict(accelerator.dense_tflops or {}),
        nvlink_bandwidth_gbps=accelerator.nvlink_bandwidth_gbps,
        max_devices_per_node=accelerator.max_devices_per_node,
        **common,
    )


def configuration_views(queryset: ConfigurationQuerySet | None = None) -> list[ConfigurationView]:
    """Every configuration (or those of ``queryset``) as the recommender sees it."""
    return [configuration_view(candidate) for candidate in configuration_candidates(queryset)]
