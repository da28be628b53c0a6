"""What a node reports about itself: frozen values with the unit in every field name.

Pure: no Django, no Celery (an import-linter contract enforces it), so the same values serve the
Celery heartbeat, the ``vramplan-measure`` CLI and tests.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

INVENTORY_VERSION = 1  # bump when a field changes meaning; stored with every inventory

ProbeName = Literal["nvml", "host"]
DeviceType = Literal["gpu", "cpu"]
MigMode = Literal["enabled", "disabled", "unsupported"]
UsableMemoryBasis = Literal["total-reserved", "total (driver before R510 reports no reserve)"]

#: How a usable figure was found: NVML's total less the driver's reserve (the v2 memory struct) …
USABLE_TOTAL_LESS_RESERVED: UsableMemoryBasis = "total-reserved"
#: … or the total alone, where the v1 struct (drivers before R510) reports no reserve apart.
USABLE_TOTAL_ONLY: UsableMemoryBasis = "total (driver before R510 reports no reserve)"


@dataclass(frozen=True)
class GpuProcess:
    """A compute process NVML lists on a device. PIDs are host PIDs (the driver ignores PID namespaces)."""

    pid: int
    used_memory_bytes: int | None  # None where the driver cannot say (NVML_VALUE_NOT_AVAILABLE, WDDM)


@dataclass(frozen=True)
class GpuDevice:
    """One device as NVML reports it.

    ``index`` is NVML's order, which is CUDA's only with CUDA_DEVICE_ORDER=PCI_BUS_ID.
    """

    index: int
    name: str  # "NVIDIA H100 80GB HBM3"
    uuid: str  # "GPU-…": the stable key for a device
    total_memory_bytes: int | None  # None on unified-memory parts where NVML has no framebuffer figure
    reserved_memory_bytes: int | None  # driver/firmware reserve; None with the v1 struct (driver < R510)
    free_memory_bytes: int | None
    used_memory_bytes: int | None  # v2: allocated only; v1: allocated + reserved (see memory_info_version)
    memory_info_version: int | None  # 2 = nvmlMemory_v2_t, 1 = nvmlMemory_t, None = not supported
    compute_capability: str | None  # "9.0"
    mig_mode: MigMode
    mig_mode_pending: MigMode
    processes: tuple[GpuProcess, ...] | None  # None when the process list could not be read
    processes_error: str | None = None

    @property
    def usable_memory_bytes(self) -> int | None:
        """What a process may allocate on an empty device: the total less the driver's reserve.

        The total alone where the driver reports no reserve (v1 struct); None without a total.
        """
        if self.total_memory_bytes is None:
            return None
        if self._reserve_known:
            return self.total_memory_bytes - (self.reserved_memory_bytes or 0)
        return self.total_memory_bytes

    @property
    def usable_memory_basis(self) -> UsableMemoryBasis | None:
        if self.total_memory_bytes is None:
            return None
        return USABLE_TOTAL_LESS_RESERVED if self._reserve_known else USABLE_TOTAL_ONLY

    @property
    def _reserve_known(self) -> bool:
        reserved, total = self.reserved_memory_bytes, self.total_memory_bytes
        return reserved is not None and total is not None and 0 <= reserved < total


@dataclass(frozen=True)
class NvmlSystem:
    """System-wide NVML facts and the devices it sees."""

    driver_version: str  # "550.54.15"
    cuda_driver_version: str | None  # "12.4": the highest CUDA the driver supports
    cuda_driver_version_int: int | None  # 12040, as NVML returns it
    nvml_version: str | None  # "12.550.54.15"
    bindings_version: str | None  # the nvidia-ml-py package that read it
    devices: tuple[GpuDevice, ...]


@dataclass(frozen=True)
class HostInfo:
    """The host machine, always probed: GPU nodes need host RAM and disk checked too."""

    hostname: str
    operating_system: str  # platform.platform()
    architecture: str  # "x86_64" or "aarch64" (catalog.choices.CpuArchitecture values)
    cpu_model: str
    logical_cpus: int
    usable_cpus: int  # CPUs this process may run on (affinity / cpuset), <= logical_cpus
    physical_cores: int | None
    ram_total_bytes: int
    ram_available_bytes: int
    disk_path: str
    disk_total_bytes: int
    disk_free_bytes: int
    python_version: str


@dataclass(frozen=True)
class NodeInventory:
    """A node's inventory: NVML devices when NVML works, otherwise the host (CPU) probe, clearly labelled."""

    probe: ProbeName
    device_type: DeviceType
    host: HostInfo
    nvml: NvmlSystem | None
    nvml_unavailable_reason: str | None  # why the host probe was used; None when probe == "nvml"
    probed_at: str  # ISO 8601, UTC

    @property
    def devices(self) -> tuple[GpuDevice, ...]:
        return self.nvml.devices if self.nvml else ()

    @property
    def device_count(self) -> int:
        """GPU devices; 0 for a host-probe node."""
        return len(self.devices)

    @property
    def smallest_device_memory_bytes(self) -> int | None:
        """The smallest total memory a device reports (driver reserve included). None without NVML."""
        totals = [d.total_memory_bytes for d in self.devices if d.total_memory_bytes]
        return min(totals) if totals else None

    @property
    def smallest_device_usable_memory_bytes(self) -> int | None:
        """The smallest usable memory (total less reserve) a device reports: what one shard may count on."""
        usable = [d.usable_memory_bytes for d in self.devices if d.usable_memory_bytes]
        return min(usable) if usable else None

    @property
    def usable_memory_basis(self) -> UsableMemoryBasis | None:
        """How :attr:`smallest_device_usable_memory_bytes` was found; the total alone if any device lacks a reserve."""
        bases = {d.usable_memory_basis for d in self.devices if d.usable_memory_basis}
        if not bases:
            return None
        return USABLE_TOTAL_ONLY if USABLE_TOTAL_ONLY in bases else USABLE_TOTAL_LESS_RESERVED

    @property
    def driver_version(self) -> str | None:
        return self.nvml.driver_version if self.nvml else None

    @property
    def cuda_driver_version(self) -> str | None:
        return self.nvml.cuda_driver_version if self.nvml else None

    @staticmethod
    def from_dict(data: object) -> NodeInventory:
        """The inventory ``as_dict`` wrote (see :func:`read_inventory`); an empty one is an InventoryError too."""
        inventory = read_inventory(data)
        if inventory is None:
            raise InventoryError("inventory: empty (the node has not reported one)")
        return inventory

    def as_dict(self) -> dict[str, Any]:
        """JSON-serializable (tuples become lists), with the version of this layout, the device count, each
        device's usable memory, and the smallest usable memory with its basis (None without NVML)."""
        data: dict[str, Any] = _lists(dataclasses.asdict(self))
        data["inventory_version"] = INVENTORY_VERSION
        data["device_count"] = self.device_count
        for device, device_data in zip(self.devices, data["nvml"]["devices"] if self.nvml else [], strict=True):
            device_data["usable_memory_bytes"] = device.usable_memory_bytes
        data["usable_memory_bytes"] = self.smallest_device_usable_memory_bytes
        data["usable_memory_basis"] = self.usable_memory_basis
        return data


