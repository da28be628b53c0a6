"""Training frameworks as profiles (issue 17, item 3): torchtune's optimizer in backward and paged 8-bit AdamW,
torchtitan's per-op selective checkpointing, Unsloth's offloaded checkpointing and fused loss, and offloading to the
CPU, each against the published run it stands for (benchmarks/gpu_published/peaks.json, group "frameworks") and
against properties any such mechanism must have."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from benchmarks.recommend_speed import fixture_views
from budgets.engine import Workload, estimate
from budgets.engine.models.presets import load_presets
from recommendations.recommend import recommend

GIB = 2**30
PEAKS = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_published" / "peaks.json"
RECORDS = {r["id"]: r for r in json.loads(PEAKS.read_text())["records"]}
VIEWS = {"reserved": "framework_reserved", "allocated": "framework_allocated", "device_used": "device_used"}
ALL_LINEAR = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _workload(record_id: str, **training) -> Workload:
    description = json.loads(json.dumps(RECORDS[record_id]["workload"]))
    description["training"].update(training)
    return Workload.model_validate(description)


def _error(record_id: str) -> float:
    record = RECORDS[record_id]
    view = estimate(_workload(record_id)).as_contract()["per_device"]["views"][VIEWS[record["view"]]]
    measured = record["measured"]["value"] * record["measured"]["bytes_per_unit"]
    return (view["bytes"] - measured) / measured


def _qlora_70b(preset: str, parallelism: dict | None = None, **training) -> Workload:
    """A 70B QLoRA workload with full checkpointing and the given training settings."""
    return Workload.model_validate(
        {
            "name": f"qlora-{preset}",
            "task": "training",
            "model": {"preset": preset},
            "precision": {"weights": "nf4"},
            "training": {"method": "qlora", "activation_checkpointing": "full", **training},
            "parallelism": parallelism or {},
        }
    )


def _verdicts(workload: Workload, accelerator: str) -> set[str]:
    views = [v for v in fixture_views() if v.accelerator_name == accelerator and v.device_count == 1]
    assert views, accelerator
    return {entry.verdict.value for entry in recommend(workload, views)}


def test_torchtune_full_fine_tune_of_8b_on_a_4090_is_within_10_percent_and_fits() -> None:
    """README v0.6.1:119: 18.9 GiB; the default transformers step (all gradients, states on the device) budgets
    more than twice that. It fits the 4090 with its margin; run eagerly (no compile) it is only ``tight``: the eager
    chunked loss keeps every chunk's fp32 log-softmax."""
    assert abs(_error("torchtune-4090-llama-3.1-8b-full")) <= 0.10
    workload = _workload("torchtune-4090-llama-3.1-8b-full")
    assert _verdicts(workload, "NVIDIA GeForce RTX 4090 24GB") == {"fits"}
    eager = workload.model_copy(update={"runtime": workload.runtime.model_copy(update={"compile": False})})
    assert _verdicts(eager, "NVIDIA GeForce RTX 4090 24GB") == {"tight"}
    plain = _workload(
        "torchtune-4090-llama-3.1-8b-full",
        framework="transformers",
        optimizer="adamw_8bit",
        optimizer_in_backward=False,
    )
    assert estimate(plain).per_device.total_bytes > 2 * estimate(workload).per_device.total_bytes


def test_optimizer_in_backward_keeps_one_gradient_and_no_optimizer_phase() -> None:
    stepped = estimate(_workload("torchtune-4090-llama-3.1-8b-full", optimizer="adamw_8bit")).as_contract()
    after = estimate(
        _workload("torchtune-4090-llama-3.1-8b-full", optimizer="adamw_8bit", optimizer_in_backward=False)
    ).as_contract()
    assert "optimizer_step" not in stepped["per_device"]["phases"]
    assert "optimizer_step" in after["per_device"]["phases"]
    embedding = 128_256 * 4_096 * 2  # Llama 3.1's largest tensor, its embedding, in bf16
    assert stepped["per_device"]["components"]["gradients"]["bytes"] == embedding
    assert after["per_device"]["components"]["gradients"]["bytes"] == 8_030_261_248 * 2  # every parameter's


