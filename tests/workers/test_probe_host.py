"""The host probe and the inventory's fallback when there is no NVIDIA driver (pure: no database)."""

from __future__ import annotations

import ctypes
import json
import os

import psutil
import pytest

from workers.probes.host import cpu_model, normalized_architecture, probe_host
from workers.probes.inventory import probe_inventory

X86_CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model\t\t: 17
model name\t: AMD EPYC 9654 96-Core Processor
"""
ARM_CPUINFO = """processor\t: 0
BogoMIPS\t: 2000.00
CPU implementer\t: 0x41

Model\t\t: NVIDIA Grace
"""


def real_nvml_present() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


def test_cpu_model_from_cpuinfo() -> None:
    assert cpu_model(X86_CPUINFO) == "AMD EPYC 9654 96-Core Processor"
    assert cpu_model(ARM_CPUINFO) == "NVIDIA Grace"
    assert cpu_model("") != ""  # falls back to platform, never empty


@pytest.mark.parametrize(
    ("machine", "expected"),
    [("x86_64", "x86_64"), ("AMD64", "x86_64"), ("arm64", "aarch64"), ("riscv64", "riscv64")],
)
def test_architecture_uses_catalog_names(machine: str, expected: str) -> None:
    assert normalized_architecture(machine) == expected


def test_host_probe_describes_this_machine() -> None:
    host = probe_host()

    assert host.logical_cpus == psutil.cpu_count(logical=True) == os.cpu_count()
    assert 1 <= host.usable_cpus <= host.logical_cpus
    assert host.ram_total_bytes == psutil.virtual_memory().total
    assert 0 < host.ram_available_bytes <= host.ram_total_bytes
    assert 0 < host.disk_free_bytes <= host.disk_total_bytes
    assert host.cpu_model
    assert host.hostname


def test_without_nvml_the_inventory_is_the_labelled_host_probe() -> None:
    """The no-driver path for real (measurement.md §5.3): this process cannot load libnvidia-ml.so.1."""
    if real_nvml_present():
        pytest.skip("a real libnvidia-ml.so.1 is installed: the no-driver path needs a machine without one")

    inventory = probe_inventory()

    assert inventory.probe == "host"
    assert inventory.device_type == "cpu"
    assert inventory.nvml is None
    assert inventory.device_count == 0
    assert inventory.smallest_device_memory_bytes is None
    assert "libnvidia-ml.so.1 not found" in (inventory.nvml_unavailable_reason or "")
    data = json.loads(json.dumps(inventory.as_dict()))
    assert data["probe"] == "host"
    assert data["inventory_version"] == 1
    assert data["host"]["logical_cpus"] == os.cpu_count()
