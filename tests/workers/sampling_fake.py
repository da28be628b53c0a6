"""Driving the fake NVML's memory over time, and running the sampler around a child, for the sampler tests.

The fake libnvidia-ml.so.1 re-reads ``FAKE_NVML_USED_FILE`` on every memory, process and accounting
query (tools/fake_nvml/README.md). Its lines are ``DEVICE USED_BYTES [HIGH_WATER_BYTES [PID]]`` (or
``DEVICE error CODE``); :func:`write_used_file` writes one atomically (a temporary file renamed over
the path), which is what a reader that may look at any moment needs.

Two entry points, each run in its own interpreter (pynvml loads the library once per process):

* ``python -m tests.workers.sampling_fake spike PATH ...``: the measured child. It plays a workload
  whose device memory goes baseline → a short spike → baseline → freed, writing its own PID and its
  running high-water mark (what the driver's accounting keeps), and prints the spike's real length.
* ``python -m tests.workers.sampling_fake measure [--interval S] ... -- CMD ARGS``: the parent. It
  runs ``workers.runner.sampling.MemorySampler`` around CMD and prints the result's ``as_dict()``
  with the child's stdout, as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

GIB = 2**30


@dataclass(frozen=True)
class UsedLine:
    """One line of the used file: ``device`` has ``used_bytes`` allocated now, by ``pid`` (0: nobody's).

    ``high_water_bytes`` is the most that PID ever had on the device (the driver's accounting
    maxMemoryUsage); the fake never lowers it. ``error`` instead makes the device's memory queries
    return that nvmlReturn_t (e.g. 15, GPU is lost) while the line is there.
    """

    device: int
    used_bytes: int = 0
    high_water_bytes: int | None = None
    pid: int = 0
    error: int | None = None

    def text(self) -> str:
        if self.error is not None:
            return f"{self.device} error {self.error}"
        high_water = self.used_bytes if self.high_water_bytes is None else self.high_water_bytes
        return f"{self.device} {self.used_bytes} {high_water} {self.pid}"


def write_used_file(path: str | os.PathLike[str], lines: Iterable[UsedLine]) -> None:
    """Replace the used file atomically: a reader sees the old content or the new, never half of one."""
    target = Path(path)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    temporary.write_text("".join(f"{line.text()}\n" for line in lines))
    os.replace(temporary, target)


def spike(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(prog="sampling_fake spike")
    parser.add_argument("path")
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--baseline-bytes", type=int, default=3 * GIB)
    parser.add_argument("--peak-bytes", type=int, default=9 * GIB)
    parser.add_argument("--before-s", type=float, default=0.05)
    parser.add_argument("--spike-s", type=float, default=0.01)
    parser.add_argument("--after-s", type=float, default=0.05)
    parser.add_argument("--error-s", type=float, default=0.0, help="play a failing device for this long after")
    args = parser.parse_args(argv)
    pid, device = os.getpid(), args.device

    def write(used: int, high_water: int) -> None:
        write_used_file(args.path, [UsedLine(device, used, high_water, pid)])

    write(args.baseline_bytes, args.baseline_bytes)
    time.sleep(args.before_s)
    write(args.peak_bytes, args.peak_bytes)
    spike_start = time.perf_counter()
    time.sleep(args.spike_s)
    write(args.baseline_bytes, args.peak_bytes)
    spike_s = time.perf_counter() - spike_start
    time.sleep(args.after_s)
    if args.error_s > 0:
        write_used_file(args.path, [UsedLine(device, error=15)])  # NVML_ERROR_GPU_IS_LOST
        time.sleep(args.error_s)
        write(args.baseline_bytes, args.peak_bytes)
        time.sleep(args.after_s)
    # The process frees its memory as it ends; the driver's accounting record keeps the high-water mark.
    write(0, args.peak_bytes)
    print(json.dumps({"pid": pid, "spike_s": spike_s}))


def measure(argv: Sequence[str]) -> None:
    from workers.runner.sampling import MemorySampler, write_timeline_csv

    parser = argparse.ArgumentParser(prog="sampling_fake measure")
    parser.add_argument("--interval", type=float, default=0.002)
    parser.add_argument("--host-interval", type=float, default=0.05)
    parser.add_argument("--uuid", action="append", default=None, help="sample only this device (repeatable)")
    parser.add_argument("--timeline-points", type=int, default=2000)
    parser.add_argument("--timeline-csv", default=None)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command

    sampler = MemorySampler(
        interval_s=args.interval,
        host_interval_s=args.host_interval,
        device_uuids=args.uuid,
        timeline_points=args.timeline_points,
    )
    sampler.start()
    sampler.mark("idle")
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    sampler.set_root_pid(child.pid)
    marker = threading.Thread(target=sampler.mark, args=("child_started",))  # mark() from another thread
    marker.start()
    stdout, _ = child.communicate(timeout=60)
    marker.join()
    result = sampler.stop()
    if args.timeline_csv:
        write_timeline_csv(args.timeline_csv, result.timeline)
    print(json.dumps({"child_pid": child.pid, "child_exit": child.returncode, "child_stdout": stdout,
                      "result": result.as_dict()}))  # fmt: skip


if __name__ == "__main__":
    {"spike": spike, "measure": measure}[sys.argv[1]](sys.argv[2:])
