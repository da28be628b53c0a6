"""The engine against published GPU measurements: vLLM start-up reports (records.json), then training and
framework-inference peaks (peaks.json, `peaks.py`).

    python -m benchmarks.gpu_published            # tables, tuning and hold-out summaries

Per vLLM record: the engine's pool (GiB) vs vLLM's "Available KV cache memory", the error in GiB and %,
tokens where vLLM printed them, and whether both agree that vLLM starts. A record is within target
when |error| ≤ 1 GiB or ≤ 3 %. Hold-out records (chosen before any comparison, HOLDOUT.md) are
summarised apart and are never used to tune the engine. The vLLM part is a report, not a gate; the
exit status is 1 when a training or framework-inference part misses its target (`peaks.py`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from benchmarks.gpu_published.pools import TARGET_GIB, TARGET_PCT, fmt, pool_error, startup_workload
from budgets.engine import Workload, estimate

from . import peaks

HERE = Path(__file__).resolve().parent
GIB = 2**30
HF_CONFIGS = HERE.parents[1] / "tests" / "engine" / "data" / "hf_configs"
CONFIG_ID = re.compile(r"^[a-z0-9][a-z0-9.\-]*$")
# vLLM settings a record may carry when its log states them; absent, the engine takes vLLM's defaults
SETTINGS = ("max_num_seqs", "max_num_batched_tokens")


def hf_config(config_id: str) -> dict[str, Any]:
    """The config.json of `tests/engine/data/hf_configs/<config_id>.json` (its `config` field)."""
    if not CONFIG_ID.match(config_id):
        raise ValueError(f"not a config id: {config_id!r}")
    config: dict[str, Any] = json.loads((HF_CONFIGS / f"{config_id}.json").read_text())["config"]
    return config


def model_ref(model: dict[str, Any]) -> dict[str, Any]:
    """A record's model as a workload model ref: `{"config": id}` becomes `{"hf_config": <that config.json>}`."""
    if "config" in model:
        if set(model) != {"config"}:
            raise ValueError(f"a config model ref takes nothing else: {sorted(model)}")
        return {"hf_config": hf_config(model["config"])}
    return model


def workload(record: dict[str, Any]) -> Workload:
    inference: dict[str, Any] = {
        "engine": "vllm",
        "kv_block_tokens": record["kv_block_tokens"],
        "gpu_memory_utilization": record["gpu_memory_utilization"],
    }
    inference.update({key: record[key] for key in SETTINGS if key in record})
    return startup_workload(
        record["id"],
        model_ref(record["model"]),
        record["precision"],
        record["tensor"],
        record["max_model_len"],
        inference,
        {"engine_version": record["vllm_version"]},
    )


def compare(record: dict[str, Any]) -> dict[str, Any]:
    t = int(record["device_memory_gib"] * GIB)
    plan = estimate(workload(record), device_memory_bytes=t, device_name=record["device_name"]).serving
    assert plan is not None and plan.available_kv_bytes is not None
    printed = record["printed"]
    row: dict[str, Any] = {
        "id": record["id"],
        "holdout": record["holdout"],
        "engine_gib": plan.available_kv_bytes / GIB,
        "engine_tokens": plan.kv_pool_tokens,
        "engine_starts": plan.starts,
        "vllm_starts": printed["starts"],
        "vllm_gib": printed.get("kv_cache_gib"),
        "vllm_tokens": printed.get("kv_cache_tokens"),
        "profile": plan.profile,
    }
    if row["vllm_gib"] is not None:
        pool_error(row, row["engine_gib"], row["vllm_gib"])
    return row


def summary(rows: list[dict[str, Any]], label: str) -> str:
    sized = [r for r in rows if "error_gib" in r]
    within = sum(1 for r in sized if r["within"])
    agree = sum(1 for r in rows if r["engine_starts"] == r["vllm_starts"])
    errs = sorted(abs(r["error_gib"]) for r in sized)
    median = errs[len(errs) // 2] if errs else None
    return (
        f"{label}: {len(rows)} records; KV within ±{TARGET_GIB:g} GiB or ±{TARGET_PCT:g} %: {within}/{len(sized)};"
        f" starts agree: {agree}/{len(rows)}; median |error| {fmt(median, '.2f')} GiB;"
        f" max |error| {fmt(errs[-1] if errs else None, '.2f')} GiB"
    )


def load_records() -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = json.loads((HERE / "records.json").read_text())["records"]
    return records


def vllm_report() -> None:
    rows = [compare(r) for r in load_records()]
    head = f"{'record':<44}{'set':<9}{'prof':<6}{'engine GiB':>11}{'vLLM GiB':>10}{'err GiB':>9}{'err %':>8}"
    print(head + f"{'engine tok':>12}{'vLLM tok':>10}  starts (engine/vLLM)")
    for r in rows:
        print(
            f"{r['id']:<44}{'holdout' if r['holdout'] else 'tuning':<9}{r['profile']:<6}{r['engine_gib']:>11.2f}"
            f"{fmt(r['vllm_gib'], '.2f'):>10}{fmt(r.get('error_gib'), '+.2f'):>9}"
            f"{fmt(r.get('error_pct'), '+.1f'):>8}"
            f"{fmt(r['engine_tokens'], ','):>12}{fmt(r['vllm_tokens'], ','):>10}"
            f"  {r['engine_starts']}/{r['vllm_starts']}"
            + ("" if r["engine_starts"] == r["vllm_starts"] else "  MISMATCH")
        )
    print()
    print(summary([r for r in rows if not r["holdout"]], "tuning"))
    print(summary([r for r in rows if r["holdout"]], "hold-out"))
    print(summary(rows, "all"))


def main() -> int:
    vllm_report()
    return peaks.main()


if __name__ == "__main__":
    raise SystemExit(main())
