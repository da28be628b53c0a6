"""The NVML probe on a real GPU node. Skipped elsewhere: a green CPU run is no GPU acceptance."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from workers.probes.inventory import probe_inventory

from .conftest import require_real_gpu

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


@pytest.fixture(scope="module")
def gpu_inventory():
    require_real_gpu()
    return probe_inventory()


def test_real_gpu_inventory(gpu_inventory) -> None:
    assert gpu_inventory.probe == "nvml"
    assert gpu_inventory.device_count >= 1
    assert gpu_inventory.driver_version
    for device in gpu_inventory.devices:
        assert device.uuid.startswith(("GPU-", "MIG-"))
        assert device.total_memory_bytes is None or device.total_memory_bytes > 0
        if device.memory_info_version == 2 and device.total_memory_bytes:
            assert device.reserved_memory_bytes is not None
            # NVIDIA's docs disagree on whether v2 `used` includes the reserve (R525 says yes, nvml.h
            # says "allocated"): accept either reading, but one of them must add up.
            parts = device.free_memory_bytes + device.used_memory_bytes
            assert device.total_memory_bytes in (parts, parts + device.reserved_memory_bytes)
            assert device.usable_memory_bytes == device.total_memory_bytes - device.reserved_memory_bytes
            assert device.usable_memory_basis == "total-reserved"
    usable = [d.usable_memory_bytes for d in gpu_inventory.devices if d.usable_memory_bytes]
    assert gpu_inventory.smallest_device_usable_memory_bytes == (min(usable) if usable else None)


def test_real_gpu_inventory_agrees_with_nvidia_smi(gpu_inventory) -> None:
    if shutil.which("nvidia-smi") is None:
        pytest.skip("nvidia-smi is not installed")
    out = subprocess.check_output(
        ["nvidia-smi", "--query-gpu=index,uuid,memory.total,driver_version", "--format=csv,noheader,nounits"],
        text=True,
    )
    rows = [[cell.strip() for cell in line.split(",")] for line in out.strip().splitlines()]
    by_uuid = {d.uuid: d for d in gpu_inventory.devices}
    assert len(rows) == gpu_inventory.device_count
    for _index, uuid, total_mib, driver in rows:
        device = by_uuid[uuid]
        assert device.total_memory_bytes // 2**20 == int(total_mib)
        assert driver == gpu_inventory.driver_version
