"""Parent-side memory sampling while a child runs: NVML device memory, and the child tree's host RSS.

* Device view: ``nvmlDeviceGetMemoryInfo`` with the v2 struct (``used`` without the driver's reserve;
  v1 on drivers before R510, labelled), polled on a thread at a fixed interval with a drift-free
  schedule. Polling can miss a spike shorter than the interval, so the result carries the achieved
  sample count and the largest gap between samples: "a spike shorter than max_gap_s may be missed"
  is explicit (measurement.md §1.9).
* Accounting: where the driver's accounting mode is on, ``maxMemoryUsage`` per PID is a high-water
  mark polling cannot miss; read after the child exits for every PID seen in its tree.
* Host view: the RSS of the child and all its descendants, summed, every ``host_interval_s``.

A view that cannot be read is None with a sentence saying why, never 0. Pure: no Django or Celery.
"""

from __future__ import annotations

import contextlib
import csv
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from types import ModuleType
from typing import Any

import psutil

from workers.probes.nvml import NvmlUnavailable, cuda_version_text, import_pynvml, init_failure_reason, nvml_errors

Point = tuple[float, int | None, int | None]  # (seconds since start, device used bytes, host RSS bytes)


class Timeline:
    """A bounded, max-preserving series: when full, neighbouring buckets merge keeping each maximum.

    A short spike is never averaged away, only its time resolution coarsens.
    """

    def __init__(self, max_points: int = 2000) -> None:
        self.max_points = max(4, max_points - max_points % 2)
        self.points: list[list[Any]] = []

    def add(self, t: float, device: int | None, host: int | None) -> None:
        self.points.append([t, device, host])
        if len(self.points) >= self.max_points:
            merged = []
            for a, b in zip(self.points[0::2], self.points[1::2], strict=False):
                merged.append([b[0], _max(a[1], b[1]), _max(a[2], b[2])])
            if len(self.points) % 2:
                merged.append(self.points[-1])
            self.points = merged

    def as_list(self) -> list[Point]:
        return [(round(p[0], 4), p[1], p[2]) for p in self.points]


def _max(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def write_timeline_csv(path: str, points: Sequence[Sequence[Any]]) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["t_seconds", "device_used_bytes", "host_rss_bytes"])
        for t, device, host in points:
            writer.writerow([t, "" if device is None else device, "" if host is None else host])


@dataclass
class DeviceReading:
    index: int
    uuid: str
    name: str
    total_bytes: int | None
    reserved_bytes: int | None
    baseline_used_bytes: int | None
    peak_used_bytes: int | None = None
    accounting_max_bytes: int | None = None
    accounting_reason: str | None = None
    accounting_by_pid: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class SamplingResult:
    interval_s: float
    device_samples: int
    max_gap_s: float | None  # the worst gap between two device samples: spikes shorter than this may be missed
    device_errors: int
    device_reason: str | None  # why there is no device view (None when there is one)
    memory_info_version: int | None  # 2: v2 struct (reserve apart), 1: v1 (driver before R510)
    devices: tuple[DeviceReading, ...]
    checkpoints: dict[str, list[int | None]]
    host_interval_s: float
    host_samples: int
    host_max_gap_s: float | None
    host_rss_peak_bytes: int | None
    host_reason: str | None
    driver_version: str | None
    cuda_driver_version: str | None
    processes_before: list[dict[str, Any]]
    timeline: list[Point]

    @property
    def device_used_peak_bytes(self) -> int | None:
        peaks = [d.peak_used_bytes for d in self.devices if d.peak_used_bytes is not None]
        return max(peaks) if peaks else None

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["devices"] = [asdict(d) for d in self.devices]
        busiest = max(
            (d for d in self.devices if d.peak_used_bytes is not None),
            key=lambda d: d.peak_used_bytes or 0,
            default=None,
        )
        out["device_used_peak_bytes"] = self.device_used_peak_bytes
        out["device_used_peak_delta_bytes"] = (
            busiest.peak_used_bytes - busiest.baseline_used_bytes
            if busiest is not None and busiest.baseline_used_bytes is not None and busiest.peak_used_bytes is not None
            else None
        )
        accounting = [d.accounting_max_bytes for d in self.devices if d.accounting_max_bytes is not None]
        out["accounting_max_bytes"] = max(accounting) if accounting else None
        out["contended"] = bool(self.processes_before)
        return out


