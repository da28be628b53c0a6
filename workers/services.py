"""Node registration: the Django side of a heartbeat (HackSoftware style: one service, thin callers).

The node row is written through the catalog's node services (``catalog.services.node_create`` /
``node_update``), the path the admin and the API write nodes by too."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from catalog.choices import ConfigurationKind, ProbeKind
from catalog.models import Configuration, Node
from catalog.services import node_create, node_update
from catalog.units import driver_branch
from workers.probes.model import HostInfo, NodeInventory

# NVML reports binary capacity, vendors market decimal: H100 80GB → 85,520,809,984 B (6.9% above 80e9),
# A100 80GB → 85,899,345,920 B (7.4% above). Measured against the larger of the two, both are within 7%.
MEMORY_MATCH_TOLERANCE = 0.07


def _memory_matches(reported_bytes: int, catalog_bytes: int) -> bool:
    return abs(reported_bytes - catalog_bytes) <= MEMORY_MATCH_TOLERANCE * max(reported_bytes, catalog_bytes)


def node_configuration_match(inventory: NodeInventory) -> Configuration | None:
    """The one catalog configuration this inventory describes, or None when none or several fit.

    NVML device names and catalog accelerator names do not line up reliably ("NVIDIA H100 80GB HBM3"
    vs "H100 SXM5 80GB"), so a GPU node matches on device count and per-device memory (NVML's total,
    reserve included, against the catalog's usable figure where known, else marketed; the reserve is
    under 1% of that) within 7%, and on compute capability where both sides
    know it (exact facts, so A100 80GB and H100 80GB stay apart). When several remain, the driver
    branch (R550 for 550.54.15) may single one out. Otherwise None: staff assign it in the admin.
    A host-probe node matches the one CPU-only configuration that describes its host (``host_configuration_match``).
    """
    if inventory.probe == "host":
        return host_configuration_match(inventory.host)

    reported = inventory.smallest_device_memory_bytes
    if reported is None:
        return None
    capabilities = {d.compute_capability for d in inventory.devices}
    capability = capabilities.pop() if len(capabilities) == 1 else None
    candidates = (
        Configuration.objects.with_memory()
        .select_related("accelerator__architecture__vendor")  # the match's driver_branch reads the vendor
        .filter(kind=ConfigurationKind.GPU, device_count=inventory.device_count)
    )
    matches = [
        c for c in candidates if _memory_matches(reported, c.usable_memory_bytes) and _capability_matches(capability, c)
    ]
    branch = driver_branch(inventory.driver_version)
    if len(matches) > 1 and branch is not None:
        matches = [c for c in matches if driver_branch(c.driver_version) == branch]
    return matches[0] if len(matches) == 1 else None


def host_configuration_match(host: HostInfo) -> Configuration | None:
    """The one CPU-only configuration this host is: the same CPU architecture, as many vCPUs (logical CPUs) and its
    RAM within 7 % (what the kernel reports as MemTotal is a little below what a cloud sells). None when none or
    several are: a 2-vCPU machine is not the catalog's 16-vCPU, 64 GiB configuration, and a job ordered on that
    must not run here (``python manage.py localconfiguration`` adds one for this machine)."""
    candidates = Configuration.objects.filter(
        kind=ConfigurationKind.CPU, host_cpu_architecture=host.architecture, vcpus=host.logical_cpus
    )
    matches = [c for c in candidates if _memory_matches(host.ram_total_bytes, c.host_ram_bytes)]
    return matches[0] if len(matches) == 1 else None


def _capability_matches(capability: str | None, configuration: Configuration) -> bool:
    catalog = configuration.accelerator.architecture.compute_capability if configuration.accelerator else None
    return capability is None or catalog is None or capability == catalog


def node_heartbeat_record(name: str, inventory: NodeInventory) -> Node:
    """Create or update the node called ``name`` from its inventory, stamped with the current time.

    ``verified_usable_memory_bytes`` is the smallest device's total less the driver's reserve, or its
    total where the driver reports no reserve; ``inventory["usable_memory_basis"]`` says which.

    A new node is matched to a catalog configuration (see :func:`node_configuration_match`); an
    existing node keeps whatever configuration it has, so staff's assignment is never overwritten.
    """
    max_length = Node._meta.get_field("name").max_length
    assert max_length is not None, "Node.name is a CharField(max_length=128)"
    if not name or len(name) > max_length:
        raise ValueError(f"node name {name!r} must be 1 to 128 characters; set VRAMPLAN_NODE_NAME.")
    values = {
        "probe": ProbeKind.NVML if inventory.probe == "nvml" else ProbeKind.HOST,
        "hostname": inventory.host.hostname[:255],
        "inventory": inventory.as_dict(),
        "device_count": inventory.device_count,
        "verified_usable_memory_bytes": inventory.smallest_device_usable_memory_bytes,  # basis in the inventory
        "driver_version": (inventory.driver_version or "")[:24],
        "cuda_driver_version": (inventory.cuda_driver_version or "")[:16],
        "last_heartbeat_at": timezone.now(),
    }
    with transaction.atomic():
        node = Node.objects.select_for_update().filter(name=name).first()
        if node is not None:
            return node_update(node=node, **values)
        try:
            with transaction.atomic():
                return node_create(name=name, configuration=node_configuration_match(inventory), **values)
        except (IntegrityError, ValidationError):  # the same node's other first heartbeat created it meanwhile
            node = Node.objects.select_for_update().filter(name=name).first()
            if node is None:
                raise
            return node_update(node=node, **values)
