"""The child's side of the runner protocol: JSON lines to the parent on a file descriptor.

The parent (``workers.runner.execute``) opens a pipe and passes its write end to the child as
``VRAMPLAN_REPORT_FD``. A child writes one JSON object per line:

* ``{"type": "progress", "phase": "warmup", "percent": 12.5}`` — shown on the job while it runs;
* ``{"type": "checkpoint", "name": "cuda_init"}`` — the parent records the NVML device reading at that
  instant (used to tell the CUDA context apart from the workload);
* ``{"type": "result", ...}`` — the child's own measurements: ``framework`` (PyTorch allocator
  counters), ``timing``, ``quality``, ``conditions``, ``versions``, ``oom`` (bool). The last one wins.

A command that does not know the protocol simply never writes: the framework views are then null,
with the reason. Writing is best effort: a child whose parent went away must not crash on it.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

REPORT_FD_ENV = "VRAMPLAN_REPORT_FD"
#: Where a registered program may write its own JSON result (output quality, engine report).
QUALITY_PATH_ENV = "VRAMPLAN_QUALITY_PATH"

MAX_LINE_BYTES = 1 << 20  # the parent ignores longer lines: a report is small, a runaway child is not


def report(message: dict[str, Any]) -> bool:
    """Send one message to the parent; False when there is no parent listening (or it went away)."""
    raw = os.environ.get(REPORT_FD_ENV, "")
    if not raw.isdigit():
        return False
    line = (json.dumps(message, separators=(",", ":"), allow_nan=False) + "\n").encode()
    with contextlib.suppress(OSError):
        os.write(int(raw), line)
        return True
    return False


def progress(phase: str, percent: float) -> bool:
    return report({"type": "progress", "phase": phase, "percent": round(max(0.0, min(100.0, percent)), 1)})


def checkpoint(name: str) -> bool:
    return report({"type": "checkpoint", "name": name})