def test_paged_optimizer_states_are_budgeted_in_host_ram_not_on_the_device() -> None:
    paged = estimate(_workload("torchtune-4090-llama-3.1-8b-full"))
    resident = estimate(_workload("torchtune-4090-llama-3.1-8b-full", optimizer="adamw_8bit"))
    states = resident.per_device.component("optimizer_state").bytes
    assert states > 14 * GIB  # 2 B and an absmax per 256 for 8.03 B parameters
    assert paged.per_device.component("optimizer_state").bytes == 0
    assert paged.host.ram_bytes - resident.host.ram_bytes == states
    assert any("paged optimizer states" in line for line in paged.assumptions)


def test_torchtitan_per_op_selective_checkpointing_is_within_15_percent() -> None:
    """Megatron's selective recomputation keeps every projection and norm; torchtitan's per-op policy keeps half
    the matmuls: the difference the issue found (+77…+102 % when 'selective' stood for both)."""
    assert abs(_error("torchtitan-h100-llama-3.1-8b-fsdp8-sac-op")) <= 0.15
    op = estimate(_workload("torchtitan-h100-llama-3.1-8b-fsdp8-sac-op")).per_device.component("activations").bytes
    megatron = (
        estimate(_workload("torchtitan-h100-llama-3.1-8b-fsdp8-sac-op", activation_checkpointing="selective"))
        .per_device.component("activations")
        .bytes
    )
    full = (
        estimate(_workload("torchtitan-h100-llama-3.1-8b-fsdp8-sac-op", activation_checkpointing="full"))
        .per_device.component("activations")
        .bytes
    )
    assert full < op < megatron


def test_unsloth_70b_qlora_fits_a_48_gb_card() -> None:
    """Unsloth's blog: Llama 3.3 70B QLoRA 'fits in 41GB'; batch 2 × 2048, rank 16, as its notebooks run it."""
    workload = _qlora_70b(
        "llama-3.3-70b",
        framework="unsloth",
        micro_batch_size=2,
        sequence_length=2048,
        activation_offloading=True,
        lora={"rank": 16, "target_modules": ALL_LINEAR},
    )
    assert _verdicts(workload, "NVIDIA RTX A6000 48GB") == {"fits"}
    assert estimate(workload).per_device.total_bytes < 44 * GIB


def test_unsloth_max_context_on_48_gb_fills_the_card_within_10_percent() -> None:
    assert abs(_error("unsloth-48gb-llama-3.3-70b-max-context")) <= 0.10


def test_activation_offloading_moves_the_checkpointed_inputs_to_host_ram() -> None:
    offloaded = estimate(_workload("unsloth-48gb-llama-3.3-70b-max-context"))
    kept = estimate(_workload("unsloth-48gb-llama-3.3-70b-max-context", activation_offloading=False))
    layer_inputs = 80 * 12_106 * 8_192 * 2  # every decoder layer's input, bf16
    moved = kept.per_device.component("activations").bytes - offloaded.per_device.component("activations").bytes
    assert moved == pytest.approx(layer_inputs * 79 / 80, rel=0.01)  # one stays on the device (Unsloth's stash)
    assert offloaded.host.ram_bytes - kept.host.ram_bytes == pytest.approx(moved, rel=0.01)


def test_a_fused_loss_stores_no_logits() -> None:
    fused = estimate(_workload("unsloth-48gb-llama-3.3-70b-max-context"))
    unfused = estimate(_workload("unsloth-48gb-llama-3.3-70b-max-context", fused_loss=False))
    logits = 12_106 * 128_256 * 2  # one bf16 copy of the logits
    difference = unfused.per_device.component("activations").bytes - fused.per_device.component("activations").bytes
    assert difference > logits


