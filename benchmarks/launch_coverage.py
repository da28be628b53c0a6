"""How many runnable recommendations carry a launch command, over the example workloads and the committed catalog.

    python -m benchmarks.launch_coverage [--check]

For every workload in ``fixtures/workloads/`` the catalog (``fixtures/catalog``, without a database: the views
``benchmarks.recommend_speed`` builds) is ranked with ``recommendations.recommend()``, and each ``fits`` or ``tight``
entry is counted as launched (its ``launch`` passed the engine's or framework's pinned check when it was built) or
not, with the reason ``manage.py recommend --launch`` prints. Issue 17's "every fits recommendation carries a launch":
``--check`` exits 1 when an entry without one has a reason other than the workload naming no checkpoint that
vramplan can build from its numbers either (``recommendations.scratch``), the one refusal no plan can lift.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.recommend_speed import fixture_views  # noqa: E402
from budgets.engine import Workload  # noqa: E402
from recommendations.recommend import no_launch_reason, recommend  # noqa: E402
from recommendations.verdicts import Verdict  # noqa: E402

EXAMPLES = REPO / "fixtures" / "workloads"
RUNNABLE = (Verdict.FITS, Verdict.TIGHT)
#: The refusals no plan can lift: the workload names no checkpoint to load, and its numbers build none.
NO_CHECKPOINT = "names no checkpoint"


def coverage(views: list) -> dict[str, tuple[int, Counter[str]]]:
    """Per example: its runnable entries, and how many lack a launch, by reason."""
    out = {}
    for path in sorted(EXAMPLES.glob("*.json")):
        workload = Workload.model_validate(json.loads(path.read_text()))
        runnable = [e for e in recommend(workload, views) if e.verdict in RUNNABLE]
        out[path.stem] = (
            len(runnable),
            Counter(no_launch_reason(workload, e) or "" for e in runnable if e.launch is None),
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when an entry lacks a launch it could have")
    args = parser.parse_args(argv)
    views = fixture_views()
    print(f"{len(views)} configurations (fixtures/catalog); fits and tight entries of each example workload")
    print(f"{'workload':<40}{'runnable':>9}{'launched':>10}  without a launch")
    total = launched = 0
    lifted: list[str] = []
    for stem, (runnable, missing) in coverage(views).items():
        without = sum(missing.values())
        total, launched = total + runnable, launched + runnable - without
        print(
            f"{stem:<40}{runnable:>9}{runnable - without:>10}  "
            + "; ".join(f"{n}: {why}" for why, n in missing.items())
        )
        lifted += [f"{stem}: {why}" for why in missing if NO_CHECKPOINT not in why]
    print(f"{'all':<40}{total:>9}{launched:>10}")
    if args.check and lifted:
        print("entries without a launch they could have:\n  " + "\n  ".join(lifted), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