def _lists(value: Any) -> Any:
    """dataclasses.asdict keeps tuples as tuples; JSON (and a JSONField read back) has lists."""
    if isinstance(value, dict):
        return {key: _lists(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_lists(item) for item in value]
    return value


# --------------------------------------------------------------------------------------------------
# Reading an inventory back (a node's stored ``inventory`` JSON): the one typed reader of that layout


class InventoryError(ValueError):
    """A stored or sent inventory that does not read as :class:`NodeInventory`; the message names the field."""


class _Fields:
    """Typed access to one JSON object of the layout, every error naming its dotted path."""

    def __init__(self, data: object, path: str) -> None:
        if not isinstance(data, dict):
            raise InventoryError(f"{path}: expected an object, got {_kind(data)}")
        self.data, self.path = data, path

    def _get(self, name: str, optional: bool) -> Any:
        if name not in self.data and not optional:
            raise InventoryError(f"{self.path}.{name}: missing")
        return self.data.get(name)

    def text(self, name: str, *, optional: bool = False) -> Any:
        value = self._get(name, optional)
        if value is None and optional:
            return None
        if not isinstance(value, str):
            raise InventoryError(f"{self.path}.{name}: expected a string, got {_kind(value)}")
        return value

    def count(self, name: str, *, optional: bool = False) -> Any:
        value = self._get(name, optional)
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InventoryError(f"{self.path}.{name}: expected a whole number ≥ 0, got {_kind(value)}")
        return value

    def choice(self, name: str, allowed: tuple[str, ...]) -> Any:
        value = self._get(name, False)
        if value not in allowed:
            raise InventoryError(f"{self.path}.{name}: expected one of {', '.join(allowed)}, got {value!r}")
        return value

    def child(self, name: str, *, optional: bool = False) -> _Fields | None:
        value = self._get(name, optional)
        return None if value is None and optional else _Fields(value, f"{self.path}.{name}")

    def children(self, name: str, *, optional: bool = False) -> list[_Fields] | None:
        value = self._get(name, optional)
        if value is None and optional:
            return None
        if not isinstance(value, list):
            raise InventoryError(f"{self.path}.{name}: expected a list, got {_kind(value)}")
        return [_Fields(item, f"{self.path}.{name}[{index}]") for index, item in enumerate(value)]


def _kind(value: object) -> str:
    return "null" if value is None else f"{type(value).__name__} {value!r}"[:80]


_MIG_MODES: tuple[str, ...] = ("enabled", "disabled", "unsupported")


def _device(f: _Fields) -> GpuDevice:
    processes = f.children("processes", optional=True)
    return GpuDevice(
        index=f.count("index"),
        name=f.text("name"),
        uuid=f.text("uuid"),
        total_memory_bytes=f.count("total_memory_bytes", optional=True),
        reserved_memory_bytes=f.count("reserved_memory_bytes", optional=True),
        free_memory_bytes=f.count("free_memory_bytes", optional=True),
        used_memory_bytes=f.count("used_memory_bytes", optional=True),
        memory_info_version=f.count("memory_info_version", optional=True),
        compute_capability=f.text("compute_capability", optional=True),
        mig_mode=f.choice("mig_mode", _MIG_MODES),
        mig_mode_pending=f.choice("mig_mode_pending", _MIG_MODES),
        processes=None
        if processes is None
        else tuple(GpuProcess(pid=p.count("pid"), used_memory_bytes=p.count("used_memory_bytes", optional=True))
                   for p in processes),
        processes_error=f.text("processes_error", optional=True),
    )  # fmt: skip


def _nvml(f: _Fields) -> NvmlSystem:
    return NvmlSystem(
        driver_version=f.text("driver_version"),
        cuda_driver_version=f.text("cuda_driver_version", optional=True),
        cuda_driver_version_int=f.count("cuda_driver_version_int", optional=True),
        nvml_version=f.text("nvml_version", optional=True),
        bindings_version=f.text("bindings_version", optional=True),
        devices=tuple(_device(d) for d in f.children("devices") or []),
    )


def _host(f: _Fields) -> HostInfo:
    return HostInfo(
        hostname=f.text("hostname"),
        operating_system=f.text("operating_system"),
        architecture=f.text("architecture"),
        cpu_model=f.text("cpu_model"),
        logical_cpus=f.count("logical_cpus"),
        usable_cpus=f.count("usable_cpus"),
        physical_cores=f.count("physical_cores", optional=True),
        ram_total_bytes=f.count("ram_total_bytes"),
        ram_available_bytes=f.count("ram_available_bytes"),
        disk_path=f.text("disk_path"),
        disk_total_bytes=f.count("disk_total_bytes"),
        disk_free_bytes=f.count("disk_free_bytes"),
        python_version=f.text("python_version"),
    )


def read_inventory(data: object) -> NodeInventory | None:
    """The inventory :meth:`NodeInventory.as_dict` wrote, read back; None for a node that never reported one
    (``{}`` or null). Derived keys (``device_count``, each ``usable_memory_bytes``, ``usable_memory_basis``)
    are recomputed from the facts, not trusted. Raises :class:`InventoryError` naming the first bad field."""
    if data is None or data == {}:
        return None
    f = _Fields(data, "inventory")
    version = f.data.get("inventory_version", INVENTORY_VERSION)
    if version != INVENTORY_VERSION:
        raise InventoryError(f"inventory.inventory_version: this reader knows {INVENTORY_VERSION}, got {version!r}")
    probe = f.choice("probe", ("nvml", "host"))
    nvml = f.child("nvml", optional=True)
    if (probe == "nvml") != (nvml is not None):
        raise InventoryError(f"inventory.nvml: {'missing' if nvml is None else 'present'} for probe {probe!r}")
    host = f.child("host")
    assert host is not None
    return NodeInventory(
        probe=probe,
        device_type=f.choice("device_type", ("gpu", "cpu")),
        host=_host(host),
        nvml=_nvml(nvml) if nvml is not None else None,
        nvml_unavailable_reason=f.text("nvml_unavailable_reason", optional=True),
        probed_at=f.text("probed_at"),
    )
