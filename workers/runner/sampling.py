"""Parent-side memory sampling while a child runs: NVML device memory, and the child tree's host RSS.

* Device view: ``nvmlDeviceGetMemoryInfo`` with the v2 struct (``used`` without the driver's reserve;
  v1 on drivers before R510, labelled ``memory_info_version``), polled on a daemon thread with a
  drift-free schedule. Polling can miss a spike shorter than the interval (measurement.md §1.9: a 5 ms
  spike is caught ≈5% of the time at 100 ms), so the result carries the achieved sample count and the
  largest gap between two samples: "a spike shorter than max_gap_s may have been missed" is explicit
  and the polled peak is a lower bound.
* Accounting: where the driver's accounting mode is on, ``maxMemoryUsage`` per PID is the driver's own
  high-water mark, which polling cannot miss; read after the child exits for every PID seen in its
  tree. NVML keys it by host PID, so a sampler inside a PID namespace finds no record (said so).
* Host view: the RSS of the child and all its descendants, summed, every ``host_interval_s`` on a
  second thread (listing a process tree scans /proc and would stall the device thread).

A view that cannot be read is None with a sentence saying why, never 0. Pure: no Django or Celery.
"""

from __future__ import annotations

import contextlib
import csv
import math
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import psutil

from workers.probes.nvml import (
    NvmlUnavailable,
    cuda_driver_version,
    cuda_version_text,
    import_pynvml,
    init_failure_reason,
    nvml_errors,
)

#: (seconds since start, the largest used bytes among the sampled devices, host RSS bytes of the child's tree)
Point = tuple[float, int | None, int | None]

TIMELINE_CSV_HEADER = ("t_seconds", "device_used_bytes", "host_rss_bytes")
ACCOUNTING_DISABLED = "accounting mode is disabled on this device (enable with nvidia-smi -am 1 as root)"
MEMORY_NOT_SUPPORTED = (
    "NVML does not report framebuffer memory on this device (NOT_SUPPORTED; unified-memory parts such as "
    "GB10, Orin and Thor have none)"
)
MAX_PIDS_LISTED = 100  # pids_seen in as_dict(): enough to explain accounting, bounded for the document


# --- timeline ------------------------------------------------------------------------------------
class Timeline:
    """A bounded, max-preserving series in time buckets of equal width.

    Each point is a bucket ``[start, start + width)`` holding the maximum of each column seen in it.
    When there are more than ``max_points`` buckets the width doubles and neighbours merge keeping
    their maxima, so a short spike is never averaged away (only its time resolution coarsens) and old
    and new parts of a long run keep the same resolution. Not thread-safe: the sampler locks around it.
    """

    def __init__(self, max_points: int = 2000, resolution_s: float = 0.001) -> None:
        if max_points < 2:
            raise ValueError("a timeline needs at least 2 points")
        self.max_points = max_points
        self.width_s = resolution_s if resolution_s > 0 else 0.001
        self._points: list[list[Any]] = []  # [bucket start (s), device max, host max]

    def add(self, t_seconds: float, device_used_bytes: int | None, host_rss_bytes: int | None) -> None:
        if device_used_bytes is None and host_rss_bytes is None:
            return
        start = math.floor(max(t_seconds, 0.0) / self.width_s) * self.width_s
        last = self._points[-1] if self._points else None
        if last is not None and start <= last[0]:  # the same bucket (or a reading that arrived late)
            last[1] = _max(last[1], device_used_bytes)
            last[2] = _max(last[2], host_rss_bytes)
            return
        self._points.append([start, device_used_bytes, host_rss_bytes])
        while len(self._points) > self.max_points:
            self._coarsen()

    def _coarsen(self) -> None:
        self.width_s *= 2
        merged: list[list[Any]] = []
        for start, device, host in self._points:
            bucket = math.floor(start / self.width_s + 1e-9) * self.width_s
            if merged and bucket <= merged[-1][0] + 1e-12:
                merged[-1][1] = _max(merged[-1][1], device)
                merged[-1][2] = _max(merged[-1][2], host)
            else:
                merged.append([bucket, device, host])
        self._points = merged

    def points(self) -> list[Point]:
        return [(round(p[0], 6), p[1], p[2]) for p in self._points]


