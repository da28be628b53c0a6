"""The published GPU records: vLLM start-up reports (records.json) and training / framework-inference peaks
(peaks.json) — complete records, valid workloads, the hold-out rule, and a comparison that reads the measured view."""

from __future__ import annotations

import re

import pytest

from benchmarks.gpu_published import __main__ as published
from benchmarks.gpu_published import peaks

RECORDS = peaks.load_records()
HERE = peaks.HERE
PINNED_URL = re.compile(r"^https://github\.com/[^/]+/[^/]+/blob/[0-9a-f]{40}/\S+$")


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r["id"])
def test_record_names_its_source_quote_view_and_unit(record: dict) -> None:
    assert PINNED_URL.match(record["source"]) and PINNED_URL.match(record["method_source"])
    assert record["quote"] and all(isinstance(line, str) and line.strip() for line in record["quote"])
    assert record["group"] in peaks.GROUPS
    assert record["view"] in peaks.VIEW_KEYS
    assert record["measured"]["printed_unit"] in ("GB", "GiB")
    assert record["measured"]["bytes_per_unit"] in (10**9, 2**30)
    assert record["measured"]["value"] > 0


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r["id"])
def test_workload_validates_under_the_record_id(record: dict) -> None:
    assert peaks.workload(record).name == record["id"]


def test_ids_are_unique_and_every_third_record_is_held_out() -> None:
    """In the judged groups. The frameworks group (a report) holds out the records added after its profiles were
    written (round 1, HOLDOUT.md), not a positional third: its first six were compared while the profiles were built."""
    assert len({r["id"] for r in RECORDS}) == len(RECORDS)
    judged = [r for r in RECORDS if r["group"] in peaks.JUDGED_GROUPS]
    assert [r["holdout"] for r in judged] == [i % 3 == 0 for i in range(1, len(judged) + 1)]
    for group in peaks.JUDGED_GROUPS:
        members = [r for r in RECORDS if r["group"] == group]
        assert any(r["holdout"] for r in members) and any(not r["holdout"] for r in members)
    holdout = (HERE / "HOLDOUT.md").read_text()
    assert all(r["id"] in holdout for r in RECORDS if r["group"] not in peaks.JUDGED_GROUPS and r["holdout"])


def _measuring(record: dict, view: str, gib: float) -> dict:
    return {**record, "view": view, "measured": {"value": gib, "printed_unit": "GiB", "bytes_per_unit": 2**30}}


def test_compare_reads_the_engine_on_the_records_view() -> None:
    record = next(r for r in RECORDS if r["group"] == "training")
    reserved = peaks.engine_view(_measuring(record, "reserved", 1.0))["bytes"] / 2**30
    on_reserved = peaks.compare(_measuring(record, "reserved", reserved))
    on_allocated = peaks.compare(_measuring(record, "allocated", reserved))
    assert on_reserved["error_pct"] == pytest.approx(0.0, abs=1e-9) and on_reserved["within"]
    assert on_allocated["engine_gib"] < on_reserved["engine_gib"]
    assert on_allocated["error_pct"] < 0


def test_a_group_meets_its_target_at_eighty_percent_within() -> None:
    def rows(within: int, total: int) -> list[dict]:
        return [{"within": i < within} for i in range(total)]

    assert peaks.meets_target(rows(4, 5))
    assert not peaks.meets_target(rows(3, 5))
    assert not peaks.meets_target([])


def test_lower_bound_is_weights_logits_and_checkpointed_inputs() -> None:
    record = next(r for r in RECORDS if r["id"] == "torchtune-4090-llama-3.1-8b-lora")
    tokens = 2 * 2048
    # Llama 3.1 8B: 8,030,261,248 bf16 parameters, 128,256-token vocabulary, 32 checkpointed layers of 4,096
    expected = 8_030_261_248 * 2 + tokens * 128_256 * 2 + 32 * tokens * 4096 * 2
    assert peaks.lower_bound_bytes(record) == expected


def test_a_record_below_its_lower_bound_is_inconsistent_and_not_counted() -> None:
    record = next(r for r in RECORDS if r["group"] == "training")
    bound = peaks.lower_bound_bytes(record) / 2**30
    below = peaks.compare(_measuring(record, record["view"], bound * 0.99))
    above = peaks.compare(_measuring(record, record["view"], bound * 1.01))
    assert below["inconsistent"] and not above["inconsistent"]
    lines, _ = peaks.report([below, above])
    assert any("1 inconsistent" in line for line in lines)
    part = "hold-out" if record["holdout"] else "tuning"
    assert any(line.startswith(f"training {part}: 1 records") for line in lines)
    # the verdict is on the group's counted records together; the parts are reported apart
    assert any(line.startswith("training all: 1 records") and "target" in line for line in lines)
    assert not any(line.startswith(f"training {part}:") and "target" in line for line in lines)


