"""``recommendations.scratch``: a workload that names no checkpoint launches the model built from its own numbers.

The config.json each architecture is written as is checked against two readings that are not the mapping's: the
engine's own reader of Hugging Face configs (``budgets.engine.models.hf_config``, which counts each model type from
its modeling file) budgets it as the architecture, and, where the bench extra installs transformers, the model
transformers builds from it (the launch's own ``init_model.py``) has the parameters vramplan counts.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from budgets.engine import Workload, estimate, parameter_count
from recommendations.launch import (
    engine_flags,
    no_serving_launch,
    sglang_launch,
    vllm_launch,
    workload_from_sglang,
    workload_from_vllm,
)
from recommendations.launch_transformers import GENERATE_SCRIPT, TRANSFORMERS_RELEASE, transformers_launch
from recommendations.plans import Plan
from recommendations.scratch import (
    INIT_SCRIPT,
    INIT_SCRIPT_TEXT,
    SCRATCH_DIR,
    SCRATCH_TOKENIZERS,
    Scratch,
    built_budget_gap,
    scratch_model,
)
from recommendations.training_launch import training_launch

ROOT = Path(__file__).resolve().parents[2]
ZERO_7_5B = json.loads((ROOT / "fixtures" / "workloads" / "train-zero3-dp64-7.5b.json").read_text())
#: One architecture per model type the mapping writes, with what varies inside it (GQA, head_dim, ties, biases,
#: expert width): the model type the config names.
ARCHITECTURES: dict[str, tuple[str, dict[str, Any]]] = {
    "zero-7.5b": ("gpt_neox", ZERO_7_5B["model"]["architecture"]),
    "llama-gqa-bias": (
        "llama",
        {
            "num_layers": 4,
            "hidden_size": 1024,
            "num_attention_heads": 16,
            "num_key_value_heads": 4,
            "intermediate_size": 2816,
            "vocab_size": 32000,
            "attention_bias": True,
        },
    ),
    "llama-tied-wide-heads": (
        "llama",
        {
            "num_layers": 2,
            "hidden_size": 512,
            "num_attention_heads": 8,
            "num_key_value_heads": 2,
            "head_dim": 128,
            "intermediate_size": 1536,
            "vocab_size": 50304,
            "tie_word_embeddings": True,
        },
    ),
    "mixtral": (
        "mixtral",
        {
            "num_layers": 2,
            "hidden_size": 512,
            "num_attention_heads": 8,
            "num_key_value_heads": 2,
            "intermediate_size": 1792,
            "vocab_size": 32000,
            "num_experts": 8,
        },
    ),
    "moe-narrow-experts": (
        "mixtral",
        {
            "num_layers": 2,
            "hidden_size": 512,
            "num_attention_heads": 8,
            "num_key_value_heads": 4,
            "intermediate_size": 3072,
            "moe_intermediate_size": 256,
            "vocab_size": 151936,
            "num_experts": 16,
            "experts_per_token": 4,
        },
    ),
}
TRAINING: dict[str, Any] = {
    "task": "training",
    "inference": None,
    "training": {"micro_batch_size": 2, "sequence_length": 1024},
}
SERVING: dict[str, Any] = {"inference": {"engine": "vllm", "max_input_tokens": 3072, "max_output_tokens": 1024,
                         "concurrent_sessions": 8}}  # fmt: skip
SETTINGS = {"tensor_parallel_size": 1, "pipeline_parallel_size": 1, "replicas": 1, "max_model_len": 4096,
            "max_num_seqs": 8, "max_num_batched_tokens": 4096, "gpu_memory_utilization": 0.9,
            "cuda_graph_max_bs": 8, "kv_block_tokens": 1}  # fmt: skip


def _workload(architecture: dict[str, Any], task: dict[str, Any]) -> Workload:
    return Workload.model_validate({"model": {"architecture": architecture}, **task})


def _configured(config: dict[str, Any], task: dict[str, Any]) -> Workload:
    return Workload.model_validate({"model": {"hf_config": config}, **task})


FULL_RECOMPUTE = {**TRAINING, "training": {**TRAINING["training"], "activation_checkpointing": "full"}}


@pytest.mark.parametrize("name", ARCHITECTURES)
@pytest.mark.parametrize("task", [TRAINING, FULL_RECOMPUTE, SERVING], ids=["training", "recomputed", "serving"])
def test_the_written_config_budgets_as_the_architecture(name: str, task: dict[str, Any]) -> None:
    """The engine's reading of the config.json counts the architecture's parameters, and budgets what it budgets
    but where the model type's own layers keep more: Llama's are the architecture's, component for component; a
    recomputed GPT-NeoX or Mixtral layer keeps its input only; a server holds a rotary table for the config's
    positions (which an architecture leaves unsaid), under 0.1 % of the total. The rest is the launch's note."""
    model_type, architecture = ARCHITECTURES[name]
    workload = _workload(architecture, task)
    scratch = scratch_model(workload, 4096)
    assert isinstance(scratch, Scratch)
    assert scratch.config["model_type"] == model_type
    built = _configured(scratch.config, task)
    assert parameter_count(built.spec) == parameter_count(workload.spec)
    mine, theirs = estimate(workload).per_device, estimate(built).per_device
    if task is TRAINING and model_type != "llama":
        gap = theirs.total_bytes - mine.total_bytes
        assert built_budget_gap(workload, scratch, Plan(1, 1, 1)) == gap > 0
        return
    for component in mine.components:
        other = theirs.component(component.name)
        if task is SERVING or model_type == "mixtral":  # a server's rotary table; Mixtral's fp32 router (4 KiB)
            assert abs(other.bytes - component.bytes) <= 0.001 * mine.total_bytes, component.name
        else:
            assert other.bytes == component.bytes, component.name