class MemorySampler:
    """Samples device and host memory on a thread between :meth:`start` and :meth:`stop`."""

    def __init__(
        self,
        *,
        interval_s: float = 0.002,
        host_interval_s: float = 0.05,
        device_uuids: Sequence[str] | None = None,
        timeline_points: int = 2000,
    ) -> None:
        self.interval_s = interval_s
        self.host_interval_s = host_interval_s
        self.device_uuids = list(device_uuids) if device_uuids else None
        self.timeline = Timeline(timeline_points)
        self._nv: ModuleType | None = None
        self._handles: list[Any] = []
        self._devices: list[DeviceReading] = []
        self._version: int | None = None
        self._reason: str | None = None
        self._driver: str | None = None
        self._cuda: str | None = None
        self._processes_before: list[dict[str, Any]] = []
        self._root_pid: int | None = None
        self._pids_seen: set[int] = set()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._checkpoints: dict[str, list[int | None]] = {}
        self._samples = self._errors = self._host_samples = 0
        self._max_gap: float | None = None
        self._host_max_gap: float | None = None
        self._host_peak: int | None = None
        self._host_reason: str | None = "no child process was sampled"
        self._thread: threading.Thread | None = None
        self._started = 0.0

    # --- NVML ------------------------------------------------------------------------------------
    def _open_nvml(self) -> None:
        try:
            nv = import_pynvml()
            try:
                nv.nvmlInit()
            except nv.NVMLError as exc:
                raise NvmlUnavailable(init_failure_reason(nv, exc)) from exc
            self._nv = nv
            count = nv.nvmlDeviceGetCount()
            if count == 0:
                raise NvmlUnavailable("NVML is present but reports no devices")
            self._driver = _text(nv.nvmlSystemGetDriverVersion())
            with contextlib.suppress(nv.NVMLError, nv.NVMLLibraryMismatchError):
                self._cuda = cuda_version_text(int(nv.nvmlSystemGetCudaDriverVersion()))
            for index in range(count):
                handle = nv.nvmlDeviceGetHandleByIndex(index)
                uuid = _text(nv.nvmlDeviceGetUUID(handle))
                if self.device_uuids is not None and uuid not in self.device_uuids:
                    continue
                total, reserved, used = self._memory(handle)
                self._handles.append(handle)
                self._devices.append(DeviceReading(index=index, uuid=uuid, name=_text(nv.nvmlDeviceGetName(handle)),
                                                   total_bytes=total, reserved_bytes=reserved, baseline_used_bytes=used,
                                                   peak_used_bytes=used))  # fmt: skip
                self._processes_before.extend(self._processes(handle, index))
            if not self._handles:
                raise NvmlUnavailable(f"none of the requested devices {self.device_uuids} is present")
        except NvmlUnavailable as exc:
            self._reason = str(exc)
            self._handles, self._devices = [], []
        except Exception as exc:  # any NVML failure at start: no device view, said plainly
            self._reason = f"NVML could not be read: {type(exc).__name__}: {exc}"
            self._handles, self._devices = [], []

    def _memory(self, handle: Any) -> tuple[int | None, int | None, int | None]:
        nv = self._nv
        assert nv is not None
        if self._version in (None, 2) and hasattr(nv, "nvmlMemory_v2"):
            try:
                info = nv.nvmlDeviceGetMemoryInfo(handle, version=nv.nvmlMemory_v2)
                self._version = 2
                return int(info.total), int(info.reserved), int(info.used)
            except nvml_errors(nv, "NVMLError_FunctionNotFound", "NVMLError_ArgumentVersionMismatch"):
                self._version = 1  # a driver before R510: v1's used includes the reserve
            except nvml_errors(nv, "NVMLError_NotSupported"):
                pass
        try:
            info = nv.nvmlDeviceGetMemoryInfo(handle)
        except nvml_errors(nv, "NVMLError_NotSupported"):
            raise NvmlUnavailable("NVML does not report framebuffer memory on this device (NOT_SUPPORTED)") from None
        self._version = 1
        return int(info.total), None, int(info.used)

    def _processes(self, handle: Any, index: int) -> list[dict[str, Any]]:
        nv = self._nv
        assert nv is not None
        try:
            return [{"device": index, "pid": int(p.pid), "used_bytes": p.usedGpuMemory}
                    for p in nv.nvmlDeviceGetComputeRunningProcesses(handle)]  # fmt: skip
        except (nv.NVMLError, nv.NVMLLibraryMismatchError):
            return []

    # --- the sampling thread ---------------------------------------------------------------------
    def start(self) -> None:
        """Open NVML, read each device's idle baseline, start sampling (before the child starts)."""
        self._open_nvml()
        self._started = time.perf_counter()
        self._thread = threading.Thread(target=self._run, name="memory-sampler", daemon=True)
        self._thread.start()

    def set_root_pid(self, pid: int) -> None:
        with self._lock:
            self._root_pid = pid
            self._pids_seen.add(pid)

    def mark(self, name: str) -> None:
        """Record the devices' current readings under a checkpoint name (called from another thread)."""
        readings = [self._read_used(h) for h in self._handles]
        with self._lock:
            self._checkpoints[name] = readings

    def _read_used(self, handle: Any) -> int | None:
        nv = self._nv
        try:
            if self._version == 2:
                return int(nv.nvmlDeviceGetMemoryInfo(handle, version=nv.nvmlMemory_v2).used)  # type: ignore[union-attr]
            return int(nv.nvmlDeviceGetMemoryInfo(handle).used)  # type: ignore[union-attr]
        except Exception:
            with self._lock:
                self._errors += 1
            return None

    def _host_rss(self) -> int | None:
        with self._lock:
            root = self._root_pid
        if root is None:
            return None
        try:
            parent = psutil.Process(root)
            processes = [parent, *parent.children(recursive=True)]
        except psutil.Error:
            return None
        total = 0
        for process in processes:
            with contextlib.suppress(psutil.Error):
                total += process.memory_info().rss
                with self._lock:
                    self._pids_seen.add(process.pid)
        return total

    def _run(self) -> None:
        interval = self.interval_s if self._handles else self.host_interval_s
        next_tick = last = time.perf_counter()
        next_host = last
        last_host: float | None = None
        while not self._stop.is_set():
            now = time.perf_counter()
            device_now: int | None = None
            if self._handles:
                readings = [self._read_used(h) for h in self._handles]
                for reading, device in zip(readings, self._devices, strict=True):
                    if reading is not None and (device.peak_used_bytes is None or reading > device.peak_used_bytes):
                        device.peak_used_bytes = reading
                present = [r for r in readings if r is not None]
                device_now = max(present) if present else None
                if self._samples:
                    self._max_gap = max(self._max_gap or 0.0, now - last)
                self._samples += 1
                last = now
            host_now: int | None = None
            if now >= next_host:
                host_now = self._host_rss()
                if host_now is not None:
                    if last_host is not None:
                        self._host_max_gap = max(self._host_max_gap or 0.0, now - last_host)
                    last_host = now
                    self._host_samples += 1
                    self._host_peak = host_now if self._host_peak is None else max(self._host_peak, host_now)
                next_host = now + self.host_interval_s
            if device_now is not None or host_now is not None:
                self.timeline.add(now - self._started, device_now, host_now)
            next_tick += interval
            delay = next_tick - time.perf_counter()
            if delay < 0:  # behind schedule: do not burst to catch up, start a new schedule now
                next_tick = time.perf_counter()
                delay = 0
            self._stop.wait(delay)

    def stop(self) -> SamplingResult:
        """Stop sampling, read the accounting high-water marks, close NVML."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._read_accounting()
        if self._nv is not None:
            with contextlib.suppress(Exception):
                self._nv.nvmlShutdown()
        host_reason = None
        if self._host_peak is None:
            host_reason = "the child's process tree could not be read (it ended before the first sample)"
            if self._root_pid is None:
                host_reason = "no child process was started"
        return SamplingResult(
            interval_s=self.interval_s,
            device_samples=self._samples,
            max_gap_s=round(self._max_gap, 6) if self._max_gap is not None else None,
            device_errors=self._errors,
            device_reason=self._reason,
            memory_info_version=self._version if self._handles else None,
            devices=tuple(self._devices),
            checkpoints=dict(self._checkpoints),
            host_interval_s=self.host_interval_s,
            host_samples=self._host_samples,
            host_max_gap_s=round(self._host_max_gap, 6) if self._host_max_gap is not None else None,
            host_rss_peak_bytes=self._host_peak,
            host_reason=host_reason,
            driver_version=self._driver,
            cuda_driver_version=self._cuda,
            processes_before=self._processes_before,
            timeline=self.timeline.as_list(),
        )

    def _read_accounting(self) -> None:
        nv = self._nv
        if nv is None:
            return
        for handle, device in zip(self._handles, self._devices, strict=True):
            try:
                if nv.nvmlDeviceGetAccountingMode(handle) != nv.NVML_FEATURE_ENABLED:
                    device.accounting_reason = (
                        "accounting mode is disabled on this device (enable it as root: nvidia-smi -am 1)"
                    )
                    continue
            except (nv.NVMLError, nv.NVMLLibraryMismatchError) as exc:
                device.accounting_reason = f"accounting mode cannot be read: {type(exc).__name__}: {exc}"
                continue
            for pid in sorted(self._pids_seen):
                with contextlib.suppress(nv.NVMLError, nv.NVMLLibraryMismatchError):
                    stats = nv.nvmlDeviceGetAccountingStats(handle, pid)
                    device.accounting_by_pid[str(pid)] = int(stats.maxMemoryUsage)
            if device.accounting_by_pid:
                device.accounting_max_bytes = max(device.accounting_by_pid.values())
            else:
                device.accounting_reason = "the driver holds no accounting record for the run's processes"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
