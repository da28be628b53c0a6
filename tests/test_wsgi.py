"""The web process's start-up (``vramplan.wsgi``): the garbage collector tuned as the settings say."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROBE = (
    "import gc, json, vramplan.wsgi; "
    "print(json.dumps({'threshold': gc.get_threshold(), 'frozen': gc.get_freeze_count()}))"
)

pytestmark = pytest.mark.slow


def start_web(**env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "WEB_GC_"))}
    return subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**clean, "DJANGO_DEBUG": "1", **env}, check=False)  # fmt: skip


def test_the_web_process_freezes_its_start_up_and_collects_the_young_generation_less_often() -> None:
    result = start_web()
    assert result.returncode == 0, result.stderr[-2000:]
    state = json.loads(result.stdout.splitlines()[-1])
    assert state["threshold"][0] == 50_000
    assert state["frozen"] > 10_000  # Django, DRF, the project's modules: left out of every collection

    tuned = json.loads(start_web(WEB_GC_GEN0_THRESHOLD="20000").stdout.splitlines()[-1])
    assert tuned["threshold"][0] == 20_000
    default = json.loads(start_web(WEB_GC_GEN0_THRESHOLD="0").stdout.splitlines()[-1])
    assert default["threshold"] == [700, 10, 10]  # Python's own


def test_a_threshold_that_is_not_a_count_stops_the_start() -> None:
    result = start_web(WEB_GC_GEN0_THRESHOLD="lots")
    assert result.returncode != 0 and "WEB_GC_GEN0_THRESHOLD" in result.stderr