def _max(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def write_timeline_csv(path: str | os.PathLike[str], points: Sequence[Sequence[Any]]) -> None:
    """Write timeline points as CSV: ``t_seconds,device_used_bytes,host_rss_bytes``; an unread value is empty."""
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(TIMELINE_CSV_HEADER)
        for t, device, host in points:
            writer.writerow([t, "" if device is None else device, "" if host is None else host])


# --- results -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DeviceReading:
    """One sampled device. Byte figures NVML did not give are None; ``*_used_bytes`` follow the struct
    version: v2 ``used`` excludes the driver's reserve, v1 ``used`` includes it."""

    index: int  # NVML's index (CUDA's only with CUDA_DEVICE_ORDER=PCI_BUS_ID)
    uuid: str
    name: str
    total_bytes: int | None
    reserved_bytes: int | None  # None with the v1 struct
    baseline_used_bytes: int | None  # read at start(), before the child existed
    peak_used_bytes: int | None  # the most any sample saw: a lower bound on the true peak
    final_used_bytes: int | None  # read at stop(), after the child ended: did memory come back?
    samples: int  # successful reads, the baseline and the final one included
    max_gap_s: float | None  # the longest time between two successful reads of this device
    errors: int  # failed reads while sampling (the sampler kept going)
    memory_reason: str | None = None  # why this device has no memory figures
    accounting_max_bytes: int | None = None  # the largest single-process maxMemoryUsage of the run's PIDs
    accounting_reason: str | None = None  # why accounting_max_bytes is None (or what was partly unreadable)
    accounting_by_pid: Mapping[str, int] = field(default_factory=dict)  # host PID (text, for JSON) → bytes

    def as_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "uuid": self.uuid,
            "name": self.name,
            "total_bytes": self.total_bytes,
            "reserved_bytes": self.reserved_bytes,
            "baseline_used_bytes": self.baseline_used_bytes,
            "peak_used_bytes": self.peak_used_bytes,
            "final_used_bytes": self.final_used_bytes,
            "samples": self.samples,
            "max_gap_s": self.max_gap_s,
            "errors": self.errors,
            "memory_reason": self.memory_reason,
            "accounting_max_bytes": self.accounting_max_bytes,
            "accounting_reason": self.accounting_reason,
            "accounting_by_pid": dict(self.accounting_by_pid),
        }


@dataclass(frozen=True)
class ProcessBefore:
    """A compute process already on a sampled device when sampling started: the run was contended."""

    device_index: int
    pid: int  # host PID
    used_bytes: int | None  # None where the driver cannot say (WDDM)