def test_a_launch_that_trains_a_model_budgeted_above_the_architecture_says_by_how_much() -> None:
    """GPT-NeoX in transformers keeps its fused qkv output and concatenated rotary halves (the engine's gpt_neox
    features): without recomputation the run holds more than the architecture's budget, and the launch says how
    much more and how to budget it; with full recomputation it holds the same, and says nothing."""
    workload = _workload(ARCHITECTURES["zero-7.5b"][1], TRAINING)
    kept = training_launch(workload, {}, Plan(1, 1, 1))
    assert kept is not None
    (note,) = [note for note in kept.notes if "model transformers builds budgets" in note]
    assert re.search(r"budgets \d+\.\d\d GiB per device more on this plan", note)
    assert "model/config.json as model.hf_config" in note
    recomputed = training_launch(_workload(ARCHITECTURES["zero-7.5b"][1], FULL_RECOMPUTE), {}, Plan(1, 1, 1))
    assert recomputed is not None
    assert not any("model transformers builds budgets" in note for note in recomputed.notes)


def test_the_zero_papers_7_5b_is_gpt_neox_with_sequential_residuals_and_its_declared_count_is_named() -> None:
    workload = Workload.model_validate(ZERO_7_5B)
    scratch = scratch_model(workload, 1024)
    assert isinstance(scratch, Scratch)
    assert scratch.config | {"use_parallel_residual": False, "rotary_pct": 1.0} == scratch.config
    assert scratch.parameters == 7_761_574_912 and scratch.tokenizer == "openai-community/gpt2"
    assert any("7,500,000,000 parameters" in note and "3.5% more" in note for note in scratch.notes(tokenizer=True))


@pytest.mark.parametrize(
    "change,reason",
    [
        ({"mlp": "standard", "norm": "rms"}, "a standard MLP with rms norms"),
        ({"norm": "layer"}, "a gated MLP with layer norms"),
        ({"num_experts": 8, "attention_bias": True}, "Mixtral, the model type with these experts, has no biases"),
        ({"mlp": "standard", "norm": "layer", "num_key_value_heads": 4}, "one KV head per query head"),
        ({"mlp": "standard", "norm": "layer", "attention_bias": False}, "biases everywhere"),
        ({"vocab_size": 300}, "vocab_size 300: no tokenizer"),
    ],
)
def test_an_architecture_no_model_type_builds_has_no_launch_and_says_why(change: dict[str, Any], reason: str) -> None:
    _, architecture = ARCHITECTURES["llama-gqa-bias"]
    workload = _workload({**architecture, **change}, SERVING)
    found = scratch_model(workload, 4096)
    assert isinstance(found, str) and reason in found
    assert vllm_launch(workload, SETTINGS) is None
    why = no_serving_launch(workload, SETTINGS, None)
    assert why is not None and why.startswith("the workload names no checkpoint to load, and vramplan cannot build")