def test_framework_inference_records_get_no_lower_bound() -> None:
    assert all(peaks.lower_bound_bytes(r) is None for r in RECORDS if r["group"] != "training")


# --- vLLM start-up records (records.json, `python -m benchmarks.gpu_published`) ---------------------------------

VLLM_RECORDS = published.load_records()
VLLM_FIELDS = {
    "id", "holdout", "source", "quote", "model", "precision", "tensor", "max_model_len", "gpu_memory_utilization",
    "kv_block_tokens", "device_memory_gib", "device_name", "vllm_version", "printed", "notes",
}  # fmt: skip
# each round of records was marked before the engine was run on it (HOLDOUT.md); its first record opens it
VLLM_ROUNDS = ("llmd-h100-llama-3.1-8b", "p205-h100-qwen3-14b-v0.15", "h200log-qwen3-next-80b-a3b-tp2")


@pytest.mark.parametrize("record", VLLM_RECORDS, ids=lambda r: r["id"])
def test_vllm_record_names_its_source_quote_model_and_settings(record: dict) -> None:
    assert set(record) - VLLM_FIELDS <= set(published.SETTINGS), f"unknown fields {set(record) - VLLM_FIELDS}"
    assert set(record) >= VLLM_FIELDS
    # a URL, or a stored copy whose repository could not be resolved, said so in words
    assert re.match(r"^https://\S+$", record["source"]) or re.match(r"^unpinned: \S.{40,}", record["source"])
    assert record["quote"] and all(isinstance(line, str) and line.strip() for line in record["quote"])
    assert list(record["model"]) in (["preset"], ["config"])
    if "config" in record["model"]:
        assert (published.HF_CONFIGS / f"{record['model']['config']}.json").is_file()
    assert record["precision"] is None or isinstance(record["precision"], dict)
    assert all(isinstance(record[key], int) and record[key] > 0 for key in published.SETTINGS if key in record)
    assert record["device_memory_gib"] > 0 and record["device_name"] and record["vllm_version"]
    printed = record["printed"]
    assert set(printed) <= {"kv_cache_gib", "kv_cache_tokens", "max_concurrency", "starts"}
    assert isinstance(printed["starts"], bool)
    assert "kv_cache_gib" in printed or "kv_cache_tokens" in printed or not printed["starts"]


@pytest.mark.parametrize("record", VLLM_RECORDS, ids=lambda r: r["id"])
def test_vllm_workload_carries_the_records_model_precision_and_settings(record: dict) -> None:
    w = published.workload(record)
    assert w.name == record["id"]
    assert w.inference is not None and w.inference.max_model_len == record["max_model_len"]
    for key in published.SETTINGS:
        assert getattr(w.inference, key) == record.get(key)
    if "config" in record["model"]:
        assert w.model is not None and w.model.hf_config == published.hf_config(record["model"]["config"])
    if record["precision"] is None:  # the checkpoint's own: its quantized Linears' precision, else the default
        assert w.model is not None
        ckpt = w.model.checkpoint_weights
        assert w.precision.weights == (ckpt.precision if ckpt is not None and ckpt.precision else "bf16")
    else:
        assert w.precision.weights == record["precision"]["weights"]


def test_vllm_ids_are_unique_and_every_third_record_of_a_round_is_held_out() -> None:
    ids = [r["id"] for r in VLLM_RECORDS]
    assert len(set(ids)) == len(ids)
    starts = [ids.index(first) for first in VLLM_ROUNDS]
    assert starts == sorted(starts) and starts[0] == 0
    for begin, end in zip(starts, [*starts[1:], len(ids)], strict=True):
        marks = [r["holdout"] for r in VLLM_RECORDS[begin:end]]
        assert marks == [i % 3 == 0 for i in range(1, len(marks) + 1)], ids[begin]


def test_a_config_record_reads_the_folder_config_and_its_quantization() -> None:
    record = next(r for r in VLLM_RECORDS if r["model"] == {"config": "gpt-oss-120b"} and r["precision"] is None)
    assert published.workload(record).precision.weights == "mxfp4"  # quantization_config: quant_method mxfp4
    assert published.workload({**record, "precision": {"weights": "bf16"}}).precision.weights == "bf16"
    bare = {k: v for k, v in record.items() if k not in published.SETTINGS}
    inference = published.workload(bare).inference
    assert inference is not None and inference.max_num_batched_tokens is None and inference.max_num_seqs is None
    for bad in ({"config": "gpt-oss-120b", "preset": "llama-3.1-8b"}, {"config": "../gpt-oss-120b"}):
        with pytest.raises(ValueError):
            published.model_ref(bad)
