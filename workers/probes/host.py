"""The host probe: CPU, RAM and disk through psutil and platform. Runs on every node, GPU or not."""

from __future__ import annotations

import os
import platform
import socket
from pathlib import Path

import psutil

from .model import HostInfo

# platform.machine() spellings → catalog.choices.CpuArchitecture values
_ARCHITECTURES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}


def normalized_architecture(machine: str) -> str:
    """``AMD64`` → ``x86_64``, ``arm64`` → ``aarch64``; anything else as reported, lower-cased."""
    return _ARCHITECTURES.get(machine.lower(), machine.lower())


def cpu_model(cpuinfo: str | None = None) -> str:
    """The CPU model name from /proc/cpuinfo (x86 "model name", Arm "Model"/"Hardware"), else platform's."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            cpuinfo = ""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and value.strip():
            fields.setdefault(key.strip().lower(), value.strip())
    for key in ("model name", "model", "hardware", "cpu model", "processor"):
        value = fields.get(key, "")
        if value and not value.isdigit():  # x86 "processor: 0" is an index, not a name
            return value
    return platform.processor() or platform.machine() or "unknown"


def _usable_cpus(logical: int) -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return logical


def probe_host(disk_path: str = "/") -> HostInfo:
    """Describe this machine. ``disk_path`` is where model files live (the root file system by default)."""
    memory = psutil.virtual_memory()
    disk = psutil.disk_usage(disk_path)
    logical = psutil.cpu_count(logical=True) or os.cpu_count() or 1
    return HostInfo(
        hostname=socket.gethostname(),
        operating_system=platform.platform(),
        architecture=normalized_architecture(platform.machine()),
        cpu_model=cpu_model(),
        logical_cpus=logical,
        usable_cpus=_usable_cpus(logical),
        physical_cores=psutil.cpu_count(logical=False),
        ram_total_bytes=memory.total,
        ram_available_bytes=memory.available,
        disk_path=disk_path,
        disk_total_bytes=disk.total,
        disk_free_bytes=disk.free,
        python_version=platform.python_version(),
    )