@dataclass(frozen=True)
class SamplingResult:
    interval_s: float
    host_interval_s: float
    device_available: bool
    device_reason: str | None  # why there is no device view (None when there is one)
    memory_info_version: int | None  # 2: v2 struct (reserve apart), 1: v1 (driver before R510)
    device_samples: int  # polls made by the sampling thread
    max_gap_s: float | None  # the worst gap between two reads of a device: shorter spikes may be missed
    device_errors: int  # failed reads, all devices together
    device_error: str | None  # the first failure, as text
    devices: tuple[DeviceReading, ...]
    checkpoints: Mapping[str, list[int | None]]  # mark() name → used bytes per device, in ``devices`` order
    checkpoint_peaks: Mapping[str, list[int | None]]  # mark() name → each device's peak until then, bytes
    host_samples: int
    host_max_gap_s: float | None
    host_rss_peak_bytes: int | None
    host_reason: str | None
    driver_version: str | None
    cuda_driver_version: str | None
    processes_before: tuple[ProcessBefore, ...]
    processes_before_reason: str | None  # why the process lists could not be read at start
    pids_seen: tuple[int, ...]  # the child's tree as the host sampler saw it (host PIDs)
    timeline: tuple[Point, ...]

    def busiest_device(self) -> DeviceReading | None:
        """The device with the highest polled peak: the one a single-GPU run used."""
        read = [d for d in self.devices if d.peak_used_bytes is not None]
        return max(read, key=lambda d: d.peak_used_bytes or 0) if read else None

    @property
    def device_used_peak_bytes(self) -> int | None:
        busiest = self.busiest_device()
        return busiest.peak_used_bytes if busiest is not None else None

    @property
    def device_used_peak_delta_bytes(self) -> int | None:
        """The busiest device's peak less its idle baseline: what the run added (context included)."""
        busiest = self.busiest_device()
        if busiest is None or busiest.peak_used_bytes is None or busiest.baseline_used_bytes is None:
            return None
        return busiest.peak_used_bytes - busiest.baseline_used_bytes

    @property
    def contended(self) -> bool | None:
        """Other compute processes were on the devices at start; None when no process list was read."""
        if self.processes_before:
            return True
        return None if self.processes_before_reason is not None or not self.device_available else False

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: every key always present, None where a figure was not read."""
        busiest = self.busiest_device()
        accounting = [d.accounting_max_bytes for d in self.devices if d.accounting_max_bytes is not None]
        return {
            "interval_s": self.interval_s,
            "host_interval_s": self.host_interval_s,
            "device_available": self.device_available,
            "device_reason": self.device_reason,
            "memory_info_version": self.memory_info_version,
            "device_samples": self.device_samples,
            "max_gap_s": self.max_gap_s,
            "device_errors": self.device_errors,
            "device_error": self.device_error,
            "devices": [d.as_dict() for d in self.devices],
            "checkpoints": {name: list(values) for name, values in self.checkpoints.items()},
            "checkpoint_peaks": {name: list(values) for name, values in self.checkpoint_peaks.items()},
            "busiest_device_index": busiest.index if busiest is not None else None,
            "device_used_peak_bytes": self.device_used_peak_bytes,
            "device_used_peak_delta_bytes": self.device_used_peak_delta_bytes,
            "accounting_max_bytes": max(accounting) if accounting else None,
            "host_samples": self.host_samples,
            "host_max_gap_s": self.host_max_gap_s,
            "host_rss_peak_bytes": self.host_rss_peak_bytes,
            "host_reason": self.host_reason,
            "driver_version": self.driver_version,
            "cuda_driver_version": self.cuda_driver_version,
            "processes_before": [
                {"device_index": p.device_index, "pid": p.pid, "used_bytes": p.used_bytes}
                for p in self.processes_before
            ],
            "processes_before_reason": self.processes_before_reason,
            "contended": self.contended,
            "pids_seen": list(self.pids_seen[:MAX_PIDS_LISTED]),
            "pids_seen_count": len(self.pids_seen),
            "timeline": [list(p) for p in self.timeline],
        }


# --- the sampler ---------------------------------------------------------------------------------
class _DeviceState:
    """Mutable per-device accumulators, guarded by the sampler's lock."""

    def __init__(self, index: int, uuid: str, name: str, handle: Any) -> None:
        self.index, self.uuid, self.name, self.handle = index, uuid, name, handle
        self.total: int | None = None
        self.reserved: int | None = None
        self.baseline: int | None = None
        self.peak: int | None = None
        self.final: int | None = None
        self.samples = 0
        self.errors = 0
        self.last_read: float | None = None
        self.max_gap: float | None = None
        self.memory_reason: str | None = None

    def observe(self, used: int, at: float) -> None:
        self.peak = used if self.peak is None else max(self.peak, used)
        if self.last_read is not None and at > self.last_read:
            self.max_gap = max(self.max_gap or 0.0, at - self.last_read)
        self.last_read = at
        self.samples += 1


