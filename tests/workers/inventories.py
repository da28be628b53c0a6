"""Hand-built inventories for service tests (the probes themselves are tested against the fake NVML)."""

from __future__ import annotations

from workers.probes.model import GpuDevice, HostInfo, NodeInventory, NvmlSystem

H100_TOTAL_BYTES = 85_520_809_984
RESERVED_BYTES = 566_231_040  # the driver's reserve gpu() reports (the fake NVML's default too)


def host_info(architecture: str = "x86_64") -> HostInfo:
    return HostInfo(
        hostname="gpu-box-7",
        operating_system="Linux-6.8-x86_64-with-glibc2.36",
        architecture=architecture,
        cpu_model="AMD EPYC 9654 96-Core Processor",
        logical_cpus=192,
        usable_cpus=192,
        physical_cores=96,
        ram_total_bytes=2 * 10**12,
        ram_available_bytes=10**12,
        disk_path="/",
        disk_total_bytes=30 * 10**12,
        disk_free_bytes=20 * 10**12,
        python_version="3.11.7",
    )


def gpu(
    index: int, total_bytes: int = H100_TOTAL_BYTES, name: str = "NVIDIA H100 80GB HBM3", memory_info_version: int = 2
) -> GpuDevice:
    """A device as NVML reports it; ``memory_info_version=1`` plays a driver before R510 (no reserve apart)."""
    return GpuDevice(
        index=index,
        name=name,
        uuid=f"GPU-fa4e0000-0000-4000-8000-{index:012x}",
        total_memory_bytes=total_bytes,
        reserved_memory_bytes=RESERVED_BYTES if memory_info_version == 2 else None,
        free_memory_bytes=total_bytes - RESERVED_BYTES,
        used_memory_bytes=0 if memory_info_version == 2 else RESERVED_BYTES,
        memory_info_version=memory_info_version,
        compute_capability="9.0",
        mig_mode="disabled",
        mig_mode_pending="disabled",
        processes=(),
    )


def nvml_inventory(*devices: GpuDevice, driver: str = "550.54.15", cuda: int = 12040) -> NodeInventory:
    return NodeInventory(
        probe="nvml",
        device_type="gpu",
        host=host_info(),
        nvml=NvmlSystem(
            driver_version=driver,
            cuda_driver_version=f"{cuda // 1000}.{(cuda % 1000) // 10}",
            cuda_driver_version_int=cuda,
            nvml_version=f"12.{driver}",
            bindings_version="13.615.71",
            devices=devices,
        ),
        nvml_unavailable_reason=None,
        probed_at="2026-11-29T12:00:00+00:00",
    )


def host_inventory(architecture: str = "x86_64") -> NodeInventory:
    return NodeInventory(
        probe="host",
        device_type="cpu",
        host=host_info(architecture),
        nvml=None,
        nvml_unavailable_reason="NVML library libnvidia-ml.so.1 not found: no NVIDIA driver is installed",
        probed_at="2026-11-29T12:00:00+00:00",
    )
