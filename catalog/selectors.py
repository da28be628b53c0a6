"""Catalog reads for the recommender: configurations with their usable memory and compatibility facts.

The rules themselves are pure (``catalog.compat``, ``catalog.usable``); this module only turns catalog rows
into their inputs, in a constant number of queries however many configurations there are.

``catalog_version()`` says whether the catalog changed, for callers that keep what they built from it (the
recommender's per-process configuration views): see there.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import Model
from django.db.models.signals import m2m_changed, post_delete, post_save

from .compat import Facts, Toolkit, Wheel
from .models import (
    Accelerator,
    Architecture,
    Configuration,
    ConfigurationQuerySet,
    CudaToolkit,
    Node,
    Precision,
    Price,
    PyTorchWheel,
    Vendor,
)
from .usable import UsableMemory

logger = logging.getLogger(__name__)


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
    """Configurations annotated with their memory (``with_memory()``) and price offer (``with_price_offer()``),
    with everything :func:`configuration_facts`, ``Configuration.usable_memory`` and
    ``Configuration.price_offer`` read already loaded: a fixed number of queries for the whole list."""
    rows = queryset if queryset is not None else Configuration.objects.all()
    return (
        rows.with_memory()
        .with_price_offer()
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


# --- has the catalog changed? --------------------------------------------------------------------------

#: What the recommender's views are built from, apart from nodes (see ``catalog_version``); a price reload
#: (loadcatalog) changes Price rows and each configuration's price together.
CATALOG_MODELS: tuple[type[Model], ...] = (
    Vendor,
    Precision,
    Architecture,
    Architecture.precisions.through,
    Accelerator,
    Configuration,
    Price,
    CudaToolkit,
    PyTorchWheel,
)
CHANGES_KEY = "vramplan:catalog:changes"


def catalog_changes() -> int | None:
    """The catalog-write counter in Django's cache (shared by every process when the cache is); None when
    the cache cannot be read."""
    try:
        return int(cache.get_or_set(CHANGES_KEY, 0, timeout=None) or 0)
    except Exception:  # a cache that is down must not fail a read; the caller just does not reuse anything
        logger.warning("the cache cannot be read: catalog views are rebuilt on every request", exc_info=True)
        return None


def _count_change() -> None:
    try:
        cache.add(CHANGES_KEY, 0, timeout=None)
        cache.incr(CHANGES_KEY)
    except Exception:
        logger.warning("the cache cannot be written: a catalog change is seen by the fingerprint or age", exc_info=True)


def catalog_written(sender: type[Model], **kwargs: Any) -> None:
    """A catalog row was saved or deleted (or an architecture's precisions changed): count it now, and
    again when the transaction commits, so that views built from the data before the commit are not kept."""
    if str(kwargs.get("action", "post_")).startswith("pre_"):
        return
    _count_change()
    if connection.in_atomic_block:
        transaction.on_commit(_count_change)


for _model in CATALOG_MODELS:
    post_save.connect(catalog_written, sender=_model, dispatch_uid=f"catalog-written-save-{_model._meta.label}")
    post_delete.connect(catalog_written, sender=_model, dispatch_uid=f"catalog-written-delete-{_model._meta.label}")
m2m_changed.connect(catalog_written, sender=Architecture.precisions.through, dispatch_uid="catalog-written-m2m")


def _fingerprint_sql() -> str:
    """One query: row count and highest id of every catalog table, and what nodes add to the views (the
    configuration each serves and the usable memory it verified), summed: numbers only, so it is the same
    SQL on PostgreSQL and SQLite."""
    quote = connection.ops.quote_name
    parts = []
    for model in CATALOG_MODELS:
        table = quote(model._meta.db_table)
        parts += [f"(SELECT COUNT(*) FROM {table})", f"(SELECT MAX(id) FROM {table})"]
    node = quote(Node._meta.db_table)
    configuration_id = quote(str(Node._meta.get_field("configuration").column))
    verified = quote(str(Node._meta.get_field("verified_usable_memory_bytes").column))
    parts += [
        f"(SELECT COUNT(*) FROM {node} WHERE {configuration_id} IS NOT NULL AND {verified} IS NOT NULL)",
        f"(SELECT SUM({configuration_id}) FROM {node} WHERE {verified} IS NOT NULL)",
        f"(SELECT SUM({verified}) FROM {node} WHERE {configuration_id} IS NOT NULL)",
    ]
    return "SELECT " + ", ".join(parts)


def catalog_version() -> tuple[Any, ...] | None:
    """Changes whenever what ``configuration_candidates`` reads changes, as far as this process can see.

    Two parts: the write counter (``catalog_changes``: every save and delete of a catalog row through the
    ORM, in any process that shares this cache: with a per-process cache, this process only), and a
    fingerprint from the database in one query (rows added or removed anywhere, by any means, and the
    node memory that ``Configuration.objects.with_memory()`` prefers). What neither sees (an
    ``update()`` or SQL that changes a value in place, in a process whose cache is not shared) is only
    caught by the caller's maximum age. None when the cache cannot be read: nothing may be reused.
    """
    changes = catalog_changes()
    if changes is None:
        return None
    with connection.cursor() as cursor:
        cursor.execute(_fingerprint_sql())
        row = cursor.fetchone()
    return (changes, *row)
