"""Training launches (``recommendations.training_launch``): a torchtune workload's runnable entries carry ``tune run …``
that torchtune 0.6.1 (its recipes and configs, extracted from PyPI's wheel) accepts and reads every key of, and the
command read back reproduces the budget the recommendation judged, or one no larger where the notes name what the
recipes run instead."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.recommend_speed import fixture_views
from budgets.engine import Workload, estimate
from budgets.engine.frameworks import framework_profile
from recommendations.plans import Plan, plan_workload
from recommendations.recommend import recommend
from recommendations.training_launch import (
    LESS,
    TORCHTUNE_RELEASE,
    UNLAUNCHED_FRAMEWORKS,
    TuneCommand,
    no_training_launch,
    torchtune_release,
    training_launch,
    workload_from_torchtune,
)
from recommendations.verdicts import Verdict

ROOT = Path(__file__).resolve().parents[2]
TRAINING_EXAMPLES = [
    path for path in sorted((ROOT / "fixtures" / "workloads").glob("*.json"))
    if json.loads(path.read_text()).get("task") == "training"
]  # fmt: skip
RUNNABLE = (Verdict.FITS, Verdict.TIGHT)
VIEWS = {view.slug: view for view in fixture_views()}


def _torchtune(data: dict[str, Any]) -> Workload:
    training = {**data.get("training", {}), "framework": "torchtune"}
    return Workload.model_validate({**data, "training": training})


def _example(path: Path) -> Workload:
    return _torchtune(json.loads(path.read_text()))


def _runnable(workload: Workload):
    return [entry for entry in recommend(workload, list(VIEWS.values())) if entry.verdict in RUNNABLE]


def _budget(workload: Workload, plan: Plan, slug: str, usable: int):
    view = VIEWS[slug]
    return estimate(plan_workload(workload, plan), usable, view.accelerator_name, view.compute_capability)


def _workload(preset: str = "llama-3.2-1b", **training: Any) -> Workload:
    """A workload torchtune runs as budgeted: one dtype throughout (no master copy), full or no recomputation."""
    zero = {"parameters": 3, "optimizer": 1}.get(training.get("cpu_offload", ""), 0)  # the offload's (the schema's)
    return _torchtune({"task": "training", "model": {"preset": preset},
                       "precision": {"weights": "bf16", "gradients": "bf16"}, "parallelism": {"zero_stage": zero},
                       "training": {"micro_batch_size": 2, "sequence_length": 1024, **training}})  # fmt: skip


def test_the_fixture_is_the_pinned_release_read_from_its_wheel() -> None:
    release = torchtune_release(TORCHTUNE_RELEASE)
    assert release.release == framework_profile("torchtune").release == "0.6.1"
    assert release.source["sha256"] == "bcbc4ee9774b5c5829a5ff13df851e0b0e32416c018af8db53faa3472ac256e7"
    assert release.source["wheel"] == "torchtune-0.6.1-py3-none-any.whl"
    assert "torchtune/_recipe_registry.py" in release.source["files"]
    assert set(release.recipes) == {"full_finetune_single_device", "full_finetune_distributed",
                                    "lora_finetune_single_device", "lora_finetune_distributed"}  # fmt: skip
    assert release.recipes["full_finetune_distributed"]["supports_distributed"]
    assert not release.recipes["lora_finetune_single_device"]["supports_distributed"]
    assert "llama3_2/1B_full_single_device" in release.recipes["full_finetune_single_device"]["configs"]
    assert {"fsdp_cpu_offload", "tensor_parallel_dim", "optimizer_in_bwd"} <= set(
        release.recipes["full_finetune_distributed"]["reads"]
    )
    assert "tensor_parallel_dim" not in release.recipes["lora_finetune_distributed"]["reads"]
    assert release.lora_attn_modules == ("q_proj", "k_proj", "v_proj", "output_proj")
    assert "--nproc_per_node" in release.torchrun_flags


@pytest.mark.parametrize("path", TRAINING_EXAMPLES, ids=lambda p: p.stem)
def test_every_runnable_entry_has_a_launch_the_release_accepts_or_a_reason(path: Path) -> None:
    workload = _example(path)
    entries = _runnable(workload)
    assert entries, "no fitting configuration: nothing was checked"
    release = torchtune_release(TORCHTUNE_RELEASE)
    for entry in entries:
        launch = training_launch(workload, entry.suggested_settings, entry.plan)
        reason = no_training_launch(workload, entry.suggested_settings, entry.plan)
        assert (launch is None) != (reason is None), entry.configuration["slug"]
        if launch is not None:
            assert release.problems(launch.argv) == []
            assert launch.checked_against == "torchtune 0.6.1" and launch.engine == "torchtune"
            assert TuneCommand.parse(launch.argv).argv == launch.argv


def test_the_examples_torchtune_builds_launch_and_those_it_cannot_say_why() -> None:
    """Llama 3.x and Qwen2.5 have builders in 0.6.1; the ZeRO paper's 7.5B architecture has none, and a pipeline
    plan none of the recipes runs."""
    reasons: dict[str, set[str]] = {}
    launched: dict[str, int] = {}
    for path in TRAINING_EXAMPLES:
        workload = _example(path)
        for entry in _runnable(workload):
            reason = no_training_launch(workload, entry.suggested_settings, entry.plan)
            reasons.setdefault(path.stem, set()).add(reason or "")
            launched[path.stem] = launched.get(path.stem, 0) + (reason is None)
    for stem in ("train-llama-3.1-8b-lora", "train-llama-3.2-1b-full-bf16-adamw", "train-qwen2.5-14b-qlora-int4",
                 "train-llama-3.1-70b-tp4-pp4", "cpu-qwen2.5-0.5b-train"):  # fmt: skip
        assert launched[stem] > 0, stem
    assert launched["train-zero3-dp64-7.5b"] == 0
    assert any("builds this model's architecture" in r for r in reasons["train-zero3-dp64-7.5b"])
    assert any("pipeline parallelism" in r for r in reasons["train-zero3-dp64-7.5b"])


@pytest.mark.parametrize("path", TRAINING_EXAMPLES, ids=lambda p: p.stem)
def test_the_command_read_back_reproduces_the_budget_or_one_no_larger_where_the_notes_say(path: Path) -> None:
    workload = _example(path)
    for entry in _runnable(workload):
        launch = training_launch(workload, entry.suggested_settings, entry.plan)
        if launch is None:
            continue
        read, plan = workload_from_torchtune(launch.argv, workload)
        assert (plan.tensor, plan.pipeline, plan.replicas) == (entry.plan.tensor, 1, entry.plan.replicas)
        again = _budget(read, plan, entry.configuration["slug"], entry.usable_bytes)
        if any(note.endswith(LESS) for note in launch.notes):
            assert again.per_device.total_bytes <= entry.budget.per_device.total_bytes, entry.configuration["slug"]
            assert again.host.ram_bytes <= entry.budget.host.ram_bytes
        else:
            assert again.per_device == entry.budget.per_device, entry.configuration["slug"]


@pytest.mark.parametrize(
    "training",
    [
        {"activation_checkpointing": "full"},
        {"activation_checkpointing": "full", "cpu_offload": "parameters"},
        {"activation_checkpointing": "full", "activation_offloading": True, "loss_chunks": 8},
        {"optimizer_in_backward": True, "optimizer": "paged_adamw_8bit"},
        {"method": "lora", "lora": {"rank": 32, "target_modules": ["all-linear"], "dropout": 0.05}},
        {"method": "lora", "lora": {"rank": 8, "target_modules": ["q_proj", "v_proj"]}, "optimizer_impl": "fused"},
    ],
    ids=["recompute", "fsdp-offload", "act-offload", "opt-in-bwd", "lora-all", "lora-qv"],
)
def test_a_workload_torchtune_runs_as_budgeted_reads_back_to_the_same_budget(training: dict[str, Any]) -> None:
    """Settings every recipe expresses: each runnable entry's command has no replacement note, reads back to the
    workload's own settings, and to the very budget the entry was judged by."""
    workload = _workload(**training)
    checked = 0
    for entry in _runnable(workload):
        launch = training_launch(workload, entry.suggested_settings, entry.plan)
        if launch is None or (entry.plan.replicas > 1 and entry.plan.zero_stage < 3):
            continue  # ZeRO-0 to 2: the recipes shard further (the other tests)
        assert not any(note.endswith(LESS) for note in launch.notes), launch.notes
        read, plan = workload_from_torchtune(launch.argv, workload)
        assert read.training == workload.training.model_copy(
            update={"activation_checkpointing": entry.plan.recompute or workload.training.activation_checkpointing}
        )
        assert read.precision == workload.precision and read.runtime == workload.runtime
        assert plan == Plan(entry.plan.tensor, 1, entry.plan.replicas, entry.plan.zero_stage)
        again = _budget(read, plan, entry.configuration["slug"], entry.usable_bytes)
        assert again.per_device == entry.budget.per_device
        checked += 1
    assert checked > 0