def test_fsdp_qlora_with_cpu_offload_of_70b_on_four_24_gb_cards_is_expressible_and_budgets_host_ram() -> None:
    """philschmid.de/fsdp-qlora-llama3: Llama 3 70B on 4 × A10G with FSDP + QLoRA + CPU offload, '22 GB/GPU and 127
    GB CPU RAM' (seq 3072, batch 1). The device holds the gathered layers, the root unit and the activations; host
    RAM holds every process's shard of parameters, gradients and optimizer states."""
    workload = _qlora_70b(
        "llama-3.1-70b",
        {"data": 4, "zero_stage": 3},
        micro_batch_size=1,
        sequence_length=3072,
        cpu_offload="parameters",
        lora={"rank": 16, "target_modules": ["all-linear"]},
    )
    budget = estimate(workload)
    device = budget.per_device
    assert device.component("weights").bytes == 0
    assert device.component("optimizer_state").bytes == 0
    assert device.total_low_bytes <= 22e9 <= device.total_high_bytes  # the published nvidia-smi figure, in range
    four_bit_model = 68.45e9 * 0.5  # the decoder's NF4 weights alone, over the four processes of the node
    assert budget.host.ram_bytes > four_bit_model
    assert any("host RAM instead of device memory" in line for line in budget.assumptions)
    on_device = workload.model_copy(update={"training": workload.training.model_copy(update={"cpu_offload": "none"})})
    assert estimate(on_device).per_device.total_bytes > device.total_bytes


@pytest.mark.parametrize(
    ("training", "parallelism", "field"),
    [
        ({"optimizer_in_backward": True}, {}, "optimizer_in_backward"),
        ({"framework": "torchtune", "optimizer_in_backward": True, "method": "lora"}, {}, "optimizer_in_backward"),
        ({"framework": "unsloth", "activation_offloading": True}, {}, "activation_offloading"),
        ({"framework": "torchtitan", "fused_loss": True}, {}, "fused_loss"),
        ({"framework": "torchtune", "float8_linear": True}, {}, "float8_linear"),
        ({"cpu_offload": "parameters"}, {"data": 2, "zero_stage": 2}, "cpu_offload"),
        ({"cpu_offload": "optimizer"}, {}, "cpu_offload"),
    ],
)
def test_a_setting_its_framework_or_plan_cannot_run_is_refused_naming_it(training, parallelism, field) -> None:
    description = {
        "name": "x",
        "task": "training",
        "model": {"preset": "llama-3.2-1b"},
        "training": training,
        "parallelism": parallelism,
    }
    with pytest.raises(ValidationError, match=field):
        Workload.model_validate(description)


def test_a_framework_release_without_a_profile_is_refused() -> None:
    description = {
        "name": "x",
        "task": "training",
        "model": {"preset": "llama-3.2-1b"},
        "training": {"framework": "torchtune"},
        "runtime": {"engine_version": "0.4.0"},
    }
    with pytest.raises(ValidationError, match=r"engine_version '0\.4\.0'.*0\.6\.1"):
        Workload.model_validate(description)
    description["runtime"]["engine_version"] = "0.6.1"
    assert "torchtune 0.6.1" in " ".join(estimate(Workload.model_validate(description)).assumptions)


TITAN_405B = "torchtitan-512xh100-llama-3.1-405b-fsdp8-tp8-pp8-float8"


def test_torchtitans_published_405b_run_on_512_gpus_is_within_10_percent_and_inside_the_range() -> None:
    """Issue 18: the busiest device of a published multi-node 405B run (torchtitan's Table 5, 1F1B, 82.5 GiB)."""
    assert abs(_error(TITAN_405B)) <= 0.10
    record = RECORDS[TITAN_405B]
    view = estimate(_workload(TITAN_405B)).as_contract()["per_device"]["views"]["framework_reserved"]
    assert view["low"] <= record["measured"]["value"] * GIB <= view["high"]
    assert abs(_error("torchtitan-256xh100-llama-3.1-70b-fsdp32-tp8-float8")) <= 0.10
    assert abs(_error("torchtitan-512xh100-llama-3.1-405b-fsdp8-tp8-pp8-32k-float8")) <= 0.10


def _stage_parameters(workload: Workload) -> float:
    """The first of 8 pipeline stages on one of 8 tensor ranks: 126 / 8 → 16 layers and the embedding, by the
    preset's own count (every layer alike; norms split with the matrices, as the engine counts them)."""
    spec = workload.spec
    embedding = spec.vocab_size * spec.hidden_size
    head = spec.vocab_size * spec.hidden_size + spec.hidden_size
    per_layer = (load_presets()["llama-3.1-405b"].parameter_count - embedding - head) / spec.num_layers
    return (16 * per_layer + embedding) / 8


