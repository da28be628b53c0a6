"""Training launches (``recommendations.training_launch``): a torchtune workload's runnable entries carry ``tune run …``
that torchtune 0.6.1 (its recipes and configs, extracted from PyPI's wheel) accepts and reads every key of, and the
command read back reproduces the budget the recommendation judged, or one no larger where the notes name what the
recipes run instead."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.recommend_speed import fixture_views
from budgets.engine import Workload, estimate
from budgets.engine.frameworks import FRAMEWORKS, framework_profile
from recommendations.plans import Plan, plan_workload
from recommendations.recommend import recommend
from recommendations.scratch import INIT_SCRIPT, SCRATCH_DIR
from recommendations.training_launch import (
    ACCELERATE_CONFIG,
    HF_RELEASES,
    LAUNCHERS,
    LESS,
    LIT_WRAPPER,
    LITGPT_RELEASE,
    TORCHTITAN_RELEASE,
    TORCHTUNE_RELEASE,
    UNLAUNCHED_FRAMEWORKS,
    UNSLOTH_CALLS,
    UNSLOTH_RELEASE,
    UNSLOTH_SCRIPT,
    HfCommand,
    TitanCommand,
    TuneCommand,
    hf_stack,
    litgpt_release,
    no_training_launch,
    torchtitan_release,
    torchtune_release,
    training_launch,
    unsloth_release,
    workload_from_torchtitan,
    workload_from_torchtune,
    workload_from_transformers,
)
from recommendations.training_launch.common import torchrun_flags
from recommendations.training_launch.transformers import PEFT_FP32_ADAPTERS
from recommendations.verdicts import Verdict

ROOT = Path(__file__).resolve().parents[2]
PEFT_ZERO12_REASON = "LoRA on a bf16 base: " + PEFT_FP32_ADAPTERS.format(trl=HF_RELEASES["trl"], weights="bf16")
TRAINING_EXAMPLES = [
    path for path in sorted((ROOT / "fixtures" / "workloads").glob("*.json"))
    if json.loads(path.read_text()).get("task") == "training"
]  # fmt: skip
RUNNABLE = (Verdict.FITS, Verdict.TIGHT)
VIEWS = {view.slug: view for view in fixture_views()}


def _on(framework: str, data: dict[str, Any]) -> Workload:
    """``data`` with ``training.framework`` set to ``framework``, validated."""
    return Workload.model_validate({**data, "training": {**data.get("training", {}), "framework": framework}})


def _built(
    framework: str,
    preset: str,
    length: int,
    precision: dict[str, Any] | None = None,
    runtime: dict[str, Any] | None = None,
    **training: Any,
) -> Workload:
    """A training workload of ``preset`` on ``framework``: micro batch 2 of ``length`` tokens unless ``training``
    says otherwise, pure bf16 unless ``precision`` does, and the ZeRO stage a ``cpu_offload`` needs (the schema's)."""
    zero = {"parameters": 3, "optimizer": 1}.get(training.get("cpu_offload", ""), 0)
    return _on(framework, {"task": "training", "model": {"preset": preset}, "runtime": runtime or {},
                           "precision": precision or {"weights": "bf16", "gradients": "bf16"},
                           "parallelism": {"zero_stage": zero},
                           "training": {"micro_batch_size": 2, "sequence_length": length, **training}})  # fmt: skip


def _torchtune(data: dict[str, Any]) -> Workload:
    return _on("torchtune", data)


def _example(path: Path) -> Workload:
    return _torchtune(json.loads(path.read_text()))


def _runnable(workload: Workload):
    return [entry for entry in recommend(workload, list(VIEWS.values())) if entry.verdict in RUNNABLE]


def _budget(workload: Workload, plan: Plan, slug: str, usable: int):
    view = VIEWS[slug]
    return estimate(plan_workload(workload, plan), usable, view.accelerator_name, view.compute_capability)


def _workload(preset: str = "llama-3.2-1b", **training: Any) -> Workload:
    """A workload torchtune runs as budgeted: one dtype throughout (no master copy), full or no recomputation."""
    return _built("torchtune", preset, 1024, **training)


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
    """Llama 3.x and Qwen2.5 have builders in 0.6.1; the ZeRO paper's 7.5B architecture has none (the workload's
    refusal: its plans are kept, without a command), and a pipeline plan none of the recipes runs is not offered."""
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
    assert not any("pipeline parallelism" in r for rs in reasons.values() for r in rs)


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


def test_every_framework_has_a_launcher_or_says_why_not() -> None:
    path = ROOT / "fixtures" / "workloads" / "train-llama-3.2-1b-full-bf16-adamw.json"
    data = json.loads(path.read_text())
    assert set(FRAMEWORKS) == set(LAUNCHERS) | set(UNLAUNCHED_FRAMEWORKS)
    for framework in sorted(UNLAUNCHED_FRAMEWORKS):
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


# ---------------------------------------------------------------------------------------------------------- torchtitan


def _titan(data: dict[str, Any]) -> Workload:
    return _on("torchtitan", data)


def _titan_workload(preset: str = "llama-3.1-8b", precision: dict[str, Any] | None = None, **training: Any) -> Workload:
    """A workload torchtitan runs as budgeted under FSDP: pure bf16 unless ``precision`` says otherwise."""
    return _built("torchtitan", preset, 2048, precision, **training)


def _titan_args(launch) -> dict[str, str | None]:
    return dict(TitanCommand.parse(launch.argv).args)


def test_the_torchtitan_fixture_is_the_release_read_from_its_sdist_and_tag() -> None:
    release = torchtitan_release(TORCHTITAN_RELEASE)
    assert release.release == framework_profile("torchtitan").release == "0.2.0"
    assert release.source["sha256"] == "ee7728632e705caf257933b913cd16887284a2d6feade9e6176a0c1296e60842"
    assert release.source["sdist"] == "torchtitan-0.2.0.tar.gz"
    assert release.source["git"]["commit"] == "29624e37fa6dd319fd671b009338651b5c665da2"  # the profile's 29624e3
    assert "torchtitan/config/job_config.py" in release.source["files"]
    assert release.module == "torchtitan.train" and "--nproc_per_node" in release.torchrun_flags
    assert release.flags["--training.dtype"]["choices"] == ["bfloat16", "float32"]
    assert release.flags["--training.mixed_precision_reduce"]["choices"] == ["float32"]
    assert release.flags["--activation_checkpoint.mode"]["choices"] == ["selective", "full", "memory_budget", "none"]
    assert release.flags["--compile.no_enable"]["negates"] == "--compile.enable"
    assert release.optimizers == ("Adam", "AdamW")
    assert release.models["llama3"]["flavors"]["70B"]["architecture"]["intermediate_dim"] == 28672
    assert release.models["llama3"]["pipelining"] and not release.models["qwen3"]["pipelining"]
    assert release.models["qwen3"]["flavors"]["30B-A3B"]["architecture"] is None  # MoE: not matched
    assert "torchtitan/models/llama3/train_configs/llama3_8b.toml" in release.train_configs
    for flag in ("--checkpoint.enable", "--checkpoint.initial_load_path", "--checkpoint.initial_load_in_hf"):
        assert flag in release.flags  # named in the launch's notes


@pytest.mark.parametrize("path", TRAINING_EXAMPLES, ids=lambda p: p.stem)
def test_every_runnable_entry_has_a_torchtitan_launch_the_release_accepts_or_a_reason(path: Path) -> None:
    workload = _titan(json.loads(path.read_text()))
    release = torchtitan_release(TORCHTITAN_RELEASE)
    for entry in _runnable(workload):
        launch = training_launch(workload, entry.suggested_settings, entry.plan)
        reason = no_training_launch(workload, entry.suggested_settings, entry.plan)
        assert (launch is None) != (reason is None), entry.configuration["slug"]
        if launch is not None:
            assert release.problems(launch.argv) == []
            assert launch.checked_against == "torchtitan 0.2.0" and launch.engine == "torchtitan"
            assert TitanCommand.parse(launch.argv).argv == launch.argv


def test_the_examples_torchtitan_builds_launch_and_those_it_cannot_say_why() -> None:
    """Llama 3.1 70B has a flavor (70B); Llama 3.2 1B and Qwen2.5 have none, LoRA and QLoRA no recipe, the CPU no
    device."""
    reasons: dict[str, set[str]] = {}
    launched: dict[str, int] = {}
    for path in TRAINING_EXAMPLES:
        workload = _titan(json.loads(path.read_text()))
        for entry in _runnable(workload):
            reason = no_training_launch(workload, entry.suggested_settings, entry.plan)
            reasons.setdefault(path.stem, set()).add(reason or "")
            launched[path.stem] = launched.get(path.stem, 0) + (reason is None)
    assert launched["train-llama-3.1-70b-tp4-pp4"] > 0
    assert {stem for stem, count in launched.items() if count} == {"train-llama-3.1-70b-tp4-pp4"}
    assert reasons["train-llama-3.1-8b-lora"] == {"lora: torchtitan 0.2.0 trains every parameter, it has no adapters"}
    assert reasons["train-qwen2.5-14b-qlora-int4"] == {
        "qlora: torchtitan 0.2.0 trains every parameter, it has no adapters"
    }
    assert reasons["train-llama-3.2-1b-full-bf16-adamw"] == {
        "no dense flavor of torchtitan 0.2.0's models builds this model's architecture"
    }
    assert all("accelerators only" in reason for reason in reasons["cpu-qwen2.5-0.5b-train"])


@pytest.mark.parametrize("path", TRAINING_EXAMPLES, ids=lambda p: p.stem)
def test_the_torchtitan_command_read_back_reproduces_the_budget_or_one_no_larger(path: Path) -> None:
    workload = _titan(json.loads(path.read_text()))
    for entry in _runnable(workload):
        launch = training_launch(workload, entry.suggested_settings, entry.plan)
        if launch is None:
            continue
        read, plan = workload_from_torchtitan(launch.argv, workload)
        assert (plan.tensor, plan.pipeline, plan.replicas) == (entry.plan.tensor, entry.plan.pipeline,
                                                               entry.plan.replicas)  # fmt: skip
        again = _budget(read, plan, entry.configuration["slug"], entry.usable_bytes)
        if any(note.endswith(LESS) for note in launch.notes):
            assert again.per_device.total_bytes <= entry.budget.per_device.total_bytes, entry.configuration["slug"]
            assert again.host.ram_bytes <= entry.budget.host.ram_bytes
        else:
            assert again.per_device == entry.budget.per_device, entry.configuration["slug"]


@pytest.mark.parametrize(
    ("preset", "precision", "training"),
    [
        ("llama-3.1-8b", None, {}),
        ("llama-3.1-8b", None, {"activation_checkpointing": "full", "optimizer_impl": "fused"}),
        ("llama-3.1-8b", None, {"activation_checkpointing": "selective_op", "runtime": {"compile": True}}),
        ("qwen3-8b", {"weights": "fp32", "compute": "bf16", "gradients": "fp32"}, {"activation_checkpointing": "full"}),
        ("qwen3-4b", {"weights": "fp32"}, {"optimizer_impl": "for_loop"}),
        ("llama-3.1-8b", None, {"activation_checkpointing": "full", "cpu_offload": "parameters"}),
        ("llama-3.1-8b", None, {"runtime": {"expandable_segments": True}}),
    ],
    ids=["bf16", "recompute-fused", "per-op-compiled", "fsdp-mixed", "fp32-for-loop", "fsdp-offload", "expandable"],
)
def test_a_workload_torchtitan_runs_as_budgeted_reads_back_to_the_same_budget(
    preset: str, precision: dict[str, Any] | None, training: dict[str, Any]
) -> None:
    """Settings torchtitan expresses: each runnable ZeRO-3 (or one-replica) entry's command has no replacement note,
    reads back to the workload's own settings and plan, and to the very budget the entry was judged by."""
    workload = _titan_workload(preset, precision, **training)
    checked = 0
    for entry in _runnable(workload):
        launch = training_launch(workload, entry.suggested_settings, entry.plan)
        if launch is None or any(note.endswith(LESS) for note in launch.notes):
            continue  # ZeRO-0 to 2 (sharded further) and tensor parallelism (sequence parallel): the tests above
        read, plan = workload_from_torchtitan(launch.argv, workload)
        recompute = entry.plan.recompute or workload.training.activation_checkpointing
        assert read.training == workload.training.model_copy(update={"activation_checkpointing": recompute})
        assert read.precision == workload.precision and read.runtime == workload.runtime
        assert plan == Plan(entry.plan.tensor, entry.plan.pipeline, entry.plan.replicas, entry.plan.zero_stage)
        again = _budget(read, plan, entry.configuration["slug"], entry.usable_bytes)
        assert again.per_device == entry.budget.per_device
        checked += 1
    assert checked > 0


TITAN_COMBINATIONS = [
    (precision, optimizer, plan, recompute)
    for precision in ("bf16", "fp32", "mixed")
    for optimizer in ("adamw", "sgd")
    for plan in (Plan(1, 1, 1), Plan(1, 1, 4, 0), Plan(1, 1, 4, 3), Plan(2, 1, 4, 3), Plan(1, 2, 4, 1), Plan(2, 2, 1))
    for recompute in ("none", "full", "selective", "selective_op")
]
TITAN_PRECISIONS = {
    "bf16": {"weights": "bf16", "gradients": "bf16"},
    "fp32": {"weights": "fp32"},
    "mixed": {"weights": "bf16", "gradients": "fp32", "master_weights": "fp32"},
}


@pytest.mark.parametrize("preset", ["llama-3.1-8b", "qwen3-8b"])
def test_every_torchtitan_combination_launches_a_command_the_release_accepts_or_says_why(preset: str) -> None:
    release = torchtitan_release(TORCHTITAN_RELEASE)
    launched = 0
    for precision, optimizer, plan, recompute in TITAN_COMBINATIONS:
        workload = _titan_workload(preset, TITAN_PRECISIONS[precision], optimizer=optimizer,
                                   activation_checkpointing=recompute)  # fmt: skip
        launch, reason = _launch(workload, plan)
        if launch is None:
            assert reason, (precision, optimizer, plan)
            continue
        assert release.problems(launch.argv) == [], (precision, optimizer, plan)
        args = _titan_args(launch)
        assert args["--training.seq_len"] == "2048" and args["--optimizer.name"] == "AdamW"
        read, read_plan = workload_from_torchtitan(launch.argv, workload)
        assert read_plan.devices == plan.devices and read.training.micro_batch_size == 2
        launched += 1
    assert launched > len(TITAN_COMBINATIONS) // 6


def test_what_torchtitan_cannot_run_as_budgeted_is_refused_with_the_reason() -> None:
    fsdp = Plan(1, 1, 4, 3)
    assert "optimizer sgd: torchtitan builds Adam and AdamW only" in _launch(_titan_workload(optimizer="sgd"), fsdp)[1]
    assert "qwen3 has no pipelining_fn" in _launch(_titan_workload("qwen3-8b"), Plan(1, 2, 4, 3))[1]
    assert "32 layers over 3 stages" in _launch(_titan_workload(), Plan(1, 3, 1))[1]
    assert "tensor degree 16" in _launch(_titan_workload(), Plan(16, 1, 1))[1]
    assert "sequence length 2047" in _launch(_titan_workload(sequence_length=2047), fsdp)[1]
    assert "loss_chunks 8" in _launch(_titan_workload(loss_chunks=8), fsdp)[1]
    assert "pure bf16 on one data-parallel rank" in _launch(_titan_workload(), Plan(1, 1, 1))[1]
    assert "pure bf16 on one data-parallel rank" in _launch(_titan_workload(), Plan(1, 1, 4, 0))[1]  # DDP
    assert _launch(_titan_workload(), Plan(2, 1, 1))[0] is not None  # tensor parallel alone: no autocast
    mixed = _titan_workload(precision=TITAN_PRECISIONS["mixed"])
    assert "mixed precision without FSDP" in _launch(mixed, Plan(2, 1, 1))[1]
    fp16 = _titan_workload(precision={"weights": "fp16"})
    assert "torchtitan trains in bfloat16 or float32" in _launch(fp16, fsdp)[1]
    bf16_grads = _titan_workload(precision={"weights": "fp32", "compute": "bf16", "gradients": "bf16"})
    assert "no torchtitan dtype runs them" in _launch(bf16_grads, fsdp)[1]
    optimizer_only = _titan_workload(cpu_offload="optimizer")
    assert "optimizer-only CPU offload" in _launch(optimizer_only, Plan(1, 1, 4, 1))[1]
    assert "builds this model's architecture" in _launch(_titan_workload("qwen3-30b-a3b"), fsdp)[1]  # MoE
    assert "no adapters" in _launch(_titan_workload(method="lora"), fsdp)[1]


def test_torchtitan_runs_zero_0_as_ddp_and_shards_the_other_stages_with_fsdp() -> None:
    """ZeRO-0 of one-device replicas is DDP (exactly the budget's); ZeRO-1 to 3 are FSDP2 resharding after every
    forward; a pipeline's micro-batches are one per stage."""
    fp32 = _titan_workload(precision={"weights": "fp32"})
    ddp, _ = _launch(fp32, Plan(1, 1, 4, 0))
    args = _titan_args(ddp)
    assert (args["--parallelism.data_parallel_replicate_degree"], args["--parallelism.data_parallel_shard_degree"]) == (
        "4", "1")  # fmt: skip
    assert not any(note.endswith(LESS) for note in ddp.notes)
    assert workload_from_torchtitan(ddp.argv, fp32)[1] == Plan(1, 1, 4, 0)
    zero1, _ = _launch(_titan_workload(), Plan(1, 1, 4, 1))
    args = _titan_args(zero1)
    assert args["--parallelism.data_parallel_shard_degree"] == "4"
    assert args["--parallelism.fsdp_reshard_after_forward"] == "always"
    assert "ZeRO-1: torchtitan shards with FSDP2, resharding after every forward (ZeRO-3), " + LESS in zero1.notes
    zero2, _ = _launch(_titan_workload(), Plan(1, 1, 4, 2))  # the profile's stage 2: FSDP2 without resharding
    assert _titan_args(zero2)["--parallelism.fsdp_reshard_after_forward"] == "never"
    assert not any(note.endswith(LESS) for note in zero2.notes)
    assert workload_from_torchtitan(zero2.argv, _titan_workload())[1] == Plan(1, 1, 4, 2)
    pipeline, _ = _launch(_titan_workload(micro_batch_size=3), Plan(2, 4, 1))
    args = _titan_args(pipeline)
    assert args["--training.local_batch_size"] == "12"
    assert args["--parallelism.pipeline_parallel_microbatch_size"] == "3"
    assert args["--parallelism.pipeline_parallel_schedule"] == "1F1B"
    assert (
        workload_from_torchtitan(pipeline.argv, _titan_workload(micro_batch_size=3))[0].training.micro_batch_size == 3
    )


def test_torchtitan_pipeline_stages_under_fsdp_keep_the_default_and_float8_sets_its_converter() -> None:
    """Under a pipeline FSDP2's default keeps each stage gathered, which the budget holds (``_pipelined_fsdp``);
    float8_linear is the float8 converter with float8 all-gather; both read back."""
    release = torchtitan_release(TORCHTITAN_RELEASE)
    workload = _titan_workload(precision={"weights": "fp32", "compute": "bf16"}, float8_linear=True)
    launch, reason = _launch(workload, Plan(2, 2, 2, 3))
    assert launch is not None, reason
    assert release.problems(launch.argv) == []
    args = _titan_args(launch)
    assert args["--parallelism.fsdp_reshard_after_forward"] == "default"
    assert args["--model.converters"] == "float8"
    assert "--quantize.linear.float8.enable_fsdp_float8_all_gather" in args
    assert any(note.startswith("pipeline stages under FSDP2 keep their parameters gathered") for note in launch.notes)
    read, plan = workload_from_torchtitan(launch.argv, workload)
    assert read.training.float8_linear and plan == Plan(2, 2, 2, 3)
    plain = _titan_workload(precision={"weights": "fp32", "compute": "bf16"})
    read, _ = workload_from_torchtitan(_launch(plain, Plan(1, 1, 4, 3))[0].argv, plain)
    assert not read.training.float8_linear
    other = [*launch.argv]
    other[other.index("float8")] = "mx"
    assert release.problems(other) == ["model.converters ['mx']: the budget models the float8 converter only"]


def test_a_context_parallel_workload_keeps_its_degree_in_every_plan_and_launch() -> None:
    """parallelism.context is the workload's (not searched): every plan of it spans tensor × pipeline × context devices
    per replica, under FSDP (ZeRO-2 or 3), and its torchtitan command sets the degree and reads it back."""
    release = torchtitan_release(TORCHTITAN_RELEASE)
    data = {**_titan_workload(precision={"weights": "fp32", "compute": "bf16"}).model_dump(mode="json")}
    data["parallelism"] = {"context": 2, "zero_stage": 3, "data": 2}
    data["training"] = {**data["training"], "sequence_length": 8192}
    workload = Workload.model_validate(data)
    entries = _runnable(workload)
    assert entries
    for entry in entries:
        assert entry.plan.context == 2 and entry.plan.zero_stage >= 2
        assert entry.plan.devices % 2 == 0 and entry.plan.devices <= entry.configuration["device_count"]
        assert "CP2" in entry.plan.label()
    entry = entries[0]
    launch = training_launch(workload, entry.suggested_settings, entry.plan)
    assert launch is not None, no_training_launch(workload, entry.suggested_settings, entry.plan)
    assert release.problems(launch.argv) == []
    args = _titan_args(launch)
    assert args["--parallelism.context_parallel_degree"] == "2"
    assert TitanCommand.parse(launch.argv).processes == entry.plan.devices
    _, plan = workload_from_torchtitan(launch.argv, workload)
    assert plan.context == 2 and plan.devices == entry.plan.devices
    one_device = [e for e in recommend(workload, list(VIEWS.values())) if e.configuration["device_count"] == 1]
    assert one_device and all(e.verdict == Verdict.UNSUPPORTED for e in one_device)
    assert "parallelism.context 2 splits each sequence over 2 devices" in one_device[0].reasons[0].message
    odd = {**data, "training": {**data["training"], "sequence_length": 8194}}
    with pytest.raises(ValueError, match=r"must split into 2 × parallelism\.context"):
        Workload.model_validate(odd)


def test_a_renamed_torchtitan_flag_a_refused_value_or_a_wrong_config_are_problems() -> None:
    launch, _ = _launch(_titan_workload(activation_checkpointing="selective_op"), Plan(1, 1, 4, 3))
    release = torchtitan_release(TORCHTITAN_RELEASE)
    argv = list(launch.argv)

    def replaced(old: str, new: str) -> list[str]:
        assert old in argv, old
        return [new if arg == old else arg for arg in argv]

    assert release.problems(replaced("--training.local_batch_size", "--training.batch_size")) == [
        "--training.batch_size: not a field of torchtitan 0.2.0's JobConfig (config/job_config.py)"
    ]
    assert release.problems(replaced("bfloat16", "float16")) == [
        "--training.dtype float16: not one of bfloat16, float32",
        "--training.mixed_precision_param float16: not one of bfloat16, float32",
    ]
    assert release.problems(replaced("op", "per_op")) == [
        "--activation_checkpoint.selective_ac_option per_op: 'op' or a layer frequency"
        " (distributed/activation_checkpoint.py:242-248)"
    ]
    assert release.problems(replaced("AdamW", "SGD")) == ["--optimizer.name SGD: torchtitan 0.2.0 builds Adam, AdamW"]
    assert release.problems(replaced("8B", "7B")) == ["model.flavor 7B: not a flavor of llama3"]
    assert release.problems(replaced("./torchtitan/models/llama3/train_configs/llama3_8b.toml",
                                     "./torchtitan/models/llama3/train_configs/llama3_405b.toml")) == [
        "model.converters ['float8']: the config converts the model (float8), which the command cannot clear"
    ]  # fmt: skip
    assert release.problems(replaced("--nproc_per_node", "--nprocs")) == ["--nprocs: not a torchrun flag"]
    assert release.problems(replaced("torchtitan.train", "torchtitan.trainer")) == [
        "-m torchtitan.trainer: torchtitan 0.2.0 trains with -m torchtitan.train"
    ]
    assert release.problems([*argv, "--compile.enable", "True"]) == [
        "--compile.enable: given twice",
        "--compile.enable True: a bool flag takes no value (--compile.no_enable negates it)",
    ]
    shard = argv.index("--parallelism.data_parallel_shard_degree")
    assert release.problems([*argv[: shard + 1], "2", *argv[shard + 2 :]]) == [
        "the parallel degrees cover 2 devices, torchrun starts 4 (distributed/parallel_dims.py:52-55)"
    ]


# -------------------------------------------------------------------------------- transformers (TRL, PEFT, accelerate)

HF_WHEELS = {
    "transformers": ("transformers-5.24.0-py3-none-any.whl",
                     "ff5ebedf9359f94bb63772b6380eba6e7104d010cbbb2cb82c788817ea7486f6"),
    "trl": ("trl-1.16.0-py3-none-any.whl", "c4726e139dd40e1a41661511c639c8a68416782b2e3e8c0befebd77bb7ba0396"),
    "peft": ("peft-0.21.2-py3-none-any.whl", "106ab6077ff72c54d21577f9af5970e34bac7582cb14209f7b2b511e322a4eae"),
    "accelerate": ("accelerate-1.15.0-py3-none-any.whl",
                   "97eacca0b73e45cb867dbf8c5d5d4dc32219544300e0c8992c7334dc2ef33cec"),
}  # fmt: skip


def _hf(data: dict[str, Any]) -> Workload:
    return _on("transformers", data)


def _hf_workload(preset: str = "llama-3.2-1b", precision: dict[str, Any] | None = None, **training: Any) -> Workload:
    """A workload the HF Trainer runs as budgeted: pure bf16 unless ``precision`` says otherwise."""
    return _built("transformers", preset, 1024, precision, **training)


def _config(launch) -> dict[str, Any]:
    """The accelerate config, the launch's first file (a model built from the workload's numbers adds its
    config.json and init_model.py: recommendations.scratch)."""
    paths = [path for path, _ in launch.files]
    assert paths in ([ACCELERATE_CONFIG], [ACCELERATE_CONFIG, f"{SCRATCH_DIR}/config.json", INIT_SCRIPT])
    return json.loads(launch.files[0][1])


def _hf_problems(launch) -> list[str]:
    return hf_stack().problems(launch.argv, _config(launch))


def test_the_transformers_stack_is_pinned_and_read_from_its_wheels() -> None:
    stack = hf_stack()
    assert stack.releases == HF_RELEASES
    assert HF_RELEASES["transformers"] == "5.24.0"  # the transformers layer profile's (budgets/engine/profiles)
    for name, (wheel, sha256) in HF_WHEELS.items():
        assert (stack.sources[name]["wheel"], stack.sources[name]["sha256"]) == (wheel, sha256)
    assert stack.module == "trl.scripts.sft"
    assert stack.fields["--per_device_train_batch_size"]["name"] == "per_device_train_batch_size"  # TrainingArguments
    assert stack.fields["--max_length"]["default"] == 1024 and stack.fields["--lora_r"]["default"] == 16
    assert stack.fields["--bf16"]["default"] is None  # TRL's _BaseConfig: True unless fp16 (hence --bf16 False)
    assert stack.fields["--activation_checkpointing"]["kind"] == "bool"
    assert stack.fields["--dtype"]["choices"] == ["auto", "bfloat16", "float16", "float32"]
    assert {"adamw_torch", "adamw_torch_fused", "adamw_bnb_8bit", "paged_adamw_8bit", "sgd"} <= set(
        stack.fields["--optim"]["choices"]
    )
    assert stack.all_linear == "all-linear"
    assert set(stack.lora_keywords) <= stack.lora_fields  # every keyword TRL passes LoraConfig is one of PEFT's
    assert stack.launcher["nested_prefixes"]["fsdp_config"] == "fsdp_"


@pytest.mark.parametrize("name", ["single_gpu", "multi_gpu", "fsdp2", "zero1", "zero2", "zero3"])
def test_the_accelerate_configs_trl_ships_are_valid_for_the_pinned_accelerate(name: str) -> None:
    """The launch's configs start from TRL's: every key of them is one accelerate 1.15.0 reads."""
    stack = hf_stack()
    command = HfCommand("trl.scripts.sft", ())
    assert stack.config_problems(stack.base_configs[name], command) == []


@pytest.mark.parametrize("path", TRAINING_EXAMPLES, ids=lambda p: p.stem)
def test_every_runnable_entry_has_a_transformers_launch_the_releases_accept_or_a_reason(path: Path) -> None:
    workload = _hf(json.loads(path.read_text()))
    for entry in _runnable(workload):
        launch = training_launch(workload, entry.suggested_settings, entry.plan)
        reason = no_training_launch(workload, entry.suggested_settings, entry.plan)
        assert (launch is None) != (reason is None), entry.configuration["slug"]
        if launch is not None:
            assert _hf_problems(launch) == []
            assert launch.engine == "transformers" and launch.checked_against == hf_stack().label
            assert HfCommand.parse(launch.argv).argv == launch.argv
            assert _config(launch)["num_processes"] == entry.plan.devices


def test_the_examples_transformers_runs_launch_and_those_it_cannot_say_why() -> None:
    reasons: dict[str, set[str]] = {}
    launched: dict[str, int] = {}
    for path in TRAINING_EXAMPLES:
        workload = _hf(json.loads(path.read_text()))
        for entry in _runnable(workload):
            reason = no_training_launch(workload, entry.suggested_settings, entry.plan)
            reasons.setdefault(path.stem, set()).add(reason or "")
            launched[path.stem] = launched.get(path.stem, 0) + (reason is None)
    for stem in ("train-llama-3.2-1b-full-bf16-adamw", "train-qwen2.5-14b-qlora-int4", "cpu-qwen2.5-0.5b-train",
                 "train-llama-3.1-8b-lora"):  # fmt: skip
        assert launched[stem] > 0, stem
    # the ZeRO paper's 7.5B names no checkpoint: every runnable plan trains the model built from its numbers
    assert reasons["train-zero3-dp64-7.5b"] == {""}
    # LoRA on a bf16 base with an fp32 master copy: PEFT's fp32 adapters on one device or DDP, DeepSpeed under ZeRO-3
    assert reasons["train-llama-3.1-8b-lora"] <= {"", PEFT_ZERO12_REASON}
    # the recommender offers no plan the HF Trainer cannot run: the 3D example's entries are data-parallel and launch
    assert reasons["train-llama-3.1-70b-tp4-pp4"] == {""}


@pytest.mark.parametrize("path", TRAINING_EXAMPLES, ids=lambda p: p.stem)
def test_the_transformers_command_read_back_reproduces_the_budget_or_one_no_larger(path: Path) -> None:
    workload = _hf(json.loads(path.read_text()))
    for entry in _runnable(workload):
        launch = training_launch(workload, entry.suggested_settings, entry.plan)
        if launch is None:
            continue
        read, plan = workload_from_transformers(launch.argv, launch.files, workload)
        assert (plan.tensor, plan.pipeline, plan.replicas) == (1, 1, entry.plan.replicas)
        again = _budget(read, plan, entry.configuration["slug"], entry.usable_bytes)
        if any(note.endswith(LESS) for note in launch.notes):
            assert again.per_device.total_bytes <= entry.budget.per_device.total_bytes, entry.configuration["slug"]
            assert again.host.ram_bytes <= entry.budget.host.ram_bytes
        else:
            assert again.per_device == entry.budget.per_device, entry.configuration["slug"]


@pytest.mark.parametrize(
    ("preset", "precision", "training"),
    [
        ("llama-3.2-1b", None, {}),
        ("llama-3.2-1b", None, {"activation_checkpointing": "full", "optimizer_impl": "fused"}),
        ("qwen2.5-0.5b", {"weights": "fp32"}, {"optimizer": "sgd_momentum", "runtime": {"compile": True}}),
        ("llama-3.2-1b", None, {"activation_checkpointing": "full", "cpu_offload": "parameters"}),
        ("llama-3.2-1b", {"weights": "bf16", "master_weights": "fp32"}, {"optimizer": "adamw_8bit"}),
        ("llama-3.2-1b", {"weights": "bf16", "master_weights": "fp32"}, {"cpu_offload": "optimizer"}),
        ("qwen2.5-0.5b", {"weights": "fp32"},
         {"method": "lora", "lora": {"rank": 8, "target_modules": ["all-linear"]}}),
        ("llama-3.1-8b", {"weights": "nf4", "compute": "bf16"},
         {"method": "qlora", "optimizer": "paged_adamw_8bit", "activation_checkpointing": "full",
          "runtime": {"expandable_segments": True}, "lora": {"rank": 16, "dropout": 0.05}}),
    ],
    ids=["bf16", "recompute-fused", "fp32-sgd-compiled", "fsdp-offload", "deepspeed-8bit", "zero-offload", "fp32-lora",
         "qlora-nf4"],
)  # fmt: skip
def test_a_workload_the_hf_trainer_runs_as_budgeted_reads_back_to_the_same_budget(
    preset: str, precision: dict[str, Any] | None, training: dict[str, Any]
) -> None:
    workload = _hf_workload(preset, precision, **training)
    checked = 0
    for entry in _runnable(workload):
        launch = training_launch(workload, entry.suggested_settings, entry.plan)
        if launch is None or any(note.endswith(LESS) for note in launch.notes):
            continue  # ZeRO-1 and 2 of a pure-precision run shard further (FSDP2): the tests above
        read, plan = workload_from_transformers(launch.argv, launch.files, workload)
        recompute = entry.plan.recompute or workload.training.activation_checkpointing
        assert read.training == workload.training.model_copy(update={"activation_checkpointing": recompute})
        assert read.precision == workload.precision and read.runtime == workload.runtime
        assert plan == Plan(1, 1, entry.plan.replicas, entry.plan.zero_stage)
        again = _budget(read, plan, entry.configuration["slug"], entry.usable_bytes)
        assert again.per_device == entry.budget.per_device
        checked += 1
    assert checked > 0


def test_the_accelerate_config_is_the_plans_distribution() -> None:
    """One process, DDP, FSDP2 (pure precision, ZeRO-3, its parameter offload) or DeepSpeed (a master copy, the plan's
    stage, ZeRO-Offload)."""
    pure = _hf_workload()
    single, _ = _launch(pure, Plan(1, 1, 1))
    assert _config(single)["distributed_type"] == "NO" and _config(single)["mixed_precision"] == "no"
    ddp, _ = _launch(pure, Plan(1, 1, 4, 0))
    assert _config(ddp)["distributed_type"] == "MULTI_GPU" and _config(ddp)["num_processes"] == 4
    offload = _hf_workload(cpu_offload="parameters")
    fsdp = _config(_launch(offload, Plan(1, 1, 4, 3))[0])
    assert fsdp["distributed_type"] == "FSDP" and fsdp["fsdp_config"]["fsdp_version"] == 2
    assert fsdp["fsdp_config"]["fsdp_offload_params"] is True and fsdp["fsdp_config"]["fsdp_reshard_after_forward"]
    zero1, _ = _launch(pure, Plan(1, 1, 4, 1))
    assert "ZeRO-1: a pure-precision run shards with FSDP2, resharding after every forward (ZeRO-3), " + LESS in (
        zero1.notes
    )
    zero2_pure, _ = _launch(pure, Plan(1, 1, 4, 2))  # FSDP2 keeping the gathered parameters: ZeRO-2
    assert _config(zero2_pure)["fsdp_config"]["fsdp_reshard_after_forward"] is False
    assert workload_from_transformers(zero2_pure.argv, zero2_pure.files, pure)[1] == Plan(1, 1, 4, 2)
    mixed = _hf_workload(precision={"weights": "bf16", "master_weights": "fp32"}, cpu_offload="optimizer")
    zero2 = _config(_launch(mixed, Plan(1, 1, 4, 2))[0])
    assert (zero2["distributed_type"], zero2["mixed_precision"]) == ("DEEPSPEED", "bf16")
    assert zero2["deepspeed_config"]["zero_stage"] == 2
    assert zero2["deepspeed_config"]["offload_optimizer_device"] == "cpu"
    assert zero2["deepspeed_config"]["offload_param_device"] == "none"
    args = HfCommand.parse(_launch(mixed, Plan(1, 1, 4, 2))[0].argv).values
    assert (args["bf16"], args["fp16"], args["dtype"]) == (("True",), ("False",), ("bfloat16",))


def test_what_the_hf_trainer_cannot_run_as_budgeted_is_refused_with_the_reason() -> None:
    one = Plan(1, 1, 1)
    assert "tensor or pipeline parallelism" in _launch(_hf_workload(), Plan(2, 1, 1))[1]
    assert "adafactor" in _launch(_hf_workload(optimizer="adafactor"), one)[1]
    assert "bitsandbytes' Lion" in _launch(_hf_workload(optimizer="lion"), one)[1]
    assert "Liger" in _launch(_hf_workload(fused_loss=True), one)[1]
    assert "loss_chunks 8" in _launch(_hf_workload(loss_chunks=8), one)[1]
    assert "optimizer_impl for_loop" in _launch(_hf_workload(optimizer_impl="for_loop"), one)[1]
    autocast = _hf_workload(precision={"weights": "fp32", "compute": "bf16"})
    assert "torch.autocast" in _launch(autocast, one)[1]
    lora = _hf_workload(precision={"weights": "bf16", "master_weights": "fp32"}, method="lora")
    assert _launch(lora, Plan(1, 1, 4, 2))[1] == PEFT_ZERO12_REASON
    assert _launch(lora, Plan(1, 1, 4, 3))[0] is not None  # ZeRO-3: TRL keeps the adapters in the base's dtype
    for plan in (one, Plan(1, 1, 4, 0)):  # PEFT's fp32 adapters, the budget's master copy: plain PEFT, no DeepSpeed
        launch = _launch(lora, plan)[0]
        assert launch is not None and any("PEFT keeps the adapters in fp32" in note for note in launch.notes)
        assert _config(launch)["distributed_type"] in ("NO", "MULTI_GPU")
    pure_lora = _hf_workload(precision={"weights": "bf16"}, method="lora")
    assert "precision.master_weights fp32" in _launch(pure_lora, one)[1]
    qlora = _hf_workload(precision={"weights": "nf4", "compute": "bf16"}, method="qlora")
    assert "QLoRA with ZeRO-3" in _launch(qlora, Plan(1, 1, 4, 3))[1]
    fp16_qlora = _hf_workload(precision={"weights": "nf4", "compute": "fp16"}, method="qlora")
    assert "TRL trains a 4-bit NF4 base in bf16" in _launch(fp16_qlora, one)[1]
    optimizer_only = _hf_workload(cpu_offload="optimizer")
    assert "optimizer-only CPU offload of a pure-precision run" in _launch(optimizer_only, Plan(1, 1, 4, 1))[1]
    architecture = _hf({"task": "training", "model": {"architecture": {"num_layers": 2, "hidden_size": 256,
                        "num_attention_heads": 4, "intermediate_size": 512, "vocab_size": 1000}}})  # fmt: skip
    built = _launch(architecture, one)[0]  # no checkpoint: the model built from its numbers (recommendations.scratch)
    assert built is not None and "--model_name_or_path model" in built.text
    unbuilt = _hf({"task": "training", "model": {"architecture": {"num_layers": 2, "hidden_size": 256, "norm": "layer",
                   "num_attention_heads": 4, "intermediate_size": 512, "vocab_size": 1000}}})  # fmt: skip
    assert (
        "no checkpoint for trl sft to load, and vramplan cannot build one: a gated MLP with layer norms"
        in (_launch(unbuilt, one)[1])
    )


def test_a_renamed_trl_field_a_refused_value_or_a_wrong_accelerate_key_are_problems() -> None:
    launch, _ = _launch(_hf_workload(precision={"weights": "bf16", "master_weights": "fp32"}), Plan(1, 1, 4, 3))
    stack = hf_stack()
    argv, config = list(launch.argv), _config(launch)

    def replaced(old: str, new: str) -> list[str]:
        assert old in argv, old
        return [new if arg == old else arg for arg in argv]

    assert stack.problems(replaced("--per_device_train_batch_size", "--per_device_batch_size"), config) == [
        "--per_device_batch_size: not a field of trl sft (TRL 1.16.0, transformers 5.24.0): it would be ignored"
    ]
    assert stack.problems(replaced("adamw_torch", "adamw"), config)[0].startswith("--optim adamw: not one of")
    assert stack.problems(replaced("wrapped", "wrap"), config) == [
        "--packing_strategy wrap: not one of bfd, bfd_split, wrapped"
    ]
    assert stack.problems(replaced("bfloat16", "bf16"), config) == [
        "--dtype bf16: not one of auto, bfloat16, float16, float32"
    ]
    assert stack.problems(replaced("sdpa", "flash"), config) == [
        "--attn_implementation flash: transformers registers eager, flash_attention_4, flash_attention_3,"
        " flash_attention_2, flex_attention, sdpa, paged|eager"
    ]
    assert stack.problems(replaced("True", "maybe"), config)[0].startswith("--packing maybe: one of true/false")
    assert stack.problems(replaced("trl.scripts.sft", "trl.sft"), config) == [
        "-m trl.sft: TRL 1.16.0's SFT script is -m trl.scripts.sft"
    ]
    assert stack.problems(replaced("--num_processes", "--nproc"), config) == [
        "--nproc: not a flag of accelerate launch 1.15.0"
    ]
    assert stack.problems([*argv, "--max_length", "8"], config) == ["--max_length: given twice"]
    deepspeed = config["deepspeed_config"]
    assert stack.problems(argv, {**config, "zero_stage": 3}) == [
        "zero_stage: not a key of accelerate 1.15.0's config file"
    ]
    assert stack.problems(argv, {**config, "deepspeed_config": {**deepspeed, "offload_optimizer": "cpu"}}) == [
        "deepspeed_config.offload_optimizer: no argument of accelerate launch reads it"
    ]
    assert stack.problems(argv, {**config, "deepspeed_config": {**deepspeed, "offload_param_device": "gpu"}}) == [
        "deepspeed_config.offload_param_device gpu: not one of none, cpu, nvme"
    ]
    assert stack.problems(argv, {**config, "deepspeed_config": {**deepspeed, "zero_stage": 4}}) == [
        "deepspeed_config.zero_stage 4: DeepSpeed's stages are 0 to 3"
    ]
    assert stack.problems(argv, {**config, "distributed_type": "ZERO"})[0].startswith(
        "distributed_type ZERO: not one of NO, MULTI_CPU"
    )
    assert stack.problems(argv, {**config, "num_processes": 8}) == ["num_processes 8: the command starts 4"]
    fsdp = _config(_launch(_hf_workload(), Plan(1, 1, 4, 3))[0])
    renamed = {**fsdp, "fsdp_config": {**fsdp["fsdp_config"], "offload_params": True}}  # fsdp_ prefixed: known
    assert stack.config_problems(renamed, HfCommand("trl.scripts.sft", ())) == []
    wrong = {**fsdp, "fsdp_config": {**fsdp["fsdp_config"], "fsdp_offload_parameters": True}}
    assert stack.config_problems(wrong, HfCommand("trl.scripts.sft", ())) == [
        "fsdp_config.fsdp_offload_parameters: no argument of accelerate launch reads it"
    ]


def test_a_transformers_recommendation_carries_its_command_and_config_file() -> None:
    """Through the recommender: the API's document has the config file, and ``recommend --launch`` prints it after
    the command as a here-document."""
    from recommendations.management.commands.recommend import launch_lines

    workload = _hf(json.loads((ROOT / "fixtures" / "workloads" / "train-qwen2.5-14b-qlora-int4.json").read_text()))
    entries = _runnable(workload)[:5]
    launched = [entry for entry in entries if entry.launch is not None]
    assert launched
    document = launched[0].as_dict()["launch"]
    assert document["engine"] == "transformers" and document["argv"][:2] == ["accelerate", "launch"]
    assert document["files"] == [{"path": ACCELERATE_CONFIG, "content": launched[0].launch.files[0][1]}]
    printed = launch_lines(workload, entries).splitlines()
    at = printed.index(launched[0].launch.text)
    assert printed[at + 1 : at + 3] == [f"# {ACCELERATE_CONFIG}, which the command reads:",
                                        f"cat > {ACCELERATE_CONFIG} <<'EOF'"]  # fmt: skip
    assert json.loads("\n".join(printed[at + 3 : printed.index("EOF", at)])) == _config(launched[0].launch)


# ------------------------------------------------------------------------------------------------------------ lit-gpt


def _lit(data: dict[str, Any]) -> Workload:
    return _on("litgpt", data)


def _lit_workload(
    preset: str = "llama-2-7b", weights: str = "bf16", runtime: dict[str, Any] | None = None, **training: Any
) -> Workload:
    """A workload lit-gpt runs as budgeted on one device: one dtype throughout, no recomputation."""
    precision = {"weights": weights, "compute": "bf16", "gradients": "bf16"}
    return _built("litgpt", preset, 1024, precision, runtime, **training)


def _lit_offloaded() -> Workload:
    workload = _lit_workload()
    assert workload.training is not None
    return workload.model_copy(update={"training": workload.training.model_copy(update={"cpu_offload": "parameters"})})


def _lit_launch(workload: Workload, plan: Plan) -> Any:
    launch = training_launch(workload, {}, plan)
    assert launch is not None, no_training_launch(workload, {}, plan)
    return launch


def test_the_litgpt_fixture_is_the_profiled_commit_read_from_its_source() -> None:
    release = litgpt_release(LITGPT_RELEASE)
    assert release.release == framework_profile("litgpt").release == "8641822"
    assert release.source["commit"] == "8641822b3249bb94f068c254aa5d13decbc9f0a0"
    assert release.source["files"]["finetune/lora.py"] == "3fad07f7eb7ccb3b68c93fdd938dcf13cd4cdc21"
    assert release.source["files"]["finetune/full.py"] == "820e2d8864664c7373b33a76209f431c2f42a31b"
    lora = release.scripts["finetune/lora.py"]
    assert set(lora["setup"]) == {"data_dir", "checkpoint_dir", "out_dir", "precision", "quantize"}
    assert {"devices", "micro_batch_size", "lora_r", "lora_mlp"} <= set(lora["globals"])
    assert "meta-llama/Llama-2-7b-hf" in release.configs and "meta-llama/Llama-3.1-8B" not in release.configs


@pytest.mark.parametrize("path", TRAINING_EXAMPLES, ids=lambda p: p.stem)
def test_every_runnable_entry_has_a_litgpt_launch_the_commit_accepts_or_a_reason(path: Path) -> None:
    """lit-gpt at 8641822 (October 2023) has configs of none of the examples' models: every entry says so."""
    workload = _lit(json.loads(path.read_text()))
    for entry in _runnable(workload):
        launch = training_launch(workload, entry.suggested_settings, entry.plan)
        reason = no_training_launch(workload, entry.suggested_settings, entry.plan)
        assert launch is None and reason is not None, entry.configuration["slug"]
        assert "has no config of" in reason


@pytest.mark.parametrize("method", ["full", "lora", "qlora"])
def test_a_llama_2_recommendation_under_litgpt_launches_or_says_why(method: str) -> None:
    weights = "nf4" if method == "qlora" else "bf16"
    workload = _lit_workload(weights=weights, method=method, activation_checkpointing="none")
    release = litgpt_release(LITGPT_RELEASE)
    launched = 0
    for entry in _runnable(workload):
        launch = training_launch(workload, entry.suggested_settings, entry.plan)
        reason = no_training_launch(workload, entry.suggested_settings, entry.plan)
        assert (launch is None) != (reason is None), entry.configuration["slug"]
        if launch is not None:
            launched += 1
            assert release.problems(launch.argv, launch.files) == []
            assert launch.engine == "litgpt" and launch.checked_against == "lit-gpt 8641822"
            ast.parse(dict(launch.files)[LIT_WRAPPER])
    assert launched > 0


def test_the_litgpt_command_sets_every_budgeted_setting() -> None:
    workload = _lit_workload(method="lora", lora={"rank": 16, "dropout": 0.05, "target_modules": ["q_proj", "v_proj"]},
                             runtime={"expandable_segments": True})  # fmt: skip
    launch = _lit_launch(workload, Plan(1, 1, 1))
    assert launch.argv == ("env", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", "python", LIT_WRAPPER,
                           "--checkpoint_dir", "checkpoints/meta-llama/Llama-2-7b-hf", "--data_dir", "data/alpaca",
                           "--precision", "bf16-true")  # fmt: skip
    release = litgpt_release(LITGPT_RELEASE)
    script, constants = release.read_wrapper(dict(launch.files)[LIT_WRAPPER])
    assert script == "finetune/lora.py"
    assert {k: v for k, v in constants.items() if k != "gradient_accumulation_iters"} == {
        "devices": 1, "micro_batch_size": 2, "lora_r": 16, "lora_dropout": 0.05, "lora_query": True,
        "lora_key": False, "lora_value": True, "lora_projection": False, "lora_mlp": False, "lora_head": False,
    }  # fmt: skip
    assert "--max_seq_length 1024" in launch.notes[0]
    qlora = _lit_launch(_lit_workload(weights="nf4", method="qlora"), Plan(1, 1, 1))
    assert qlora.argv[-2:] == ("--quantize", "bnb.nf4")
    full = _lit_launch(_lit_workload(activation_checkpointing="full"), Plan(1, 1, 4, 2))
    assert release.read_wrapper(dict(full.files)[LIT_WRAPPER]) == (
        "finetune/full.py",
        {"devices": 4, "micro_batch_size": 2,
         "gradient_accumulation_iters": "max(1, int(script.batch_size // script.micro_batch_size))"},
    )  # fmt: skip
    assert any(note.startswith("ZeRO-2") and note.endswith(LESS) for note in full.notes)


def test_what_litgpt_cannot_run_as_budgeted_is_refused_with_the_reason() -> None:
    one = Plan(1, 1, 1)
    cases = [
        (_lit_workload(activation_checkpointing="full"), one, "recomputes only under FSDP"),
        (_lit_workload(weights="nf4", method="qlora"), Plan(1, 1, 2, 3), "QLoRA on more than one device"),
        (_lit_workload(weights="int4", method="qlora"), one, "QLoRA with int4 weights"),
        (_lit_workload(optimizer="adamw_8bit"), one, "builds AdamW"),
        (_lit_workload(optimizer_impl="fused"), one, "AdamW's fused step"),
        (_lit_offloaded(), Plan(1, 1, 2, 3), "cpu_offload=False"),
        (_lit_workload(runtime={"compile": True}), one, "does not compile"),
        (_lit_workload(), Plan(2, 1, 1), "shard with FSDP only"),
        (_lit_workload(sequence_length=8192), one, "block_size 4096"),
        (_lit_workload("llama-3.1-8b"), one, "has no config of meta-llama/Llama-3.1-8B"),
    ]
    for workload, plan, reason in cases:
        assert training_launch(workload, {}, plan) is None
        assert reason in (no_training_launch(workload, {}, plan) or ""), reason


def test_a_renamed_litgpt_constant_flag_or_value_is_a_problem() -> None:
    release = litgpt_release(LITGPT_RELEASE)
    launch = _lit_launch(_lit_workload(method="lora"), Plan(1, 1, 1))
    wrapper = dict(launch.files)[LIT_WRAPPER]
    assert release.problems(launch.argv, launch.files) == []
    renamed = ((LIT_WRAPPER, wrapper.replace("script.lora_r =", "script.lora_rank =")),)
    assert release.problems(launch.argv, renamed) == [
        "finetune/lora.py: has no module constant lora_rank at lit-gpt 8641822, it would be ignored"
    ]
    assert release.problems((*launch.argv, "--micro_batch_size", "2"), launch.files) == [
        "--micro_batch_size: not a parameter of finetune/lora.py's setup at lit-gpt 8641822"
    ]
    assert release.problems((*launch.argv, "--quantize", "bnb.nf5"), launch.files)[0].startswith(
        "--quantize bnb.nf5: not one of"
    )
    full = ((LIT_WRAPPER, wrapper.replace("finetune.lora", "finetune.full")),)
    found = release.problems((*launch.argv, "--quantize", "bnb.nf4"), full)
    assert "finetune/full.py: has no module constant lora_r at lit-gpt 8641822, it would be ignored" in found
    assert "--quantize: not a parameter of finetune/full.py's setup at lit-gpt 8641822" in found
    other = tuple(a.replace("Llama-2-7b-hf", "Llama-3-8B") for a in launch.argv)
    assert "no config of lit-gpt" in release.problems(other, launch.files)[0]
    no_cli = ((LIT_WRAPPER, wrapper.replace("CLI(script.setup)", "script.setup()")),)
    assert "CLI(script.setup)" in release.problems(launch.argv, no_cli)[0]
    assert release.helper_problems(("python", "scripts/prepare_alpaca.py", "--max_length", "1024")) == [
        "--max_length: not a parameter of scripts/prepare_alpaca.py's prepare at lit-gpt 8641822"
    ]


# ------------------------------------------------------------------------------------------------------------ Unsloth


def _unsloth(data: dict[str, Any]) -> Workload:
    return _on("unsloth", data)


def _unsloth_workload(preset: str = "qwen2.5-7b", weights: str = "bf16", **training: Any) -> Workload:
    precision = {"weights": weights, "compute": "bf16", "gradients": "bf16"}
    return _built("unsloth", preset, 2048, precision, **{"method": "lora", **training})


def _calls(script: str) -> dict[str, dict[str, Any]]:
    """Each call of the script's checked functions: its keywords and their source."""
    found: dict[str, dict[str, Any]] = {}
    for node in ast.walk(ast.parse(script)):
        if isinstance(node, ast.Call) and ast.unparse(node.func) in UNSLOTH_CALLS:
            found[ast.unparse(node.func)] = {str(kw.arg): ast.unparse(kw.value) for kw in node.keywords}
    return found


def test_the_unsloth_fixture_is_the_profiled_commit_and_the_wheels_it_read() -> None:
    release = unsloth_release(UNSLOTH_RELEASE)
    assert release.release == framework_profile("unsloth").release == "2024.12"
    assert release.source["unsloth"]["commit"] == "400d9955b6e8b27b4a5c603837d27d1402fb1ee0"
    assert release.source["unsloth"]["files"]["unsloth/models/loader.py"] == "f8ed3a87e6a1f6279d0bb27a1b98f7e7e582d572"
    assert release.source["trl"]["sha256"] == "502b958ac95313bd3e1a31ce91bc852b14f90303bc9b973ede1ee959f40c5c5a"
    assert release.source["transformers"]["sha256"] == (
        "a12ef6f52841fd190a3e5602145b542d03507222f2c64ebb7ee92e8788093aef"
    )
    assert {"model_name", "max_seq_length", "dtype", "load_in_4bit"} <= set(release.keywords["from_pretrained"])
    assert {"r", "target_modules", "use_gradient_checkpointing"} <= set(release.keywords["get_peft_model"])
    assert "max_seq_length" in release.keywords["sft_config"] and "adamw_8bit" in release.optimizers


@pytest.mark.parametrize("path", TRAINING_EXAMPLES, ids=lambda p: p.stem)
def test_every_runnable_entry_has_an_unsloth_launch_the_release_accepts_or_a_reason(path: Path) -> None:
    workload = _unsloth(json.loads(path.read_text()))
    release = unsloth_release(UNSLOTH_RELEASE)
    for entry in _runnable(workload):
        launch = training_launch(workload, entry.suggested_settings, entry.plan)
        reason = no_training_launch(workload, entry.suggested_settings, entry.plan)
        assert (launch is None) != (reason is None), entry.configuration["slug"]
        if launch is not None:
            assert release.problems(launch.argv, launch.files) == []
            assert launch.engine == "unsloth" and launch.checked_against == release.label
            ast.parse(dict(launch.files)[UNSLOTH_SCRIPT])


def test_the_examples_unsloth_runs_launch_and_those_it_cannot_say_why() -> None:
    reasons: dict[str, set[str]] = {}
    launched: dict[str, int] = {}
    for path in TRAINING_EXAMPLES:
        workload = _unsloth(json.loads(path.read_text()))
        for entry in _runnable(workload):
            reason = no_training_launch(workload, entry.suggested_settings, entry.plan)
            reasons.setdefault(path.stem, set()).add(reason or "")
            launched[path.stem] = launched.get(path.stem, 0) + (reason is None)
    assert launched["train-llama-3.1-8b-lora"] > 0
    assert any("full fine-tuning" in r for r in reasons["train-llama-3.2-1b-full-bf16-adamw"])
    assert any("QLoRA with int4 weights" in r for r in reasons["train-qwen2.5-14b-qlora-int4"])
    assert all("CUDA GPUs only" in r for r in reasons["cpu-qwen2.5-0.5b-train"])


def test_the_unsloth_script_sets_every_budgeted_setting() -> None:
    workload = _unsloth_workload(weights="nf4", method="qlora", activation_checkpointing="full",
                                 activation_offloading=True, optimizer="adamw_8bit",
                                 lora={"rank": 32, "target_modules": ["all-linear"]})  # fmt: skip
    launch = training_launch(workload, {"max_micro_batch_size": 4}, Plan(1, 1, 1))
    assert launch is not None, no_training_launch(workload, {}, Plan(1, 1, 1))
    assert launch.argv == ("python", UNSLOTH_SCRIPT)
    calls = _calls(dict(launch.files)[UNSLOTH_SCRIPT])
    assert calls["FastLanguageModel.from_pretrained"] == {
        "model_name": "'Qwen/Qwen2.5-7B'", "max_seq_length": "2048", "dtype": "torch.bfloat16",
        "load_in_4bit": "True", "use_gradient_checkpointing": "'unsloth'",
    }  # fmt: skip
    peft = calls["FastLanguageModel.get_peft_model"]
    assert peft["r"] == "32" and peft["use_gradient_checkpointing"] == "'unsloth'"
    assert ast.literal_eval(peft["target_modules"]) == [
        "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"
    ]  # fmt: skip
    config = calls["SFTConfig"]
    assert (config["per_device_train_batch_size"], config["max_seq_length"]) == ("2", "2048")
    assert (config["optim"], config["bf16"], config["packing"]) == ("'adamw_8bit'", "True", "False")
    assert any("up to 4 fits" in note for note in launch.notes)
    plain = training_launch(_unsloth_workload(fused_loss=False), {}, Plan(1, 1, 1))
    assert plain is not None and plain.argv == ("env", "UNSLOTH_RETURN_LOGITS=1", "python", UNSLOTH_SCRIPT)
    assert (
        _calls(dict(plain.files)[UNSLOTH_SCRIPT])["FastLanguageModel.get_peft_model"]["use_gradient_checkpointing"]
        == "False"
    )


def test_what_unsloth_cannot_run_as_budgeted_is_refused_with_the_reason() -> None:
    one = Plan(1, 1, 1)
    cases = [
        (_unsloth_workload(), Plan(1, 1, 2, 2), "runs one process on one GPU"),
        (_unsloth_workload(method="full"), one, "full fine-tuning"),
        (_unsloth_workload("phi-4"), one, "model_type phi3"),
        (_unsloth_workload(optimizer="sgd_momentum"), one, "the sgd_momentum optimizer"),
        (_unsloth_workload(optimizer_impl="for_loop"), one, "for-loop AdamW step"),
    ]
    for workload, plan, reason in cases:
        assert training_launch(workload, {}, plan) is None
        assert reason in (no_training_launch(workload, {}, plan) or ""), reason


def test_a_renamed_unsloth_keyword_or_a_refused_value_is_a_problem() -> None:
    release = unsloth_release(UNSLOTH_RELEASE)
    launch = training_launch(_unsloth_workload(), {}, Plan(1, 1, 1))
    assert launch is not None
    script = dict(launch.files)[UNSLOTH_SCRIPT]
    assert release.problems(launch.argv, launch.files) == []

    def problems(old: str, new: str) -> list[str]:
        assert old in script
        return release.problems(launch.argv, ((UNSLOTH_SCRIPT, script.replace(old, new)),))

    assert problems("    r=16,", "    rank=16,") == [
        f"FastLanguageModel.get_peft_model(rank=…): not a parameter in {release.label}, it would be ignored"
    ]
    assert problems("max_seq_length=2048,\n    dtype", "max_length=2048,\n    dtype") == [
        f"FastLanguageModel.from_pretrained(max_length=…): not a parameter in {release.label}, it would be ignored"
    ]
    assert problems("        max_seq_length=2048,", "        max_length=2048,") == [
        f"SFTConfig(max_length=…): not a parameter in {release.label}, it would be ignored"
    ]
    assert problems("optim='adamw_torch'", "optim='adamw_9bit'") == [
        "SFTConfig(optim='adamw_9bit'): not one of transformers' OptimizerNames"
    ]
    assert problems("processing_class=", "tokenizer_class=")[0].startswith("SFTTrainer(tokenizer_class=…)")
    assert problems("trainer = SFTTrainer(", "trainer = Trainer(") == ["SFTTrainer: not called"]
    assert problems("trainer.train()", "trainer.train(")[0].startswith(f"{UNSLOTH_SCRIPT}: ")


def test_a_plan_only_another_framework_launches_is_named_not_recommended() -> None:
    """Llama-3.1-70B trained in pure bf16 over 8 H100s: torchtitan's closest plan is tensor parallel, one the HF
    Trainer cannot run; under transformers the entry says so instead of recommending it."""
    data = {"name": "70b-full", "task": "training", "model": {"preset": "llama-3.1-70b"},
            "precision": {"weights": "bf16"}, "training": {"micro_batch_size": 1, "sequence_length": 8192}}  # fmt: skip
    h100 = [VIEWS["h100-sxm-80gb-x8-r535"]]
    (titan,) = recommend(_on("torchtitan", data), h100)
    assert titan.plan is not None and titan.plan.tensor > 1
    (hf,) = recommend(_hf(data), h100)
    assert hf.plan is not None and (hf.plan.tensor, hf.plan.pipeline) == (1, 1)
    (left_out,) = [reason for reason in hf.reasons if reason.rule == "framework"]
    assert "HF Trainer's data parallelism" in left_out.message and "torchtitan" in left_out.action


def test_unsloth_on_a_larger_node_is_recommended_on_one_of_its_gpus_with_its_script() -> None:
    data = {"name": "8b-qlora", "task": "training", "model": {"preset": "llama-3.1-8b"},
            "precision": {"weights": "nf4"}, "training": {"method": "qlora", "micro_batch_size": 1,
                                                          "sequence_length": 2048}}  # fmt: skip
    (entry,) = recommend(_on("unsloth", data), [VIEWS["h100-sxm-80gb-x8-r535"]])
    assert entry.verdict in RUNNABLE and entry.plan is not None and entry.plan.devices == 1
    assert entry.launch is not None and entry.launch.engine == "unsloth"


TWO_NODES = "h100-sxm-80gb-2x8-r570"


@pytest.mark.parametrize("framework", ["transformers", "torchtune", "torchtitan"])
def test_a_plan_over_two_nodes_launches_a_node_at_a_time_and_reads_back_to_its_plan(framework: str) -> None:
    """2 × 8 H100: the command starts a node's 8 processes on each node, with the first node's address for the
    rendezvous (torchrun's --nnodes and c10d; accelerate's num_machines and main_process_ip), and read back it
    runs the entry's plan on all 16."""
    data = {"name": "8b-full", "task": "training", "model": {"preset": "llama-3.1-8b"},
            "precision": {"weights": "bf16"}, "training": {"micro_batch_size": 1, "sequence_length": 2048}}  # fmt: skip
    workload = _on(framework, data)
    (entry,) = recommend(workload, [VIEWS[TWO_NODES]])
    assert entry.verdict in RUNNABLE and entry.plan is not None and entry.plan.devices == 16
    assert (entry.suggested_settings["nodes"], entry.suggested_settings["devices_per_node"]) == (2, 8)
    launch = entry.launch
    assert launch is not None, no_training_launch(workload, entry.suggested_settings, entry.plan)
    assert any(note.startswith("2 nodes of 8 processes") and "HEAD_NODE_IP" in note for note in launch.notes)
    if framework == "transformers":
        config = _config(launch)
        assert (config["num_machines"], config["num_processes"], config["machine_rank"]) == (2, 16, 0)
        assert config["main_process_ip"] == "HEAD_NODE_IP" and _hf_problems(launch) == []
        _, plan = workload_from_transformers(launch.argv, launch.files, workload)
    elif framework == "torchtune":
        tune = TuneCommand.parse(launch.argv)
        assert dict(tune.torchrun) == {"--nnodes": "2", "--nproc_per_node": "8", "--rdzv_backend": "c10d",
                                          "--rdzv_endpoint": "HEAD_NODE_IP:29500"}  # fmt: skip
        assert torchtune_release(TORCHTUNE_RELEASE).problems(launch.argv) == []
        _, plan = workload_from_torchtune(launch.argv, workload)
    else:
        titan = TitanCommand.parse(launch.argv)
        assert dict(titan.torchrun)["--nnodes"] == "2" and titan.processes == 16
        assert torchtitan_release(TORCHTITAN_RELEASE).problems(launch.argv) == []
        _, plan = workload_from_torchtitan(launch.argv, workload)
    assert (plan.tensor, plan.pipeline, plan.devices) == (entry.plan.tensor, entry.plan.pipeline, 16)


def test_lit_gpt_is_planned_on_one_node_of_a_larger_configuration() -> None:
    """lit-gpt's Fabric has no num_nodes: on 2 × 8 its plan fills one node, and a 16-device plan says why not."""
    data = {"name": "7b-lora", "task": "training", "model": {"preset": "llama-2-7b"}, "precision": {"weights": "bf16"},
            "training": {"micro_batch_size": 2, "sequence_length": 1024, "method": "lora",
                         "lora": {"rank": 8, "target_modules": ["q_proj", "v_proj"]}}}  # fmt: skip
    workload = _on("litgpt", data)
    (entry,) = recommend(workload, [VIEWS[TWO_NODES]])
    assert entry.plan is not None and entry.plan.devices == 8 and entry.launch is not None
    reason = no_training_launch(workload, {"nodes": 2, "devices_per_node": 8}, Plan(1, 1, 16, 3))
    assert reason is not None and "without num_nodes" in reason


def test_a_plan_that_would_fill_part_of_a_node_is_refused() -> None:
    assert torchrun_flags(12, {"nodes": 2, "devices_per_node": 8}) == (
        "12 processes over nodes of 8 devices: the launchers start as many on every node"
    )
    assert torchrun_flags(8, {"nodes": 2, "devices_per_node": 8}) == ((("--nproc_per_node", "8"),), [])