def _launch(workload: Workload, plan: Plan, **settings: Any):
    return training_launch(workload, settings, plan), no_training_launch(workload, settings, plan)


COMBINATIONS = [
    (method, optimizer, plan, recompute)
    for method in ("full", "lora", "qlora")
    for optimizer in ("adamw", "adamw_8bit", "paged_adamw_8bit", "sgd", "adafactor", "lion")
    for plan in (Plan(1, 1, 1), Plan(1, 1, 4, 3), Plan(2, 1, 4, 3), Plan(1, 2, 4, 3))
    for recompute in ("none", "full", "selective")
]


@pytest.mark.parametrize("preset", ["llama-3.1-8b", "qwen2.5-7b"])
def test_every_combination_launches_a_command_the_release_accepts_or_says_why(preset: str) -> None:
    release = torchtune_release(TORCHTUNE_RELEASE)
    launched = 0
    for method, optimizer, plan, recompute in COMBINATIONS:
        weights = "nf4" if method == "qlora" else "bf16"
        workload = _torchtune({"task": "training", "model": {"preset": preset},
                               "precision": {"weights": weights, "compute": "bf16"},
                               "training": {"method": method, "optimizer": optimizer,
                                            "activation_checkpointing": recompute}})  # fmt: skip
        launch, reason = _launch(workload, plan)
        if launch is None:
            assert reason, (method, optimizer, plan)
            continue
        assert release.problems(launch.argv) == [], (method, optimizer, plan)
        values = TuneCommand.parse(launch.argv).values
        assert values["batch_size"] == "1" and values["tokenizer.max_seq_len"] == "2048"
        read, read_plan = workload_from_torchtune(launch.argv, workload)
        assert (read.training.method, read.training.optimizer) == (method, optimizer)
        assert read_plan.devices == plan.devices
        launched += 1
    assert launched > len(COMBINATIONS) // 3