def test_the_smallest_vocabulary_gets_the_byte_tokenizer() -> None:
    workload = _workload({**ARCHITECTURES["mixtral"][1], "vocab_size": 384}, SERVING)
    scratch = scratch_model(workload, 4096)
    assert isinstance(scratch, Scratch) and scratch.tokenizer == "google/byt5-small"


@pytest.mark.parametrize(
    "engine,launch,read_back,model_flag",
    [("vllm", vllm_launch, workload_from_vllm, None), ("sglang", sglang_launch, workload_from_sglang, "--model-path")],
)
def test_a_server_of_an_architecture_loads_random_weights_of_the_written_config(
    engine: str, launch: Any, read_back: Any, model_flag: str | None
) -> None:
    """The server loads ``model/`` (the launch's config.json, its positions the context length) with the dummy load
    format and a tokenizer from elsewhere; the command passes the release's check and reads back to the workload."""
    workload = _workload(ARCHITECTURES["llama-gqa-bias"][1], {"inference": {**SERVING["inference"], "engine": engine}})
    found = launch(workload, SETTINGS)
    assert found is not None
    args = dict(zip(found.argv, found.argv[1:], strict=False))  # each item and the one after it
    assert (args[model_flag] if model_flag else found.argv[2]) == SCRATCH_DIR
    assert args["--load-format"] == "dummy"
    assert args["--tokenizer" if engine == "vllm" else "--tokenizer-path"] == "google/byt5-small"
    files = dict(found.files)
    assert json.loads(files[f"{SCRATCH_DIR}/config.json"])["max_position_embeddings"] == SETTINGS["max_model_len"]
    assert engine_flags(engine, found.checked_against.split()[1]).problems(found.argv) == []
    served, _ = read_back(found.argv, workload)
    assert served.model == workload.model


