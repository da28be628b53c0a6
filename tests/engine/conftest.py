"""Engine tests are pure: no database, no Django settings needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WORKLOADS_DIR = REPO / "fixtures" / "workloads"


@pytest.fixture(scope="session")
def example_workloads() -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(WORKLOADS_DIR.glob("*.json"))}
