"""The host: a CUDA workload needs a GPU, and the host's CPU architecture must match the images and wheels
(GH200/GB200 hosts are Arm: ``research/catalog-and-compat.md`` §B7 item 7)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import Reason

if TYPE_CHECKING:
    from .configuration import Facts, Requirements


def check_device(requirements: Requirements, facts: Facts) -> list[Reason]:
    """A ``runtime.device: cuda`` workload cannot run on a CPU-only configuration (nor on AMD through CUDA)."""
    if requirements.device != "cuda" or facts.has_accelerator:
        return []
    return [
        Reason(
            "device",
            f"{facts.label} has no GPU; this workload runs on CUDA",
            "choose a GPU configuration, or set runtime.device to cpu",
        )
    ]


def check_host(requirements: Requirements, facts: Facts) -> list[Reason]:
    """The host CPU architecture the workload's images and wheels are built for."""
    wanted = requirements.cpu_architecture
    if wanted is None or wanted == facts.host_cpu_architecture:
        return []
    return [
        Reason(
            "host",
            f"{facts.label} has an {facts.host_cpu_architecture} host; this workload's images are {wanted}",
            f"choose an {wanted} configuration, or build the images for {facts.host_cpu_architecture}",
        )
    ]