def test_a_config_json_without_a_repository_is_served_as_given() -> None:
    """A hf_config whose ``_name_or_path`` is no repository is the model directory's config itself (without the
    name); one that names no ``architectures`` cannot be served (the model class is read from them)."""
    config = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 256,
              "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "vocab_size": 151936, "max_position_embeddings": 32768, "_name_or_path": "/local/checkpoint"}  # fmt: skip
    workload = _configured(config, SERVING)
    found = vllm_launch(workload, SETTINGS)
    assert found is not None and found.argv[2] == SCRATCH_DIR
    written = json.loads(dict(found.files)[f"{SCRATCH_DIR}/config.json"])
    assert written == {key: value for key, value in config.items() if key != "_name_or_path"}
    unnamed = _configured({**config, "architectures": []}, SERVING)
    assert vllm_launch(unnamed, SETTINGS) is None
    assert "names no architectures" in (no_serving_launch(unnamed, SETTINGS, None) or "")


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_transformers_builds_the_parameters_vramplan_counts(name: str, tmp_path: Path) -> None:
    """The launch's ``init_model.py``, run by transformers on the CPU for the config.json it is given (the ZeRO
    paper's 7.5B on the meta device, its weights too large to write here), builds exactly the parameters the
    engine counts for the architecture."""
    transformers = pytest.importorskip("transformers")  # the bench extra
    assert len(transformers.ByT5Tokenizer()) == {name: size for size, name in SCRATCH_TOKENIZERS}["google/byt5-small"]
    workload = _workload(ARCHITECTURES[name][1], TRAINING)
    scratch = scratch_model(workload, 1024)
    assert isinstance(scratch, Scratch)
    counted = parameter_count(workload.spec).total
    if counted > 10**9:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM

        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**scratch.config))
        assert sum(p.numel() for p in model.parameters()) == counted
        return
    directory = tmp_path / SCRATCH_DIR
    directory.mkdir()
    path, content = scratch.config_file
    (tmp_path / path).write_text(content)
    (tmp_path / INIT_SCRIPT).write_text(INIT_SCRIPT_TEXT)
    run = subprocess.run(
        [sys.executable, INIT_SCRIPT, SCRATCH_DIR, "float32"], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr
    assert int(run.stdout.split()[-1]) == counted
    assert (directory / "model.safetensors").exists()


def _write(files: tuple[tuple[str, str], ...], where: Path) -> None:
    for path, content in files:
        (where / path).parent.mkdir(parents=True, exist_ok=True)
        (where / path).write_text(content)


def test_an_architectures_generate_launch_runs_its_notes_init_then_its_script_on_cpu(tmp_path: Path) -> None:
    """The transformers generate launch of an architecture on the CPU, as generated: the init command its note
    names writes the random weights, then the script loads them from ``model/`` and generates the forced length."""
    transformers = pytest.importorskip("transformers")  # the bench extra
    if transformers.__version__ != TRANSFORMERS_RELEASE:
        pytest.skip(f"transformers {transformers.__version__} installed, not {TRANSFORMERS_RELEASE}")
    architecture = {**ARCHITECTURES["llama-gqa-bias"][1], "num_layers": 2, "hidden_size": 128, "vocab_size": 1000}
    inference = {"engine": "transformers", "max_input_tokens": 8, "max_output_tokens": 4, "concurrent_sessions": 2}
    workload = _workload(architecture, {"inference": inference, "runtime": {"device": "cpu"}})
    launch = transformers_launch(workload, {}, Plan(1, 1, 1))
    assert launch is not None and launch.argv == ("python", GENERATE_SCRIPT)
    _write(launch.files, tmp_path)
    (init,) = [note.split(": ", 1)[1] for note in launch.notes if note.startswith("before the command")]
    assert init == f"python {INIT_SCRIPT} {SCRATCH_DIR} bfloat16"  # no tokenizer: the prompts are random ids
    for argv in (init.split(), list(launch.argv)):
        run = subprocess.run([sys.executable, *argv[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-3000:]
    assert re.search(r"rank 0: peak resident set [1-9]\d* B", run.stdout), run.stdout


def test_quantized_weights_with_no_checkpoint_launch_only_where_the_run_quantizes_as_it_loads() -> None:
    """An architecture's config.json names no quantization method: int4 weights have no server launch (the random
    weights would load in bf16), FP8 has (``--quantization fp8``), and a QLoRA run quantizes its base as it loads."""
    architecture = ARCHITECTURES["llama-gqa-bias"][1]
    int4 = _workload(architecture, {**SERVING, "precision": {"weights": "int4", "compute": "bf16"}})
    assert vllm_launch(int4, SETTINGS) is None
    assert "int4 weights: the config.json built from the workload's numbers names no quantization method" in (
        no_serving_launch(int4, SETTINGS, None) or ""
    )
    fp8 = vllm_launch(
        _workload(architecture, {**SERVING, "precision": {"weights": "fp8", "compute": "bf16"}}), SETTINGS
    )
    assert fp8 is not None and "--quantization" in fp8.argv and "dummy" in fp8.argv
    qlora = _workload(
        architecture,
        {**TRAINING, "precision": {"weights": "nf4", "compute": "bf16"}, "training": {**TRAINING["training"],
         "method": "qlora"}},
    )  # fmt: skip
    launch = training_launch(qlora, {}, Plan(1, 1, 1))
    assert launch is not None and "--load_in_4bit" in launch.argv and "model" in launch.argv


def test_a_quantized_config_without_a_repository_is_served_with_its_method_but_never_built_as_float() -> None:
    """A repository-less config.json with a quantization_config: the servers' dummy loader builds its quantized
    random weights; init_model.py, which builds float weights, has no launch for it."""
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 512,
              "intermediate_size": 1536, "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
              "vocab_size": 32000, "max_position_embeddings": 8192,
              "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True,
                                      "version": "gemm"}}  # fmt: skip
    precision = {"precision": {"weights": "int4", "compute": "fp16"}}
    served = vllm_launch(_configured(config, {**SERVING, **precision}), SETTINGS)
    assert served is not None and "dummy" in served.argv
    assert json.loads(dict(served.files)[f"{SCRATCH_DIR}/config.json"])["quantization_config"]["quant_method"] == "awq"
    generate = {"inference": {**SERVING["inference"], "engine": "transformers"}, **precision}
    assert transformers_launch(_configured(config, generate), {}, Plan(1, 1, 1)) is None
    why = no_serving_launch(_configured(config, generate), {}, Plan(1, 1, 1))
    assert why is not None and "init_model.py builds float weights" in why
