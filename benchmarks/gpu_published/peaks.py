"""The engine's peak against published training and framework-inference peaks (peaks.json).

    python -m benchmarks.gpu_published            # vLLM table, then these groups

Each record names the counter its figure is (allocated, reserved, device used); the engine's budget is
read on that same view (`per_device.views`). A record is within target when |error| ≤ 10 %; a group
meets its target when ≥ 80 % of its records are, counted for the tuning and the hold-out records apart
(hold-out: every third record, fixed before any comparison; HOLDOUT.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from budgets.engine import Workload, estimate

HERE = Path(__file__).resolve().parent
GIB = 2**30
TARGET_PCT = 10.0
TARGET_SHARE = 0.8
GROUPS = ("training", "hf-inference")
VIEW_KEYS = {"allocated": "framework_allocated", "reserved": "framework_reserved", "device_used": "device_used"}


def load_records() -> list[dict[str, Any]]:
    return json.loads((HERE / "peaks.json").read_text())["records"]


def workload(record: dict[str, Any]) -> Workload:
    return Workload.model_validate(record["workload"])


def measured_bytes(record: dict[str, Any]) -> float:
    measured = record["measured"]
    return measured["value"] * measured["bytes_per_unit"]


def engine_view(record: dict[str, Any]) -> dict[str, int]:
    """The budget's low / expected / high bytes on the view the record measured."""
    views = estimate(workload(record)).as_contract()["per_device"]["views"]
    return views[VIEW_KEYS[record["view"]]]


def compare(record: dict[str, Any]) -> dict[str, Any]:
    view = engine_view(record)
    measured = measured_bytes(record)
    error_pct = 100 * (view["bytes"] - measured) / measured
    return {
        "id": record["id"],
        "group": record["group"],
        "holdout": record["holdout"],
        "view": record["view"],
        "measured_gib": measured / GIB,
        "engine_gib": view["bytes"] / GIB,
        "low_gib": view["low"] / GIB,
        "high_gib": view["high"] / GIB,
        "error_pct": error_pct,
        "within": abs(error_pct) <= TARGET_PCT,
        "inside": view["low"] <= measured <= view["high"],
    }


def table(rows: list[dict[str, Any]]) -> list[str]:
    head = (
        f"{'record':<44}{'set':<9}{'view':<11}{'measured GiB':>13}{'engine GiB':>11}{'err %':>8}"
        f"{'low–high GiB':>16}  within/inside"
    )
    lines = [head]
    for r in rows:
        lines.append(
            f"{r['id']:<44}{'holdout' if r['holdout'] else 'tuning':<9}{r['view']:<11}{r['measured_gib']:>13.2f}"
            f"{r['engine_gib']:>11.2f}{r['error_pct']:>+8.1f}{r['low_gib']:>8.2f}–{r['high_gib']:<7.2f}"
            f"  {'yes' if r['within'] else 'NO'}/{'yes' if r['inside'] else 'no'}"
        )
    return lines


def meets_target(rows: list[dict[str, Any]]) -> bool:
    return bool(rows) and sum(r["within"] for r in rows) >= TARGET_SHARE * len(rows)


def summary(rows: list[dict[str, Any]], label: str) -> str:
    within = sum(r["within"] for r in rows)
    inside = sum(r["inside"] for r in rows)
    errors = sorted(abs(r["error_pct"]) for r in rows)
    median = f"{errors[len(errors) // 2]:.1f} %" if errors else "—"
    largest = f"{errors[-1]:.1f} %" if errors else "—"
    verdict = "met" if meets_target(rows) else "MISSED"
    return (
        f"{label}: {len(rows)} records; within ±{TARGET_PCT:g} %: {within}/{len(rows)}"
        f" (target ≥ {TARGET_SHARE:.0%}: {verdict}); measured inside low–high: {inside}/{len(rows)};"
        f" median |error| {median}; max |error| {largest}"
    )


def report(rows: list[dict[str, Any]]) -> tuple[list[str], bool]:
    """Per group: the table and the tuning / hold-out summaries; True when every part meets its target."""
    lines: list[str] = []
    ok = True
    for group in GROUPS:
        members = [r for r in rows if r["group"] == group]
        parts = {"tuning": [r for r in members if not r["holdout"]], "hold-out": [r for r in members if r["holdout"]]}
        lines += ["", f"== {group} ==", *table(members), ""]
        lines += [summary(part, f"{group} {label}") for label, part in parts.items()]
        ok = ok and all(meets_target(part) for part in parts.values())
    return lines, ok


def main() -> int:
    lines, ok = report([compare(r) for r in load_records()])
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
