"""Which nodes are live (the one heartbeat rule: heard from within three periods), and the usable memory a node
measures against."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

from catalog.models import Configuration, Node
from workers.probes.model import InventoryError, read_inventory

#: A node not heard from for this many heartbeat periods is silent (not live): the dispatcher, the reaper and the
#: heartbeat task read this one rule
SILENT_AFTER_PERIODS = 3  # the heartbeat rule of workers.tasks: a node is live when heard from within 3 periods


def heartbeat_period_s() -> float:
    return float(settings.CELERY_BEAT_SCHEDULE["node-heartbeat"]["schedule"])


def stale_after_s() -> float:
    return SILENT_AFTER_PERIODS * heartbeat_period_s()


def live_nodes(configuration: Configuration | None = None, *, now: datetime | None = None) -> models.QuerySet[Node]:
    """Nodes (of ``configuration``; None: of any) heard from within ``SILENT_AFTER_PERIODS`` heartbeat
    periods, in name order."""
    since = (now or timezone.now()) - timedelta(seconds=stale_after_s())
    nodes = Node.objects.filter(last_heartbeat_at__gte=since).order_by("name")
    return nodes if configuration is None else nodes.filter(configuration=configuration)


def node_usable_memory_bytes(node: Node | None, configuration: Configuration) -> int | None:
    """Usable memory per device, best evidence first: the node's own reading, then the catalog.

    A GPU node: NVML's total less the driver's reserve. A host-probe node: its RAM. Otherwise the
    configuration's usable figure (the accelerator's, or host RAM for a CPU configuration).
    """
    if node is not None:
        if node.verified_usable_memory_bytes:
            return int(node.verified_usable_memory_bytes)
        try:
            inventory = read_inventory(node.inventory)
        except InventoryError:  # a stored inventory that does not read: the catalog's figure, as for no inventory
            inventory = None
        if node.device_count == 0 and inventory is not None and inventory.host.ram_total_bytes > 0:
            return inventory.host.ram_total_bytes
    annotated = Configuration.objects.with_memory().filter(pk=configuration.pk).values("usable_memory_bytes").first()
    return int(annotated["usable_memory_bytes"]) if annotated and annotated["usable_memory_bytes"] else None
