"""The engine's SGLang pool against published SGLang start-up reports (records.json, README.md).

    python -m benchmarks.sglang_published      # the table, then tuning and hold-out summaries

Per record: the engine's KV pool (GiB and tokens) vs the printed one ("KV Cache is allocated. #tokens: N, K size:
a GB, V size: b GB": K + V; SGLang's "GB" is GiB), the error, whether it is within target (|error| ≤ 1 GiB or
≤ 3 %), whether both agree that SGLang starts, and the default mem_fraction_static of the record's release
(0.5.10.post1's where the record names no release) next to the one the run used. Hold-out records (HOLDOUT.md:
round 1 every third by id, round 2 every third by source URL) are summarised apart, round by round. A record that
prints its pool in tokens only ("max_total_num_tokens=N") is compared in GiB through the engine's bytes per token
("tok" in the table). A report, not a gate: the exit status is 0.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from benchmarks.gpu_published.pools import TARGET_GIB, TARGET_PCT, fmt, pool_error, startup_workload
from budgets.engine import Workload, estimate
from budgets.engine import sglang as rules
from budgets.engine.components import runtime as rt

HERE = Path(__file__).resolve().parent
GIB = 2**30
# a release string the engine takes as runtime.engine_version ("0.5.19", "0.5.10.post1"); source builds give none
RELEASE = re.compile(r"^\d+\.\d+\.\d+(\.post\d+)?$")


def load_records() -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = json.loads((HERE / "records.json").read_text())["records"]
    return records


def workload(record: dict[str, Any]) -> Workload:
    inference: dict[str, Any] = {"engine": "sglang"}
    if record["mem_fraction_static"] is not None:
        inference["gpu_memory_utilization"] = record["mem_fraction_static"]
    if record.get("chunked_prefill_size"):
        inference["max_num_batched_tokens"] = record["chunked_prefill_size"]
    if record.get("page_size"):
        inference["kv_block_tokens"] = record["page_size"]
    # a build that is no release gives the release series it belongs to as engine_release
    version = record.get("engine_release") or record.get("sglang_version") or ""
    runtime = {"engine_version": version} if RELEASE.match(version) else None
    return startup_workload(
        record["id"], record["model"], record["precision"], record["tensor"], record["context_len"], inference, runtime
    )


def device_memory_bytes(record: dict[str, Any]) -> int:
    """T: the GPU's as CUDA reports it, or the printed free memory before load + the engine's start-up use (the CUDA
    context of an unnamed GPU; NCCL where tensor > 1, none of these records)."""
    if record["device_memory_gib"] is not None:
        return int(record["device_memory_gib"] * GIB)
    context, _ = rt.cuda_context("cuda", None, record["device_name"])
    assert record["tensor"] == 1
    return int(record["free_before_load_gib"] * GIB) + context.bytes


def printed_tokens(printed: dict[str, Any]) -> int | None:
    """The pool in tokens as printed: the "KV Cache is allocated. #tokens: N" line, else the scheduler's
    "max_total_num_tokens=N", else a figure the source's author summarised (a table or prose, not a log line)."""
    for key in ("kv_tokens", "max_total_num_tokens", "summary_tokens"):
        if printed.get(key) is not None:
            return int(printed[key])
    return None


def refused(record: dict[str, Any]) -> str | None:
    """Why the engine refuses the record's release (SGLang before 0.5.3: ``runtime.engine_version``), or None."""
    try:
        workload(record)
    except ValidationError as exc:
        return "; ".join(str(error["msg"]) for error in exc.errors())
    return None