class MemorySampler:
    """Samples device and host memory on threads between :meth:`start` and :meth:`stop`.

    Call :meth:`start` before the child starts (it reads the idle baseline), :meth:`set_root_pid` once
    the child exists (or pass ``root_pid`` to ``start``), :meth:`stop` after it ended. NVML problems
    never raise: the result says why there is no device view. One sampler measures one run.
    """

    def __init__(
        self,
        *,
        interval_s: float = 0.002,
        host_interval_s: float = 0.05,
        device_uuids: Sequence[str] | None = None,
        timeline_points: int = 2000,
    ) -> None:
        if interval_s <= 0 or host_interval_s <= 0:
            raise ValueError("sampling intervals must be positive")
        self.interval_s = interval_s
        self.host_interval_s = host_interval_s
        self.device_uuids = tuple(device_uuids) if device_uuids is not None else None
        self._timeline = Timeline(timeline_points, resolution_s=min(interval_s, host_interval_s))
        self._nv: ModuleType | None = None
        self._v2: bool = True  # poll with the v2 struct; set by the first device whose memory was read
        self._version: int | None = None
        self._devices: list[_DeviceState] = []
        self._reason: str | None = "the sampler was not started"
        self._driver: str | None = None
        self._cuda: str | None = None
        self._processes_before: list[ProcessBefore] = []
        self._processes_reason: str | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._root_known = threading.Event()
        self._root_pid: int | None = None
        self._pids_seen: set[int] = set()
        self._checkpoints: dict[str, list[int | None]] = {}
        self._checkpoint_peaks: dict[str, list[int | None]] = {}
        self._polls = 0
        self._errors = 0
        self._first_error: str | None = None
        self._host_samples = 0
        self._host_peak: int | None = None
        self._host_last: float | None = None
        self._host_max_gap: float | None = None
        self._threads: list[threading.Thread] = []
        self._started_at = 0.0
        self._result: SamplingResult | None = None

    # --- public ----------------------------------------------------------------------------------
    def start(self, root_pid: int | None = None) -> None:
        """Open NVML, read each device's idle baseline and process list, start the sampling threads."""
        if self._threads:
            raise RuntimeError("a MemorySampler measures one run: start() was already called")
        self._started_at = time.perf_counter()
        self._open_nvml()
        if root_pid is not None:
            self.set_root_pid(root_pid)
        if any(d.baseline is not None for d in self._devices):  # something to poll
            self._threads.append(
                threading.Thread(target=self._device_loop, name="vramplan-device-sampler", daemon=True)
            )
        self._threads.append(threading.Thread(target=self._host_loop, name="vramplan-host-sampler", daemon=True))
        for thread in self._threads:
            thread.start()

    def set_root_pid(self, pid: int) -> None:
        """The child's PID: its tree is what the host view sums and whose accounting records are read."""
        with self._lock:
            self._root_pid = pid
            self._pids_seen.add(pid)
        self._root_known.set()

    def mark(self, name: str) -> None:
        """Record the devices' current used bytes under ``name`` (thread-safe; a repeated name is replaced)."""
        stopped = self._stopping.is_set()  # after stop() NVML is shut down: record nothing rather than errors
        readings = [None if stopped else self._read_used(device) for device in self._devices]
        at = time.perf_counter()
        with self._lock:
            for device, used in zip(self._devices, readings, strict=True):
                if used is not None:
                    device.peak = used if device.peak is None else max(device.peak, used)
            present = [r for r in readings if r is not None]
            self._timeline.add(at - self._started_at, max(present) if present else None, None)
            self._checkpoints[name] = readings
            # The peak so far: a child may end its measured window here and do unmeasured work after it.
            self._checkpoint_peaks[name] = [device.peak for device in self._devices]

    def stop(self) -> SamplingResult:
        """Stop sampling, take a final reading, read the accounting high-water marks, close NVML."""
        if self._result is not None:
            return self._result
        self._stopping.set()
        self._root_known.set()  # wake a host thread still waiting for a child
        for thread in self._threads:
            thread.join(timeout=5)
        # A last reading after the child ended: it closes the last gap, and shows whether memory came back.
        readable = [d for d in self._devices if d.baseline is not None]
        finals = [self._read_used(device) for device in readable]
        at = time.perf_counter()
        with self._lock:
            for device, used in zip(readable, finals, strict=True):
                if used is not None:
                    device.final = used
                    device.observe(used, at)
            present = [used for used in finals if used is not None]
            self._timeline.add(at - self._started_at, max(present) if present else None, None)
        accounting = self._read_accounting()
        if self._nv is not None:
            with contextlib.suppress(Exception):  # the readings are taken; a failed shutdown changes nothing
                self._nv.nvmlShutdown()
        self._result = self._build_result(accounting)
        return self._result

    # --- NVML at start ---------------------------------------------------------------------------
    def _open_nvml(self) -> None:
        try:
            nv = import_pynvml()
            try:
                nv.nvmlInit()
            except nv.NVMLError as exc:
                raise NvmlUnavailable(init_failure_reason(nv, exc)) from exc
        except NvmlUnavailable as exc:
            self._reason = str(exc)
            return
        self._nv = nv
        try:
            self._open_devices(nv)
        except Exception as exc:  # whatever NVML raised at start: no device view, said plainly
            self._reason = (
                str(exc) if isinstance(exc, NvmlUnavailable) else f"NVML could not be read: {type(exc).__name__}: {exc}"
            )
            self._devices = []
            with contextlib.suppress(Exception):
                nv.nvmlShutdown()
            self._nv = None
            return
        unreadable = [d.memory_reason for d in self._devices if d.baseline is None]
        # Devices stay listed (identity, no figures) when none has memory figures, e.g. NOT_SUPPORTED.
        self._reason = (unreadable[0] or MEMORY_NOT_SUPPORTED) if len(unreadable) == len(self._devices) else None

    def _open_devices(self, nv: ModuleType) -> None:
        count = nv.nvmlDeviceGetCount()
        if count == 0:
            raise NvmlUnavailable("NVML is present but reports no devices")
        self._driver = _text(nv.nvmlSystemGetDriverVersion())
        with contextlib.suppress(nv.NVMLError, nv.NVMLLibraryMismatchError):
            self._cuda = cuda_version_text(cuda_driver_version(nv))
        for index in range(count):
            handle = nv.nvmlDeviceGetHandleByIndex(index)
            uuid = _text(nv.nvmlDeviceGetUUID(handle))
            if self.device_uuids is not None and uuid not in self.device_uuids:
                continue
            self._devices.append(_DeviceState(index, uuid, _text(nv.nvmlDeviceGetName(handle)), handle))
        if not self._devices:
            raise NvmlUnavailable(f"none of the requested devices {list(self.device_uuids or ())} is present")
        for device in self._devices:
            self._read_baseline(nv, device)
        self._read_processes_before(nv)

    def _read_baseline(self, nv: ModuleType, device: _DeviceState) -> None:
        info = None
        if self._v2 and hasattr(nv, "nvmlMemory_v2"):
            try:
                info = nv.nvmlDeviceGetMemoryInfo(device.handle, version=nv.nvmlMemory_v2)
            except nvml_errors(
                nv, "NVMLError_FunctionNotFound", "NVMLError_ArgumentVersionMismatch", "NVMLError_NotSupported"
            ):
                # No v2 entry point (a driver before R510) or no v2 answer: v1, whose used includes the
                # reserve. NOT_SUPPORTED is retried with v1 before deciding the device has no figures.
                info = None
            except (nv.NVMLError, nv.NVMLLibraryMismatchError) as exc:  # this device only; the others go on
                device.memory_reason = f"NVML memory query failed: {type(exc).__name__}: {exc}"
                return
        if info is not None:
            version = 2
        else:
            try:
                info = nv.nvmlDeviceGetMemoryInfo(device.handle)
            except nvml_errors(nv, "NVMLError_NotSupported"):
                device.memory_reason = MEMORY_NOT_SUPPORTED
                return
            except (nv.NVMLError, nv.NVMLLibraryMismatchError) as exc:
                device.memory_reason = f"NVML memory query failed: {type(exc).__name__}: {exc}"
                return
            version = 1
        if self._version is not None and self._version != version:
            # One struct for every device, or their figures do not compare (v1 used includes the reserve).
            device.memory_reason = f"this device answered the v{version} memory struct, the others v{self._version}"
            return
        self._version = version
        self._v2 = version == 2
        device.reserved = int(info.reserved) if version == 2 else None
        device.total = int(info.total) if int(info.total) > 0 else None
        device.baseline = int(info.used)
        device.observe(device.baseline, time.perf_counter())

    def _read_processes_before(self, nv: ModuleType) -> None:
        failures = []
        for device in self._devices:
            try:
                listed = nv.nvmlDeviceGetComputeRunningProcesses(device.handle)
            except (nv.NVMLError, nv.NVMLLibraryMismatchError) as exc:
                failures.append(f"device {device.index}: {type(exc).__name__}: {exc}")
                continue
            self._processes_before.extend(
                ProcessBefore(device.index, int(p.pid), None if p.usedGpuMemory is None else int(p.usedGpuMemory))
                for p in listed
            )
        if failures:
            self._processes_reason = "the compute process list could not be read: " + "; ".join(failures)

    # --- the threads -----------------------------------------------------------------------------
    def _read_used(self, device: _DeviceState) -> int | None:
        """One device's used bytes now, or None (counted as an error: the run goes on)."""
        nv = self._nv
        if nv is None or device.baseline is None:
            return None
        try:
            if self._v2:
                return int(nv.nvmlDeviceGetMemoryInfo(device.handle, version=nv.nvmlMemory_v2).used)
            return int(nv.nvmlDeviceGetMemoryInfo(device.handle).used)
        except Exception as exc:  # NVMLError, GPU lost, anything: keep sampling, count it
            with self._lock:
                device.errors += 1
                self._errors += 1
                if self._first_error is None:
                    self._first_error = f"device {device.index}: {type(exc).__name__}: {exc}"
            return None

    def _device_loop(self) -> None:
        devices = [d for d in self._devices if d.baseline is not None]
        next_tick = time.perf_counter()
        while not self._stopping.is_set():
            readings = [self._read_used(device) for device in devices]
            at = time.perf_counter()
            with self._lock:
                self._polls += 1
                for device, used in zip(devices, readings, strict=True):
                    if used is not None:
                        device.observe(used, at)
                present = [r for r in readings if r is not None]
                if present:
                    self._timeline.add(at - self._started_at, max(present), None)
            # Drift-free: the next tick is a multiple of the interval from the first, not "now + interval".
            # Behind schedule (a stall), skip the missed ticks rather than bursting to catch up.
            next_tick += self.interval_s
            now = time.perf_counter()
            if next_tick < now:
                next_tick += math.ceil((now - next_tick) / self.interval_s) * self.interval_s
            self._stopping.wait(next_tick - now)

    def _host_loop(self) -> None:
        self._root_known.wait()
        next_tick = time.perf_counter()
        while not self._stopping.is_set():
            rss = self._tree_rss()
            at = time.perf_counter()
            if rss is not None:
                with self._lock:
                    if self._host_last is not None:
                        self._host_max_gap = max(self._host_max_gap or 0.0, at - self._host_last)
                    self._host_last = at
                    self._host_samples += 1
                    self._host_peak = rss if self._host_peak is None else max(self._host_peak, rss)
                    self._timeline.add(at - self._started_at, None, rss)
            next_tick += self.host_interval_s
            now = time.perf_counter()
            if next_tick < now:
                next_tick += math.ceil((now - next_tick) / self.host_interval_s) * self.host_interval_s
            self._stopping.wait(next_tick - now)

    def _tree_rss(self) -> int | None:
        """The summed RSS of the child and its descendants; None when the child is gone or unreadable.

        Processes come and go while the tree is walked: one that vanishes is skipped, not an error.
        """
        with self._lock:
            root = self._root_pid
        if root is None:
            return None
        try:
            parent = psutil.Process(root)
            rss = parent.memory_info().rss
        except psutil.Error:
            return None
        try:
            children = parent.children(recursive=True)
        except psutil.Error:
            children = []
        pids = [root]
        for child in children:
            with contextlib.suppress(psutil.Error):
                rss += child.memory_info().rss
                pids.append(child.pid)
        with self._lock:
            self._pids_seen.update(pids)
        return rss

    # --- after the child ---------------------------------------------------------------------------
    def _read_accounting(self) -> dict[int, tuple[int | None, str | None, dict[str, int]]]:
        """Per device index: (largest single-PID maxMemoryUsage, reason, per-PID values)."""
        nv = self._nv
        out: dict[int, tuple[int | None, str | None, dict[str, int]]] = {}
        if nv is None:
            return out
        with self._lock:
            pids = sorted(self._pids_seen)
        for device in self._devices:
            if device.baseline is None:
                continue
            out[device.index] = self._device_accounting(nv, device, pids)
        return out

    def _device_accounting(
        self, nv: ModuleType, device: _DeviceState, pids: list[int]
    ) -> tuple[int | None, str | None, dict[str, int]]:
        try:
            mode = nv.nvmlDeviceGetAccountingMode(device.handle)
        except (nv.NVMLError, nv.NVMLLibraryMismatchError) as exc:
            return None, _accounting_error(nv, exc, "reading the accounting mode"), {}
        if mode != getattr(nv, "NVML_FEATURE_ENABLED", 1):
            return None, ACCOUNTING_DISABLED, {}
        if not pids:
            return None, "no child process was seen, so there is no PID to look up", {}
        by_pid: dict[str, int] = {}
        problems: list[str] = []
        not_found: list[int] = []
        for pid in pids:
            try:
                stats = nv.nvmlDeviceGetAccountingStats(device.handle, pid)
            except nvml_errors(nv, "NVMLError_NotFound"):
                not_found.append(pid)  # this PID never used this device (or its record was overwritten)
                continue
            except (nv.NVMLError, nv.NVMLLibraryMismatchError) as exc:
                problems.append(f"pid {pid}: {_accounting_error(nv, exc, 'reading accounting stats')}")
                continue
            if stats.maxMemoryUsage is None:  # NVML_VALUE_NOT_AVAILABLE (WDDM)
                problems.append(f"pid {pid}: the driver reports no maxMemoryUsage")
                continue
            by_pid[str(pid)] = int(stats.maxMemoryUsage)
        if by_pid:
            return max(by_pid.values()), "; ".join(problems) or None, by_pid
        if problems:
            return None, "; ".join(problems), by_pid
        return None, (
            f"the driver holds no accounting record on this device for the run's {len(not_found)} process(es) "
            "(NOT_FOUND: the device was not used by them, or the sampler runs in a PID namespace and NVML "
            "keys records by host PID)"
        ), by_pid  # fmt: skip

    def _build_result(self, accounting: Mapping[int, tuple[int | None, str | None, dict[str, int]]]) -> SamplingResult:
        with self._lock:
            readings = []
            for device in self._devices:
                acct_max, acct_reason, by_pid = accounting.get(device.index, (None, None, {}))
                if device.baseline is None:
                    acct_reason = "no memory figures on this device, so its accounting was not read"
                elif self._nv is None:
                    acct_reason = self._reason
                readings.append(
                    DeviceReading(
                        index=device.index,
                        uuid=device.uuid,
                        name=device.name,
                        total_bytes=device.total,
                        reserved_bytes=device.reserved,
                        baseline_used_bytes=device.baseline,
                        peak_used_bytes=device.peak,
                        final_used_bytes=device.final,
                        samples=device.samples,
                        max_gap_s=_round(device.max_gap),
                        errors=device.errors,
                        memory_reason=device.memory_reason,
                        accounting_max_bytes=acct_max,
                        accounting_reason=acct_reason,
                        accounting_by_pid=by_pid,
                    )
                )
            gaps = [d.max_gap for d in self._devices if d.max_gap is not None]
            host_reason = None
            if self._host_peak is None:
                host_reason = (
                    "no child process was started"
                    if self._root_pid is None
                    else "the child's process tree could not be read (it ended before the first sample)"
                )
            available = any(d.baseline is not None for d in self._devices)
            return SamplingResult(
                interval_s=self.interval_s,
                host_interval_s=self.host_interval_s,
                device_available=available,
                device_reason=None if available else (self._reason or MEMORY_NOT_SUPPORTED),
                memory_info_version=self._version if available else None,
                device_samples=self._polls,
                max_gap_s=_round(max(gaps)) if gaps else None,
                device_errors=self._errors,
                device_error=self._first_error,
                devices=tuple(readings),
                checkpoints=dict(self._checkpoints),
                checkpoint_peaks=dict(self._checkpoint_peaks),
                host_samples=self._host_samples,
                host_max_gap_s=_round(self._host_max_gap),
                host_rss_peak_bytes=self._host_peak,
                host_reason=host_reason,
                driver_version=self._driver,
                cuda_driver_version=self._cuda,
                processes_before=tuple(self._processes_before),
                processes_before_reason=self._processes_reason,
                pids_seen=tuple(sorted(self._pids_seen)),
                timeline=tuple(self._timeline.points()),
            )


def _accounting_error(nv: ModuleType, exc: BaseException, doing: str) -> str:
    if isinstance(exc, nvml_errors(nv, "NVMLError_NotSupported")):
        return f"accounting is not supported on this device (NOT_SUPPORTED while {doing}; MIG and vGPU have none)"
    if isinstance(exc, nvml_errors(nv, "NVMLError_NoPermission")):
        return f"NVML refused {doing} (NO_PERMISSION)"
    return f"{doing} failed: {type(exc).__name__}: {exc}"


def _round(seconds: float | None) -> float | None:
    return round(seconds, 6) if seconds is not None else None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
