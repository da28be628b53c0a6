"""Launch commands (``recommendations.launch``): every runnable vLLM recommendation carries ``vllm serve …`` that passes
the flags of the pinned vLLM release (extracted from its PyPI sdist), and the command read back reproduces the
budget the recommendation judged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.recommend_speed import fixture_views
from budgets.engine import Workload, estimate
from budgets.engine import vllm as vllm_rules
from recommendations.launch import VLLM_FLAGS_RELEASE, engine_flags, vllm_launch, workload_from_vllm
from recommendations.plans import plan_workload
from recommendations.recommend import recommend
from recommendations.verdicts import Verdict

ROOT = Path(__file__).resolve().parents[2]
VLLM_EXAMPLES = [
    path
    for path in sorted((ROOT / "fixtures" / "workloads").glob("*.json"))
    if (json.loads(path.read_text()).get("inference") or {}).get("engine") == "vllm"
]
RUNNABLE = (Verdict.FITS, Verdict.TIGHT)


def _runnable(path: Path):
    workload = Workload.model_validate(json.loads(path.read_text()))
    views = {view.slug: view for view in fixture_views()}
    entries = [e for e in recommend(workload, list(views.values())) if e.verdict in RUNNABLE]
    return workload, views, entries


def test_the_flags_are_the_pinned_release_read_from_its_sdist() -> None:
    flags = engine_flags("vllm", VLLM_FLAGS_RELEASE)
    assert flags.release == vllm_rules.DEFAULT_VLLM_VERSION == "0.11.0"
    assert flags.source["sha256"] == "f435a64c24e9c4178d657a76f8edd8548ddc444012f7d06a9f79ac3a6392bfae"
    assert {"--tensor-parallel-size", "--max-model-len", "--gpu-memory-utilization", "--max-num-seqs"} <= flags.flags
    assert "fp8" in flags.choices["--kv-cache-dtype"] and "bfloat16" in flags.choices["--dtype"]


@pytest.mark.parametrize("path", VLLM_EXAMPLES, ids=lambda p: p.stem)
def test_every_runnable_entry_has_a_launch_the_release_accepts(path: Path) -> None:
    _, _, entries = _runnable(path)
    assert entries, "no fitting configuration: nothing was checked"
    flags = engine_flags("vllm", VLLM_FLAGS_RELEASE)
    for entry in entries:
        assert entry.launch is not None, entry.configuration["slug"]
        assert flags.problems(entry.launch.argv) == []
        assert entry.as_dict()["launch"]["text"] == entry.launch.text


@pytest.mark.parametrize("path", VLLM_EXAMPLES, ids=lambda p: p.stem)
def test_the_command_read_back_reproduces_the_budget(path: Path) -> None:
    workload, views, entries = _runnable(path)
    for entry in entries:
        assert entry.launch is not None and entry.plan is not None and entry.budget is not None
        served, plan = workload_from_vllm(entry.launch.argv, workload)
        assert plan == entry.plan
        view = views[entry.configuration["slug"]]
        again = estimate(
            plan_workload(served, plan), entry.usable_bytes, view.accelerator_name, view.compute_capability
        )
        assert again.per_device == entry.budget.per_device, entry.configuration["slug"]
        assert again.serving is not None and entry.budget.serving is not None
        assert again.serving.kv_pool_bytes == entry.budget.serving.kv_pool_bytes
        assert again.serving.max_concurrent_sessions_at_max_request == (
            entry.budget.serving.max_concurrent_sessions_at_max_request
        )


def test_a_renamed_flag_or_a_value_the_release_refuses_is_a_problem() -> None:
    _, _, entries = _runnable(VLLM_EXAMPLES[0])
    argv = list(entries[0].launch.argv)
    flags = engine_flags("vllm", VLLM_FLAGS_RELEASE)
    renamed = [("--max-num-sequences" if arg == "--max-num-seqs" else arg) for arg in argv]
    assert flags.problems(renamed) == ["--max-num-sequences: not a flag of vllm 0.11.0"]
    at = argv.index("--dtype") + 1
    assert flags.problems([*argv[:at], "bf16", *argv[at + 1 :]]) == [
        "--dtype bf16: not one of auto, half, float16, bfloat16, float, float32"
    ]


def test_no_launch_without_a_checkpoint_or_for_another_engine() -> None:
    workload = Workload.model_validate(json.loads(VLLM_EXAMPLES[0].read_text()))
    settings = {"tensor_parallel_size": 1, "pipeline_parallel_size": 1, "replicas": 1, "max_model_len": 4096,
                "max_num_seqs": 8, "max_num_batched_tokens": 4096}  # fmt: skip
    assert vllm_launch(workload, settings) is not None
    other = workload.model_copy(update={"inference": workload.inference.model_copy(update={"engine": "generic"})})
    assert vllm_launch(other, settings) is None
    assert vllm_launch(workload, {**settings, "tensor_parallel_size": None}) is None


@pytest.mark.parametrize("name", ["--trust-remote-code", "../../etc", "org/model\n", "/models/llama", "a b"])
def test_a_config_name_that_is_no_repository_gives_no_launch_not_an_error(name: str) -> None:
    """A config.json's ``_name_or_path`` is the user's text: only a repository id becomes the command's model (the
    same rule as a job's ``{model}``, ``ModelRef.hf_repo``); anything else gives no launch rather than a command
    vLLM would read as an option or a path, or a LaunchError."""
    config = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000,
              "max_position_embeddings": 8192}  # fmt: skip
    workload = Workload.model_validate(
        {"model": {"hf_config": {**config, "_name_or_path": name}}, "inference": {"engine": "vllm"}}
    )
    settings = {"tensor_parallel_size": 1, "pipeline_parallel_size": 1, "replicas": 1, "max_model_len": 4096,
                "max_num_seqs": 8, "max_num_batched_tokens": 4096}  # fmt: skip
    assert workload.model.hf_repo() is None
    assert vllm_launch(workload, settings) is None
    named = workload.model_copy(update={"model": workload.model.model_copy(update={"hf_config": {**config,
                                "_name_or_path": "org/tiny-llama"}})})  # fmt: skip
    assert vllm_launch(named, settings).argv[2] == "org/tiny-llama"
