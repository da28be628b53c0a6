"""Catalog rows → the recommender's configuration views. The Django side of ``recommendations.recommend``.

A fixed number of queries for the whole catalog (``catalog.selectors.configuration_candidates``).
"""

from __future__ import annotations

from datetime import date
from typing import Any

from django.utils import timezone

from catalog.models import ConfigurationQuerySet, PriceOffer
from catalog.selectors import ConfigurationCandidate, configuration_candidates

from .plans import ConfigurationView


def price_facts(offer: PriceOffer | None, today: date) -> dict[str, Any]:
    """The view's price fields: which offer the price is, where, when read, and whether that is too long ago."""
    if offer is None:
        return {}
    return {
        "price_provider": offer.provider,
        "price_region": offer.region,
        "price_instance_type": offer.instance_type,
        "price_read_on": offer.read_on,
        "price_source_url": offer.source_url,
        "price_stale": offer.is_stale(today),
    }


def configuration_view(candidate: ConfigurationCandidate, today: date | None = None) -> ConfigurationView:
    """One catalog configuration as the recommender sees it; ``today`` (default: the local date) dates the
    price's staleness."""
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
        **price_facts(row.price_offer, today or timezone.localdate()),
        "host_ram_bytes": row.host_ram_bytes,
        "disk_bytes": row.disk_bytes,
        "node_count": row.node_count,
        "scale_out_fabric": row.scale_out_fabric,
        "scale_out_gbps_per_device": row.scale_out_gbps_per_device,
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


def configuration_views(
    queryset: ConfigurationQuerySet | None = None, today: date | None = None
) -> list[ConfigurationView]:
    """Every configuration (or those of ``queryset``) as the recommender sees it, its price's staleness dated
    by ``today`` (default: the local date)."""
    day = today or timezone.localdate()
    return [configuration_view(candidate, day) for candidate in configuration_candidates(queryset)]