def test_what_the_recipes_cannot_run_is_refused_with_the_reason() -> None:
    assert "pipeline parallelism" in _launch(_workload(), Plan(1, 2, 1))[1]
    lora = _workload("llama-3.1-8b", method="lora")
    assert "tensor parallelism: lora_finetune_distributed has none" in _launch(lora, Plan(2, 1, 2, 3))[1]
    assert (
        "tensor parallelism: full_finetune_distributed has none for torchtune.models.llama3_2"
        in (_launch(_workload(), Plan(2, 1, 2, 3))[1])
    )
    assert _launch(_workload("llama-3.1-8b"), Plan(2, 1, 2, 3))[0] is not None  # Llama 3.1: the release's TP plan
    mlp = _workload(method="lora", lora={"target_modules": ["q_proj", "gate_proj"]})
    assert "MLP's three projections or none" in _launch(mlp, Plan(1, 1, 1))[1]
    fp16 = _torchtune({"task": "training", "model": {"preset": "llama-3.2-1b"}, "precision": {"weights": "fp16"}})
    assert "trains in bf16, fp32, fp64 (it refuses fp16)" in _launch(fp16, Plan(1, 1, 1))[1]
    optimizer_only = _workload(cpu_offload="optimizer")
    assert "optimizer-only CPU offload" in _launch(optimizer_only, Plan(1, 1, 4, 1))[1]
    assert "for-loop" in _launch(_workload(optimizer_impl="for_loop"), Plan(1, 1, 1))[1]
    assert "momentum" not in str(torchtune_release(TORCHTUNE_RELEASE).external_kwargs)
    assert "torch.optim.SGD with momentum" in _launch(_workload(optimizer="sgd_momentum"), Plan(1, 1, 1))[1]
    assert "builds this model's architecture" in _launch(_workload("qwen3-8b"), Plan(1, 1, 1))[1]


