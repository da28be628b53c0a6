"""Facts of real catalog devices, built from the committed fixtures without a database (for the pure tests)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from catalog.compat import Facts, Toolkit, Wheel

CATALOG = Path(__file__).resolve().parents[2] / "fixtures" / "catalog"


@cache
def records(name: str) -> tuple[dict, ...]:
    return tuple(json.loads((CATALOG / name).read_text())["records"])


@cache
def tables() -> tuple[tuple[Toolkit, ...], tuple[Wheel, ...]]:
    return (
        tuple(Toolkit.from_row(r) for r in records("cuda_toolkits.json")),
        tuple(Wheel.from_row(r) for r in records("pytorch_wheels.json")),
    )


def device_facts(accelerator: str, driver: str = "", host: str = "x86_64") -> Facts:
    """Facts of one ``accelerator`` (a fixture slug) on a host with ``driver`` installed."""
    gpu = next(r for r in records("accelerators.json") if r["slug"] == accelerator)
    arch = next(r for r in records("architectures.json") if r["slug"] == gpu["architecture"])
    toolkits, wheels = tables()
    return Facts.of_device(
        gpu["name"], arch, driver_version=driver, host_cpu_architecture=host, toolkits=toolkits, wheels=wheels
    )
