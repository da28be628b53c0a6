"""Device inventory through NVIDIA's own bindings (PyPI ``nvidia-ml-py``, module ``pynvml``).

Reads what the driver reports: driver and CUDA driver version, and per device its index, name, UUID,
memory (the v2 struct, which reports the driver's reserve apart, with a fallback to v1 on drivers
before R510), compute capability, MIG mode and the compute processes using it. Anything that makes
NVML unusable raises :class:`NvmlUnavailable` with a sentence saying why, which the inventory keeps.

Research notes: docs/research/measurement.md §1.2 (calls), §1.3 (process structs), §1.5 (errors).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

from .model import GpuDevice, GpuProcess, MigMode, NvmlSystem

T = TypeVar("T")


class NvmlUnavailable(Exception):
    """NVML cannot describe this machine; ``str(exc)`` is the reason recorded in the inventory."""


def _import_pynvml() -> ModuleType:
    try:
        import pynvml
    except ImportError:
        raise NvmlUnavailable("the nvidia-ml-py package (module pynvml) is not installed") from None
    # The deprecated PyPI "pynvml" 11.x shipped its own module under the same name; gpustat refuses it
    # on the same test (wookayin/gpustat gpustat/nvml.py).
    if not hasattr(pynvml, "_nvmlGetFunctionPointer"):
        raise NvmlUnavailable(
            f"the pynvml module at {getattr(pynvml, '__file__', '?')} is not NVIDIA's nvidia-ml-py bindings"
        )
    module: ModuleType = pynvml
    return module


def _errors(nv: ModuleType, *names: str) -> tuple[type[BaseException], ...]:
    """Error classes by name; older bindings lack some (pynvml generates one per NVML_ERROR_ code)."""
    return tuple(getattr(nv, name) for name in names if hasattr(nv, name))


def _init_failure_reason(nv: ModuleType, exc: Exception) -> str:
    if isinstance(exc, _errors(nv, "NVMLError_LibraryNotFound")):
        return "NVML library libnvidia-ml.so.1 not found: no NVIDIA driver is installed on this machine"
    if isinstance(exc, _errors(nv, "NVMLError_DriverNotLoaded")):
        return "NVML found no loaded NVIDIA kernel driver (nvmlInit: Driver Not Loaded)"
    if isinstance(exc, _errors(nv, "NVMLError_NoPermission")):
        return "NVML refused access to the devices (nvmlInit: Insufficient Permissions)"
    return f"nvmlInit failed: {type(exc).__name__}: {exc}"


def cuda_version_text(version: int) -> str:
    """NVML's CUDA driver version integer as text: 12040 → "12.4" (major*1000 + minor*10)."""
    return f"{version // 1000}.{(version % 1000) // 10}"


def probe_nvml() -> NvmlSystem:
    """Read the inventory through NVML, or raise :class:`NvmlUnavailable` saying why it cannot."""
    nv = _import_pynvml()
    try:
        nv.nvmlInit()
    except nv.NVMLError as exc:
        raise NvmlUnavailable(_init_failure_reason(nv, exc)) from exc
    try:
        return _read_system(nv)
    except (nv.NVMLError, nv.NVMLLibraryMismatchError) as exc:
        raise NvmlUnavailable(f"NVML query failed: {type(exc).__name__}: {exc}") from exc
    finally:
        # The inventory was read; a failed shutdown only leaves the library loaded.
        with contextlib.suppress(nv.NVMLError):
            nv.nvmlShutdown()


def _read_system(nv: ModuleType) -> NvmlSystem:
    count = nv.nvmlDeviceGetCount()
    if count == 0:
        raise NvmlUnavailable("NVML is present but reports no devices")
    cuda = _optional(nv, lambda: _cuda_driver_version(nv))
    return NvmlSystem(
        driver_version=nv.nvmlSystemGetDriverVersion(),
        cuda_driver_version=cuda_version_text(cuda) if cuda is not None else None,
        cuda_driver_version_int=cuda,
        nvml_version=_optional(nv, nv.nvmlSystemGetNVMLVersion),
        bindings_version=_bindings_version(),
        devices=tuple(_read_device(nv, index) for index in range(count)),
    )