def test_a_renamed_key_recipe_or_config_and_a_value_the_release_refuses_are_problems() -> None:
    workload = _workload(method="lora")
    launch, _ = _launch(workload, Plan(1, 1, 4, 3))
    release = torchtune_release(TORCHTUNE_RELEASE)
    argv = list(launch.argv)

    def replaced(old: str, new: str) -> list[str]:
        assert any(arg.startswith(old) for arg in argv), old
        return [new + arg[len(old) :] if arg.startswith(old) else arg for arg in argv]

    assert release.problems(replaced("enable_activation_checkpointing=", "enable_activation_checkpoint=")) == [
        "enable_activation_checkpoint: neither a key of llama3_2/1B_lora nor read by lora_finetune_distributed"
        " (torchtune 0.6.1): it would be ignored"
    ]
    assert release.problems(replaced("model.lora_rank=", "model.rank=")) == [
        "model.rank: neither a key of llama3_2/1B_lora nor read by lora_finetune_distributed (torchtune 0.6.1): it"
        " would be ignored"
    ]
    assert release.problems(replaced("dtype=bf16", "dtype=bfloat16")) == [
        "dtype=bfloat16: not one of bf16, fp32, fp64 (lora_finetune_distributed)"
    ]
    assert release.problems(replaced("model.lora_attn_modules=[q_proj,k_proj,v_proj,output_proj]",
                                     "model.lora_attn_modules=[q_proj,o_proj]")) == [
        "model.lora_attn_modules: o_proj is not one of q_proj, k_proj, v_proj, output_proj"
    ]  # fmt: skip
    assert release.problems(replaced("lora_finetune_distributed", "lora_finetune")) == [
        "lora_finetune: not a fine-tuning recipe of torchtune 0.6.1"
    ]
    assert release.problems(replaced("llama3_2/1B_lora", "llama3_2/1B_lora_single_device")) == [
        "llama3_2/1B_lora_single_device: not a config of lora_finetune_distributed in torchtune 0.6.1"
    ]
    assert release.problems(replaced("--nproc_per_node", "--nprocs")) == ["--nprocs: not a torchrun flag"]
    assert release.problems([*argv, "~optimizer.momentum"]) == [
        "~optimizer.momentum: not a key of llama3_2/1B_lora to remove"
    ]
    unknown = release.problems([*argv, "model._component_=torchtune.models.llama3_2.lora_llama3_2_2b"])
    assert (
        unknown[-1] == "model._component_=torchtune.models.llama3_2.lora_llama3_2_2b: no such component in"
        " torchtune 0.6.1"
    )
    assert "model.lora_rank: neither a key" not in str(unknown)  # a key of the config stays known
    assert release.problems([*argv, "fsdp_cpu_offload=True=1"]) == [
        "fsdp_cpu_offload=True=1: an override is key=value (torchtune/config/_utils.py:167)"
    ]
    single, _ = _launch(workload, Plan(1, 1, 1))
    assert release.problems(["tune", "run", "--nproc_per_node", "2", *single.argv[2:]]) == [
        "lora_finetune_single_device does not run distributed (torchtune/_cli/run.py: torchrun flags refused)"
    ]


