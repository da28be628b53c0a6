"""A node's inventory: NVML when it works, otherwise the host probe, saying why NVML was not used."""

from __future__ import annotations

from datetime import UTC, datetime

from .host import probe_host
from .model import NodeInventory
from .nvml import NvmlUnavailable, probe_nvml


def probe_inventory(disk_path: str = "/") -> NodeInventory:
    """Probe this machine. Never raises for a missing GPU: a CPU-only node is labelled ``probe="host"``."""
    host = probe_host(disk_path)
    probed_at = datetime.now(UTC).isoformat()
    try:
        nvml = probe_nvml()
    except NvmlUnavailable as exc:
        return NodeInventory(
            probe="host",
            device_type="cpu",
            host=host,
            nvml=None,
            nvml_unavailable_reason=str(exc),
            probed_at=probed_at,
        )
    return NodeInventory(
        probe="nvml",
        device_type="gpu",
        host=host,
        nvml=nvml,
        nvml_unavailable_reason=None,
        probed_at=probed_at,
    )


def main() -> None:
    """``python -m workers.probes.inventory``: print this machine's inventory as JSON."""
    import json

    print(json.dumps(probe_inventory().as_dict(), indent=2))


if __name__ == "__main__":
    main()