def test_pipeline_stages_under_fsdp_keep_the_stage_gathered_and_whole_fp32_gradients() -> None:
    """torchtitan's pipeline stages: the stage gathered in bf16 (linears in float8 with float8 all-gather) and its
    gradients unsharded in fp32 from the first backward on, beside the sharded ones at the last."""
    workload = _workload(TITAN_405B, float8_linear=False)
    budget = estimate(workload).as_contract()["per_device"]
    stage = _stage_parameters(workload)
    assert budget["peak_phase"] == "backward_next_microbatch"
    sharded = budget["components"]["gradients"]["bytes"] - stage * 4
    assert sharded == pytest.approx(stage * 4 / 8, rel=0.01)  # the reduce-scatter's output, at the last backward
    weights = budget["components"]["weights"]["bytes"]
    assert weights == pytest.approx(stage * 4 / 8 + stage * 2, rel=0.01)  # fp32 shards + the gathered bf16 stage
    float8 = estimate(_workload(TITAN_405B)).as_contract()["per_device"]["components"]["weights"]["bytes"]
    embedding = workload.spec.vocab_size * workload.spec.hidden_size / 8
    assert weights - float8 == pytest.approx(stage - embedding, rel=0.01)  # the linears gathered in 1 B, not 2


@pytest.mark.parametrize(
    ("framework", "parallelism"),
    [
        ("torchtitan", {"tensor": 8, "pipeline": 8, "data": 1}),  # no FSDP mesh
        ("torchtitan", {"tensor": 8, "data": 8, "zero_stage": 3}),  # no pipeline
        ("transformers", {"tensor": 8, "pipeline": 8, "data": 8, "zero_stage": 3}),  # DeepSpeed's pipeline
    ],
)
def test_only_pipelined_fsdp_keeps_stages_gathered(framework: str, parallelism: dict) -> None:
    description = json.loads(json.dumps(RECORDS[TITAN_405B]["workload"]))
    description["training"].update(framework=framework, float8_linear=False)
    description["parallelism"] = {**parallelism, "sequence_parallel": framework == "torchtitan"}
    phases = estimate(Workload.model_validate(description)).as_contract()["per_device"]["phases"]
    assert "backward_next_microbatch" not in phases


def _titan_405b(**parallelism) -> dict:
    description = json.loads(json.dumps(RECORDS[TITAN_405B]["workload"]))
    description["parallelism"].update(parallelism)
    return description


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"training": {"framework": "transformers"}}, "framework 'torchtitan'"),
        ({"parallelism": {"zero_stage": 0, "data": 4, "context": 2}}, "zero_stage 2 or 3"),
        ({"runtime": {"attention": "eager", "compile": True}}, "runtime.attention"),
        ({"training": {"sequence_length": 8190}}, "training.sequence_length"),
    ],
)
def test_context_parallelism_is_refused_where_torchtitan_does_not_run_it(change: dict, field: str) -> None:
    description = _titan_405b(data=4, context=2)
    for section, fields in change.items():
        description[section] = {**description[section], **fields}
    with pytest.raises(ValidationError, match=field):
        Workload.model_validate(description)


def test_context_parallelism_splits_each_sequence_and_shards_over_data_times_context() -> None:
    """Four context ranks of 4 × longer sequences hold what one rank of the shorter ones does (the same tokens each,
    FSDP over the same 8 ranks), plus one layer's all-gathered keys and values of the whole sequences (Llama 3.1 405B
    on 8 tensor ranks: one KV head of 128, bf16; a micro-batch of 4) and the fp32 merge of its output."""
    short = estimate(Workload.model_validate(_titan_405b(data=8, context=1))).as_contract()["per_device"]
    long = _titan_405b(data=2, context=4)
    long["training"]["sequence_length"] *= 4
    split = estimate(Workload.model_validate(long)).as_contract()["per_device"]
    for component in ("weights", "gradients", "optimizer_state"):
        assert split["components"][component]["bytes"] == short["components"][component]["bytes"]
    gathered = 2 * 4 * (4 * 8192) * 128 * 2  # keys and values of the 4 whole sequences, this rank's KV head, bf16
    extra = split["components"]["activations"]["bytes"] - short["components"]["activations"]["bytes"]
    assert gathered <= extra <= 4 * gathered
    assert Workload.model_validate(long).parallelism.devices == 8 * 8 * 2 * 4