def compare(record: dict[str, Any]) -> dict[str, Any]:
    reason = refused(record)
    if reason is not None:  # no budget: the engine says it does not model the release, not whether it starts
        return {"id": record["id"], "round": record.get("round", 1), "holdout": record["holdout"],
                "refused": reason, "printed_starts": record["printed"]["starts"]}  # fmt: skip
    w = workload(record)
    t = device_memory_bytes(record)
    plan = estimate(w, device_memory_bytes=t, device_name=record["device_name"]).serving
    assert plan is not None and plan.kv_pool_bytes is not None
    version = w.runtime.engine_version or rules.SGLANG_VERSION
    default = rules.server_defaults(w.spec, t, record["device_name"], record["tensor"], 1, version=version)
    printed = record["printed"]
    row: dict[str, Any] = {
        "id": record["id"],
        "round": record.get("round", 1),
        "holdout": record["holdout"],
        "mfs": record["mem_fraction_static"] or default.mem_fraction_static,
        "default_mfs": default.mem_fraction_static,
        "engine_gib": plan.kv_pool_bytes / GIB,
        "engine_tokens": plan.kv_pool_tokens,
        "engine_starts": plan.starts,
        "printed_starts": printed["starts"],
        "printed_gib": printed.get("kv_gib"),
        "printed_tokens": printed_tokens(printed),
        "from_tokens": False,
    }
    if row["printed_gib"] is None and row["printed_tokens"] is not None:
        # the pool printed in tokens only: in GiB through the engine's bytes per token of this rank
        row["printed_gib"] = row["printed_tokens"] * plan.kv_bytes_per_token / GIB
        row["from_tokens"] = True
    if row["printed_gib"] is not None:
        pool_error(row, row["engine_gib"], row["printed_gib"])
    return row


def summary(rows: list[dict[str, Any]], label: str) -> str:
    budgeted = [r for r in rows if "refused" not in r]
    sized = [r for r in budgeted if "error_gib" in r]
    within = sum(1 for r in sized if r["within"])
    agree = sum(1 for r in budgeted if r["engine_starts"] == r["printed_starts"])
    errs = sorted(abs(r["error_pct"]) for r in sized)
    median = fmt(errs[len(errs) // 2] if errs else None, ".1f")
    refusals = len(rows) - len(budgeted)
    return (
        f"{label}: {len(rows)} records; KV pool within ±{TARGET_GIB:g} GiB or ±{TARGET_PCT:g} %: {within}/{len(sized)};"
        f" starts agree: {agree}/{len(budgeted)}; median |error| {median} %;"
        f" max |error| {fmt(errs[-1] if errs else None, '.1f')} %"
        + (f"; release refused: {refusals}" if refusals else "")
    )


def table(rows: list[dict[str, Any]]) -> list[str]:
    head = (
        f"{'record':<46}{'rnd':<4}{'set':<9}{'mfs':>6}{'dflt':>7}{'engine GiB':>11}{'SGLang GiB':>11}{'err GiB':>9}"
        f"{'err %':>8}{'engine tok':>12}{'SGLang tok':>11}  within  starts (engine/SGLang)"
    )
    lines = [head]
    for r in rows:
        if "refused" in r:
            set_name = "holdout" if r["holdout"] else "tuning"
            lines.append(f"{r['id']:<46}{r['round']:<4}{set_name:<9}  refused: {r['refused'][:110]}")
            continue
        within = "—" if "within" not in r else ("yes" if r["within"] else "NO")
        lines.append(
            f"{r['id']:<46}{r['round']:<4}{'holdout' if r['holdout'] else 'tuning':<9}{r['mfs']:>6.3f}"
            f"{r['default_mfs']:>7.3f}{r['engine_gib']:>11.2f}"
            f"{fmt(r['printed_gib'], '.2f') + ('tok' if r['from_tokens'] else ''):>11}"
            f"{fmt(r.get('error_gib'), '+.2f'):>9}"
            f"{fmt(r.get('error_pct'), '+.1f'):>8}{fmt(r['engine_tokens'], ','):>12}"
            f"{fmt(r['printed_tokens'], ','):>11}  {within:<7} {r['engine_starts']}/{r['printed_starts']}"
            + ("" if r["engine_starts"] == r["printed_starts"] else "  MISMATCH")
        )
    return lines


def main() -> int:
    rows = [compare(r) for r in load_records()]
    print("\n".join(table(rows)))
    print()
    for n in sorted({r["round"] for r in rows}):
        this = [r for r in rows if r["round"] == n]
        print(summary([r for r in this if not r["holdout"]], f"round {n} tuning"))
        print(summary([r for r in this if r["holdout"]], f"round {n} hold-out"))
    print(summary([r for r in rows if not r["holdout"]], "tuning"))
    print(summary([r for r in rows if r["holdout"]], "hold-out"))
    print(summary(rows, "all"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
