"""The engine's peak against published training and framework-inference peaks (peaks.json).

    python -m benchmarks.gpu_published            # vLLM table, then these groups

Each record names the counter its figure is (allocated, reserved, device used); the engine's budget is
read on that same view (`per_device.views`). A record is within target when |error| ≤ 10 %; a group
meets its target when ≥ 80 % of its records are (issue 7: "within ±10 % on ≥ 80 %, with the hold-out part
reported apart"). The tuning and the hold-out records (every third record, fixed before any comparison;
HOLDOUT.md) are printed apart, then all together with the verdict, as the CPU benchmark does.

A training record whose measured figure is below its own lower bound (`lower_bound_bytes`: plain arithmetic
from the record's workload, no engine model) is `inconsistent`: the run cannot have been the stated setup.
It is printed with its bound, left out of the ±10 % count and counted on a line of its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from budgets.engine import Workload, estimate
from budgets.engine.dtypes import nbytes
from budgets.engine.models.parameters import parameter_count

HERE = Path(__file__).resolve().parent
GIB = 2**30
TARGET_PCT = 10.0
TARGET_SHARE = 0.8
GROUPS = ("training", "hf-inference", "frameworks", "hf-releases")
#: groups whose share within target decides the exit status; "frameworks" (torchtune, torchtitan, Unsloth, FSDP
#: offload: issue 17) is a report, each record judged against its own target (`target_pct`: the issue's 10 % or 15 %);
#: "hf-releases" (transformers releases other than the profiled 5.24: issue 17 item 4) is a report whose target is
#: the measured figure inside the budget's low–high range
JUDGED_GROUPS = ("training", "hf-inference")
VIEW_KEYS = {
    "allocated": "framework_allocated",
    "reserved": "framework_reserved",
    "device_used": "device_used",
    # optimum's GPTQ benchmark (tests/benchmark/benchmark_gptq.py:233-247 at 87fcf9f): the allocated peak plus
    # (nvidia-smi used − the reserved peak), i.e. plus what lies outside PyTorch's allocator (the CUDA context)
    "allocated_nontorch": "framework_allocated",
}


def load_records() -> list[dict[str, Any]]:
    return json.loads((HERE / "peaks.json").read_text())["records"]


def workload(record: dict[str, Any]) -> Workload:
    return Workload.model_validate(record["workload"])


def measured_bytes(record: dict[str, Any]) -> float:
    measured = record["measured"]
    return measured["value"] * measured["bytes_per_unit"]


def engine_view(record: dict[str, Any]) -> dict[str, int]:
    """The budget's low / expected / high bytes on the view the record measured; `allocated_nontorch` is
    framework_allocated + (device_used − framework_reserved), end by end."""
    views = estimate(workload(record)).as_contract()["per_device"]["views"]
    if record["view"] != "allocated_nontorch":
        return views[VIEW_KEYS[record["view"]]]
    allocated, reserved, used = views["framework_allocated"], views["framework_reserved"], views["device_used"]
    return {end: allocated[end] + used[end] - reserved[end] for end in ("low", "bytes", "high")}


def lower_bound_bytes(record: dict[str, Any]) -> float | None:
    """What any run of a training record's stated setup holds at once, after the forward: the weights
    in the stated precision (4-bit: 0.5 B per decoder weight, no scales; embedding, head and final norm
    16-bit; / data degree under ZeRO-3 / FSDP), the logits of one micro-batch in the compute dtype (every
    stack in these records computes the whole micro-batch's logits before its loss), and, with full
    checkpointing, every layer's input (tokens × hidden in the compute dtype). None for other groups and
    for tensor or pipeline parallel runs."""
    w = workload(record)
    t, par = w.training, w.parallelism
    if record["group"] != "training" or t is None or par.tensor > 1 or par.pipeline > 1:
        return None
    spec, d = w.spec, nbytes(w.precision.compute or "bf16")
    counts = parameter_count(spec)
    four_bit = w.precision.weights in ("int4", "nf4")
    decoder = counts.layers_total * (0.5 if four_bit else nbytes(w.precision.weights))
    outer = (counts.embedding + counts.lm_head + counts.final_norm) * (2 if four_bit else nbytes(w.precision.weights))
    shards = par.data if par.zero_stage >= 3 else 1
    tokens = t.micro_batch_size * t.sequence_length
    checkpoints = spec.num_layers * tokens * spec.hidden_size * d if t.activation_checkpointing == "full" else 0
    return (decoder + outer) / shards + tokens * spec.vocab_size * d + checkpoints


def compare(record: dict[str, Any]) -> dict[str, Any]:
    view = engine_view(record)
    measured = measured_bytes(record)
    error_pct = 100 * (view["bytes"] - measured) / measured
    bound = lower_bound_bytes(record)
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
        "target_pct": record.get("target_pct", TARGET_PCT),
        "within": abs(error_pct) <= record.get("target_pct", TARGET_PCT),
        "inside": view["low"] <= measured <= view["high"],
        "bound_gib": None if bound is None else bound / GIB,
        "inconsistent": bound is not None and measured < bound,
    }


def table(rows: list[dict[str, Any]]) -> list[str]:
    width = max([44, *(len(r["id"]) + 1 for r in rows)])
    vw = max([11, *(len(r["view"]) + 1 for r in rows if len(r["view"]) > 11)])
    head = (
        f"{'record':<{width}}{'set':<9}{'view':<{vw}}{'measured GiB':>13}{'engine GiB':>11}{'err %':>8}"
        f"{'low–high GiB':>16}  within/inside"
    )
    lines = [head]
    for r in rows:
        lines.append(
            f"{r['id']:<{width}}{'holdout' if r['holdout'] else 'tuning':<9}{r['view']:<{vw}}{r['measured_gib']:>13.2f}"
            f"{r['engine_gib']:>11.2f}{r['error_pct']:>+8.1f}{r['low_gib']:>8.2f}–{r['high_gib']:<7.2f}"
            f"  {'yes' if r['within'] else 'NO'}/{'yes' if r['inside'] else 'no'}"
            + (f"  INCONSISTENT: measured below its lower bound {r['bound_gib']:.2f} GiB" if r["inconsistent"] else "")
        )
    return lines


def meets_target(rows: list[dict[str, Any]]) -> bool:
    return bool(rows) and sum(r["within"] for r in rows) >= TARGET_SHARE * len(rows)


def inconsistent_line(rows: list[dict[str, Any]], label: str) -> str:
    bad = [r for r in rows if r["inconsistent"]]
    names = ", ".join(f"{r['id']} ({r['measured_gib']:.2f} < {r['bound_gib']:.2f} GiB)" for r in bad)
    return f"{label}: {len(bad)} inconsistent (measured below the setup's lower bound; not counted above)" + (
        f": {names}" if bad else ""
    )


def summary(rows: list[dict[str, Any]], label: str, judged: bool = False) -> str:
    within = sum(r["within"] for r in rows)
    targets = sorted({r["target_pct"] for r in rows}) or [TARGET_PCT]
    target = " or ".join(f"{t:g}" for t in targets)
    inside = sum(r["inside"] for r in rows)
    errors = sorted(abs(r["error_pct"]) for r in rows)
    median = f"{errors[len(errors) // 2]:.1f} %" if errors else "—"
    largest = f"{errors[-1]:.1f} %" if errors else "—"
    verdict = f" (target ≥ {TARGET_SHARE:.0%}: {'met' if meets_target(rows) else 'MISSED'})" if judged else ""
    return (
        f"{label}: {len(rows)} records; within ±{target} %: {within}/{len(rows)}{verdict};"
        f" measured inside low–high: {inside}/{len(rows)}; median |error| {median}; max |error| {largest}"
    )


def report(rows: list[dict[str, Any]]) -> tuple[list[str], bool]:
    """Per group: the table, the tuning / hold-out summaries and all together; True when every group meets
    its target."""
    lines: list[str] = []
    ok = True
    for group in GROUPS:
        members = [r for r in rows if r["group"] == group]
        counted = [r for r in members if not r["inconsistent"]]
        parts = {"tuning": [r for r in counted if not r["holdout"]], "hold-out": [r for r in counted if r["holdout"]]}
        lines += ["", f"== {group} ==", *table(members), ""]
        lines += [summary(part, f"{group} {label}") for label, part in parts.items()]
        judged = group in JUDGED_GROUPS
        lines.append(summary(counted, f"{group} all", judged=judged))
        if group == "training":
            for label, held in (("tuning", False), ("hold-out", True)):
                lines.append(inconsistent_line([r for r in members if r["holdout"] == held], f"{group} {label}"))
        if group == "frameworks":
            lines.append("frameworks: a report; each record within its own target (target_pct), not judged as a group")
        if group == "hf-releases":
            lines.append("hf-releases: a report; target: every measured figure inside the budget's low–high range")
        ok = ok and (meets_target(counted) or not judged)
    return lines, ok


def main() -> int:
    lines, ok = report([compare(r) for r in load_records()])
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
