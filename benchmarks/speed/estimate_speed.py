"""In-process speed of `budgets.engine.estimate()` over the example workloads.

    python -m benchmarks.speed.estimate_speed [--repeat N]

Prints, per workload and overall, the median and p90 time of `estimate()` on an already validated
workload, and of validation + estimate from the JSON dict. Target: median estimate ≤ 0.1 ms (issue 7).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from budgets.engine import Workload, estimate  # noqa: E402

TARGET_MEDIAN_MS = 0.1


def _times(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000.0)
    return out


def _p90(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=10)[-1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=2000)
    args = ap.parse_args(argv)
    payloads = {p.stem: json.loads(p.read_text()) for p in sorted((REPO / "fixtures" / "workloads").glob("*.json"))}
    all_est: list[float] = []
    all_full: list[float] = []
    print(f"{'workload':<40}{'estimate median ms':>20}{'p90':>10}{'validate+estimate median':>26}{'p90':>10}")
    for name, payload in payloads.items():
        w = Workload.model_validate(payload)
        estimate(w)  # warm caches (presets, parameter counts)
        est = _times(lambda w=w: estimate(w), args.repeat)
        full = _times(lambda p=payload: estimate(Workload.model_validate(p)), max(args.repeat // 4, 50))
        all_est += est
        all_full += full
        print(
            f"{name:<40}{statistics.median(est):>20.4f}{_p90(est):>10.4f}{statistics.median(full):>26.4f}{_p90(full):>10.4f}"
        )
    med = statistics.median(all_est)
    print(f"{'ALL':<40}{med:>20.4f}{_p90(all_est):>10.4f}{statistics.median(all_full):>26.4f}{_p90(all_full):>10.4f}")
    print(f"target: median estimate ≤ {TARGET_MEDIAN_MS} ms → {'met' if med <= TARGET_MEDIAN_MS else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