def test_a_new_optimizer_class_drops_the_arguments_only_the_old_one_takes() -> None:
    """llama3_2/1B_lora passes AdamW ``fused`` and ``weight_decay``: under bitsandbytes' AdamW8bit they are removed,
    ``lr`` stays; the read back optimizer is the workload's."""
    workload = _workload(method="lora", optimizer="adamw_8bit")
    launch, _ = _launch(workload, Plan(1, 1, 1))
    command = TuneCommand.parse(launch.argv)
    assert command.values["optimizer._component_"] == "bitsandbytes.optim.AdamW8bit"
    assert set(command.removals) == {"optimizer.fused", "optimizer.weight_decay"}
    assert workload_from_torchtune(launch.argv, workload)[0].training.optimizer == "adamw_8bit"


def test_optimizer_in_backward_sets_what_the_recipe_requires_with_it() -> None:
    """The recipes refuse optimizer_in_bwd with accumulation or clipping (full_finetune_distributed.py:186-196)."""
    launch, _ = _launch(_workload(optimizer_in_backward=True), Plan(1, 1, 4, 3))
    values = TuneCommand.parse(launch.argv).values
    assert values["optimizer_in_bwd"] == "True"
    assert values["gradient_accumulation_steps"] == "1" and values["clip_grad_norm"] == "None"


def test_expandable_segments_and_the_largest_micro_batch_are_in_the_launch() -> None:
    workload = _torchtune({"task": "training", "model": {"preset": "llama-3.2-1b"},
                           "precision": {"weights": "bf16", "gradients": "bf16"},
                           "runtime": {"expandable_segments": True}})  # fmt: skip
    launch, _ = _launch(workload, Plan(1, 1, 1), max_micro_batch_size=12)
    assert launch.argv[:2] == ("env", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
    assert "batch_size=1 as budgeted; up to 12 fits this plan" in launch.notes
    assert workload_from_torchtune(launch.argv, workload)[0].runtime.expandable_segments


def test_the_closest_checkpoint_picks_the_config_among_those_of_one_architecture() -> None:
    """Qwen2 0.5B and Qwen2.5 0.5B are built alike: the Qwen2.5 workload gets the Qwen2.5 config."""
    launch, _ = _launch(_workload("qwen2.5-0.5b"), Plan(1, 1, 1))
    assert TuneCommand.parse(launch.argv).config == "qwen2_5/0.5B_full_single_device"
    launch, _ = _launch(_workload("llama-3.1-8b"), Plan(1, 1, 1))
    assert TuneCommand.parse(launch.argv).config == "llama3_1/8B_full_single_device"  # Llama 3's has 8192 positions


@pytest.mark.parametrize("framework", sorted(UNLAUNCHED_FRAMEWORKS))
def test_a_framework_without_a_launch_says_why(framework: str) -> None:
    path = ROOT / "fixtures" / "workloads" / "train-llama-3.2-1b-full-bf16-adamw.json"
    data = json.loads(path.read_text())
    workload = Workload.model_validate({**data, "training": {**data["training"], "framework": framework}})
    assert training_launch(workload, {}, Plan(1, 1, 1)) is None
    assert no_training_launch(workload, {}, Plan(1, 1, 1)) == UNLAUNCHED_FRAMEWORKS[framework]


def test_a_torchtune_recommendation_carries_its_launch_in_the_answer() -> None:
    """Through the recommender, not only the launch module: every runnable entry of a torchtune workload carries
    the command (in the entry and in the API's document), or has a stated reason and none."""
    workload = _example(ROOT / "fixtures" / "workloads" / "train-llama-3.1-8b-lora.json")
    entries = _runnable(workload)
    carried = 0
    for entry in entries:
        reason = no_training_launch(workload, entry.suggested_settings, entry.plan)
        document = entry.as_dict()["launch"]
        if reason is not None:
            assert entry.launch is None and document is None, entry.configuration["slug"]
            continue
        carried += 1
        assert entry.launch == training_launch(workload, entry.suggested_settings, entry.plan)
        assert document["engine"] == "torchtune" and document["argv"][:2] == ["tune", "run"]
        assert document["text"] == entry.launch.text
    assert carried > 0