def _read_device(nv: ModuleType, index: int) -> GpuDevice:
    handle = nv.nvmlDeviceGetHandleByIndex(index)
    total, reserved, free, used, memory_version = _memory(nv, handle)
    capability = _optional(nv, lambda: nv.nvmlDeviceGetCudaComputeCapability(handle))
    mig_current, mig_pending = _mig_mode(nv, handle)
    processes, processes_error = _processes(nv, handle)
    return GpuDevice(
        index=index,
        name=nv.nvmlDeviceGetName(handle),
        uuid=nv.nvmlDeviceGetUUID(handle),
        total_memory_bytes=total,
        reserved_memory_bytes=reserved,
        free_memory_bytes=free,
        used_memory_bytes=used,
        memory_info_version=memory_version,
        compute_capability=f"{capability[0]}.{capability[1]}" if capability else None,
        mig_mode=mig_current,
        mig_mode_pending=mig_pending,
        processes=processes,
        processes_error=processes_error,
    )


def _memory(nv: ModuleType, handle: Any) -> tuple[int | None, int | None, int | None, int | None, int | None]:
    """(total, reserved, free, used, struct version). v2 first: v1 ``used`` includes the driver's reserve.

    nvidia-ml-py calls the v1 entry point unless given ``version=nvmlMemory_v2`` (measurement.md §0.2).
    """
    version_v2 = getattr(nv, "nvmlMemory_v2", None)
    if version_v2 is not None:
        # A driver before R510 has no nvmlDeviceGetMemoryInfo_v2: fall through to v1.
        with contextlib.suppress(
            *_errors(nv, "NVMLError_FunctionNotFound", "NVMLError_ArgumentVersionMismatch", "NVMLError_NotSupported")
        ):
            info = nv.nvmlDeviceGetMemoryInfo(handle, version=version_v2)
            return _positive(info.total), info.reserved, info.free, info.used, 2
    try:
        info = nv.nvmlDeviceGetMemoryInfo(handle)
    except _errors(nv, "NVMLError_NotSupported"):
        # Unified-memory parts (GB10, Orin, Thor) have no framebuffer figures (nvitop api/device.py).
        return None, None, None, None, None
    return _positive(info.total), None, info.free, info.used, 1


def _positive(value: int) -> int | None:
    return value if value > 0 else None


def _mig_mode(nv: ModuleType, handle: Any) -> tuple[MigMode, MigMode]:
    try:
        current, pending = nv.nvmlDeviceGetMigMode(handle)
    except nv.NVMLError:
        return "unsupported", "unsupported"  # NOT_SUPPORTED on GPUs without MIG
    enable = getattr(nv, "NVML_DEVICE_MIG_ENABLE", 1)
    return ("enabled" if current == enable else "disabled"), ("enabled" if pending == enable else "disabled")


def _processes(nv: ModuleType, handle: Any) -> tuple[tuple[GpuProcess, ...] | None, str | None]:
    try:
        try:
            raw = nv.nvmlDeviceGetComputeRunningProcesses(handle)  # the _v3 entry point
        except nv.NVMLLibraryMismatchError:
            raw = nv.nvmlDeviceGetComputeRunningProcesses_v2(handle)  # drivers before 510.39 have no _v3
    except (nv.NVMLError, nv.NVMLLibraryMismatchError) as exc:
        return None, f"{type(exc).__name__}: {exc}"
    return tuple(GpuProcess(pid=int(p.pid), used_memory_bytes=p.usedGpuMemory) for p in raw), None


def _cuda_driver_version(nv: ModuleType) -> int:
    try:
        return int(nv.nvmlSystemGetCudaDriverVersion_v2())
    except _errors(nv, "NVMLError_FunctionNotFound"):
        return int(nv.nvmlSystemGetCudaDriverVersion())


def _optional(nv: ModuleType, read: Callable[[], T]) -> T | None:
    """A fact that some drivers or devices do not report: None instead of failing the inventory."""
    try:
        return read()
    except (nv.NVMLError, nv.NVMLLibraryMismatchError):
        return None


def _bindings_version() -> str | None:
    try:
        return importlib.metadata.version("nvidia-ml-py")
    except importlib.metadata.PackageNotFoundError:
        return None


# The runner's sampler (workers.runner.sampling) opens NVML the same way and says why it cannot alike.
import_pynvml = _import_pynvml
init_failure_reason = _init_failure_reason
nvml_errors = _errors
cuda_driver_version = _cuda_driver_version
