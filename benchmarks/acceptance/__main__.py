"""Run the synthetic acceptance workload for example CPU workloads through the real runner and compare
each measured view with the engine's budget.

    .venv/bin/python -m benchmarks.acceptance [WORKLOAD.json ...]

Prints, per workload: outcome, framework allocated peak, host RSS peak, the budget's expected peak and
low–high range, measured/estimated, and whether the measurement lies inside the range. Needs torch
(``pip install 'vramplan[node]'``). Defaults: fixtures/workloads/cpu-*.json.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from budgets.engine import Workload, estimate
from workers.runner.execute import RunOptions, run_measured
from workers.runner.plan import synthetic_argv

ROOT = Path(__file__).resolve().parents[2]
MB = 10**6


def measure(path: Path) -> dict:
    description = json.loads(path.read_text())
    budget = estimate(Workload.model_validate(description)).as_contract()
    with tempfile.TemporaryDirectory() as folder:
        spec = Path(folder) / "spec.json"
        spec.write_text(json.dumps({"workload": description, "device": "cpu", "quality": False}))
        document = run_measured(RunOptions(argv=synthetic_argv(str(spec)), cwd=folder, time_limit_s=900))
    total = budget["per_device"]["total"]
    allocated = document["peaks"]["framework_allocated_bytes"]
    return {
        "workload": path.name,
        "outcome": document["outcome"],
        "allocated_mb": allocated / MB if allocated else None,
        "rss_mb": (document["peaks"]["host_rss_bytes"] or 0) / MB,
        "budget_mb": total["bytes"] / MB,
        "range_mb": (total["low"] / MB, total["high"] / MB),
        "ratio": allocated / total["bytes"] if allocated else None,
        "in_range": allocated is not None and total["low"] <= allocated <= total["high"],
        "seconds": document["duration_seconds"],
    }


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or sorted((ROOT / "fixtures" / "workloads").glob("cpu-*.json"))
    print(f"{'workload':<34}{'outcome':>10}{'alloc MB':>11}{'RSS MB':>9}{'budget MB':>11}{'low–high MB':>19}"
          f"{'ratio':>8}{'in range':>9}{'s':>7}")  # fmt: skip
    for path in paths:
        r = measure(path)
        alloc = f"{r['allocated_mb']:.1f}" if r["allocated_mb"] is not None else "—"
        ratio = f"{r['ratio']:.3f}" if r["ratio"] is not None else "—"
        low, high = r["range_mb"]
        span = f"{low:.1f}–{high:.1f}"
        inside = "yes" if r["in_range"] else "no"
        print(f"{r['workload']:<34}{r['outcome']:>10}{alloc:>11}{r['rss_mb']:>9.1f}{r['budget_mb']:>11.1f}"
              f"{span:>19}{ratio:>8}{inside:>9}{r['seconds']:>7.1f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
