"""transformers generate launches (``recommendations.launch_transformers``): a transformers workload's runnable
entries carry ``python generate_transformers.py`` (torchrun for a parallel plan) and a script that loads the
checkpoint and generates the budgeted batch, every keyword of it read by transformers 5.24.0 (extracted from PyPI's
wheel), or the reason transformers cannot run the plan."""

from __future__ import annotations

import ast
import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.recommend_speed import fixture_views
from budgets.engine import Workload
from recommendations import launch as launch_module
from recommendations.launch import LaunchError, launch_for
from recommendations.launch_transformers import (
    GENERATE_CALLS,
    GENERATE_SCRIPT,
    TRANSFORMERS_RELEASE,
    generate_release,
    no_transformers_launch,
    transformers_launch,
)
from recommendations.plans import Plan
from recommendations.recommend import recommend
from recommendations.verdicts import Verdict

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "fixtures" / "workloads" / "transformers-qwen2.5-7b-dynamic.json"
FIXTURE = ROOT / "fixtures" / "engines" / f"transformers-{TRANSFORMERS_RELEASE}.json"


def _workload(**sections: dict[str, Any]) -> Workload:
    data = json.loads(EXAMPLE.read_text())
    for name, fields in sections.items():
        data[name] = {**data.get(name, {}), **fields}
    return Workload.model_validate(data)


def _script(launch: launch_module.Launch) -> ast.Module:
    files = dict(launch.files)
    assert set(files) == {GENERATE_SCRIPT}
    return ast.parse(files[GENERATE_SCRIPT])


def _calls(tree: ast.Module) -> dict[str, dict[str, ast.expr]]:
    """The script's calls of ``GENERATE_CALLS`` and ``model.generate``, by name, with their keywords."""
    found: dict[str, dict[str, ast.expr]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) in (*GENERATE_CALLS, "model.generate"):
            found[ast.unparse(node.func)] = {kw.arg: kw.value for kw in node.keywords if kw.arg is not None}
    return found


def _constants(tree: ast.Module) -> dict[str, Any]:
    return {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant)
    }


def _launch(workload: Workload, plan: Plan) -> launch_module.Launch:
    launch = transformers_launch(workload, {}, plan)
    assert launch is not None, no_transformers_launch(workload, {}, plan)
    return launch


def test_the_fixture_keeps_its_keys_and_adds_the_generate_definitions() -> None:
    """The regenerated fixture (extract_trl.py over the sha256-pinned wheel) holds what the script is checked against:
    from_pretrained's keywords, GenerationConfig's attributes, the allowed cache implementations, DistributedConfig's
    fields and the model types with tensor and pipeline plans."""
    data = json.loads(FIXTURE.read_text())
    assert data["source"]["sha256"] == "ff5ebedf9359f94bb63772b6380eba6e7104d010cbbb2cb82c788817ea7486f6"
    assert {"dataclasses", "enums", "attention_implementations"} <= data.keys()  # what the training launch reads
    release = generate_release(TRANSFORMERS_RELEASE)
    assert {"dtype", "device_map", "attn_implementation", "distributed_config", "quantization_config"} <= (
        release.keywords["from_pretrained"]
    )
    assert {"max_new_tokens", "min_new_tokens", "do_sample", "cache_implementation", "disable_compile"} <= (
        release.keywords["generation_config"]
    )
    assert {"tp_plan", "tp_size", "pp_size"} <= release.keywords["distributed_config"]
    assert {"static", "dynamic", "paged"} <= set(release.cache_implementations)
    assert {"qwen2", "llama"} <= release.tp_model_types & release.pp_model_types


def test_the_example_script_generates_the_workload_on_one_device() -> None:
    workload = _workload()
    launch = _launch(workload, Plan(1, 1, 1))
    assert launch.argv == ("python", GENERATE_SCRIPT)
    assert launch.checked_against == f"transformers {TRANSFORMERS_RELEASE}" and launch.servers == 1
    tree = _script(launch)
    calls, constants = _calls(tree), _constants(tree)
    inference = workload.inference
    assert inference is not None
    assert constants == {
        "SESSIONS": inference.concurrent_sessions,
        "INPUT_TOKENS": inference.max_input_tokens,
        "OUTPUT_TOKENS": inference.max_output_tokens,
    }
    loading = calls["AutoModelForCausalLM.from_pretrained"]
    assert ast.unparse(loading["dtype"]) == "torch.bfloat16"
    assert ast.literal_eval(loading["device_map"]) == "cuda" and "distributed_config" not in loading
    assert ast.literal_eval(loading["attn_implementation"]) == "sdpa"
    generation = {name: ast.unparse(value) for name, value in calls["GenerationConfig"].items()}
    assert generation["max_new_tokens"] == generation["min_new_tokens"] == "OUTPUT_TOKENS"
    assert generation["do_sample"] == "False" and generation["disable_compile"] == "True"
    assert "cache_implementation" not in generation  # dynamic: generate's default DynamicCache
    source = ast.unparse(tree)
    assert "'Qwen/Qwen2.5-7B'" in source
    assert "torch.randint(0, vocab, (SESSIONS, INPUT_TOKENS)" in source and "torch.manual_seed(0)" in source
    assert "torch.cuda.max_memory_allocated()" in source and "torch.cuda.max_memory_reserved()" in source
    assert "torch.compile" not in source


def test_every_keyword_the_scripts_pass_is_in_the_fixture() -> None:
    release = generate_release(TRANSFORMERS_RELEASE)
    workloads = [
        _workload(),
        _workload(inference={"kv_cache_layout": "contiguous"}, runtime={"attention": "flash", "compile": True}),
        _workload(runtime={"attention": "eager", "compile": True}),
    ]
    for workload in workloads:
        for plan in (Plan(1, 1, 1), Plan(2, 1, 1), Plan(1, 2, 2), Plan(4, 2, 1)):
            calls = _calls(_script(_launch(workload, plan)))
            for name, list_name in GENERATE_CALLS.items():
                assert set(calls.get(name, {})) <= release.keywords[list_name], (name, plan)
            cache = calls["GenerationConfig"].get("cache_implementation")
            if cache is not None:
                assert ast.literal_eval(cache) in release.cache_implementations
            assert ast.literal_eval(calls["AutoModelForCausalLM.from_pretrained"]["attn_implementation"]) in (
                release.attention
            )


def test_layouts_attention_and_compile_reach_the_script() -> None:
    static = _calls(_script(_launch(_workload(inference={"kv_cache_layout": "contiguous"}), Plan(1, 1, 1))))
    assert ast.literal_eval(static["GenerationConfig"]["cache_implementation"]) == "static"
    assert (
        ast.literal_eval(static["GenerationConfig"]["disable_compile"]) is True
    )  # no auto-compile of the static cache
    compiled = _launch(_workload(inference={"kv_cache_layout": "contiguous"}, runtime={"compile": True}), Plan(1, 1, 1))
    calls = _calls(_script(compiled))
    assert ast.literal_eval(calls["GenerationConfig"]["disable_compile"]) is False  # generate compiles it
    assert "torch.compile" not in dict(compiled.files)[GENERATE_SCRIPT]
    dynamic = dict(_launch(_workload(runtime={"compile": True}), Plan(1, 1, 1)).files)[GENERATE_SCRIPT]
    assert "model.forward = torch.compile(model.forward, dynamic=True)" in dynamic
    flash = _launch(_workload(runtime={"attention": "flash"}), Plan(1, 1, 1))
    loading = _calls(_script(flash))["AutoModelForCausalLM.from_pretrained"]
    assert ast.literal_eval(loading["attn_implementation"]) == "flash_attention_2"
    assert any("flash-attn" in note for note in flash.notes)
    fp16 = _calls(_script(_launch(_workload(precision={"weights": "fp16"}), Plan(1, 1, 1))))
    assert ast.unparse(fp16["AutoModelForCausalLM.from_pretrained"]["dtype"]) == "torch.float16"


def test_quantized_weights_and_a_smaller_kv_cache_are_noted() -> None:
    launch = _launch(_workload(precision={"weights": "int4", "compute": "bf16"}), Plan(1, 1, 1))
    assert any("quantization config" in note for note in launch.notes)
    fp8_kv = _launch(_workload(precision={"weights": "bf16", "kv_cache": "fp8"}), Plan(1, 1, 1))
    assert any("fp8 KV cache" in note and "more than the budget's" in note for note in fp8_kv.notes)


def test_tensor_and_pipeline_plans_run_under_torchrun_with_a_distributed_config() -> None:
    workload = _workload()
    launch = _launch(workload, Plan(2, 2, 1))
    assert launch.argv == ("torchrun", "--nproc-per-node", "4", GENERATE_SCRIPT)
    loading = _calls(_script(launch))["AutoModelForCausalLM.from_pretrained"]
    assert "device_map" not in loading  # exclusive with tensor parallelism (distributed/mixin.py:182-183)
    assert ast.unparse(loading["distributed_config"]) == "DistributedConfig(tp_plan='auto', tp_size=2, pp_size=2)"
    assert any("broadcast_from_last" in note for note in launch.notes)
    pipeline = _calls(_script(_launch(workload, Plan(1, 2, 1))))["AutoModelForCausalLM.from_pretrained"]
    assert ast.unparse(pipeline["distributed_config"]) == "DistributedConfig(pp_size=2)"


def test_replicas_are_separate_processes_each_with_its_share_of_the_sessions() -> None:
    workload = _workload(inference={"concurrent_sessions": 5})
    launch = _launch(workload, Plan(1, 1, 2))
    assert launch.servers == 2
    assert launch.argv == ("env", "CUDA_VISIBLE_DEVICES=0", "python", GENERATE_SCRIPT)
    assert _constants(_script(launch))["SESSIONS"] == 3  # ceil(5 / 2), as plan_workload budgets a replica
    assert any("run 2 such processes" in note for note in launch.notes)
    parallel = _launch(workload, Plan(2, 1, 2))
    assert parallel.argv == (
        "env", "CUDA_VISIBLE_DEVICES=0,1", "torchrun", "--nproc-per-node", "2", "--master-port", "29500",
        GENERATE_SCRIPT,
    )  # fmt: skip


def test_plans_transformers_cannot_run_get_a_reason() -> None:
    workload = _workload()
    # Qwen2.5-7B: 28 attention heads, 4 KV heads; transformers splits, never replicates, KV heads
    assert transformers_launch(workload, {}, Plan(8, 1, 1)) is None
    assert "KV heads" in (no_transformers_launch(workload, {}, Plan(8, 1, 1)) or "")
    paged = _workload(inference={"kv_cache_layout": "paged"})
    assert "continuous batching" in (no_transformers_launch(paged, {}, Plan(1, 1, 1)) or "")
    old = _workload(runtime={"engine_version": "4.46.0"})
    assert "4.x" in (no_transformers_launch(old, {}, Plan(1, 1, 1)) or "")
    assert no_transformers_launch(workload, {}, None) == "the entry names no plan"
    assert no_transformers_launch(workload, {}, Plan(1, 1, 1)) is None
    # the plan its settings name, where they name one (vllm_settings' keys)
    named = {"tensor_parallel_size": 2, "pipeline_parallel_size": 1, "replicas": 2}
    found = transformers_launch(workload, named)
    assert found is not None and found.servers == 2 and "--nproc-per-node" in found.argv


def test_a_keyword_the_release_does_not_read_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    from recommendations import launch_transformers

    real = launch_transformers._script

    def misspelt(*args: Any) -> str:
        return real(*args).replace("min_new_tokens=", "min_new_token=")

    monkeypatch.setattr(launch_transformers, "_script", misspelt)
    with pytest.raises(LaunchError, match=r"GenerationConfig\(min_new_token=…\): not read by transformers 5.24.0"):
        transformers_launch(_workload(), {}, Plan(1, 1, 1))
    monkeypatch.setattr(launch_transformers, "_script", lambda *a: real(*a).replace("device_map=", "devices_map="))
    with pytest.raises(LaunchError, match=r"from_pretrained\(devices_map=…\)"):
        transformers_launch(_workload(), {}, Plan(1, 1, 1))
    monkeypatch.setattr(launch_transformers, "_script", lambda *a: real(*a).replace("pp_size=", "pipeline_size="))
    with pytest.raises(LaunchError, match=r"DistributedConfig\(pipeline_size=…\)"):
        transformers_launch(_workload(), {}, Plan(1, 2, 1))
    release = generate_release(TRANSFORMERS_RELEASE)
    script = real(_workload(), "Qwen/Qwen2.5-7B", Plan(1, 1, 1), 4)
    bad_cache = script.replace("use_cache=True,", 'use_cache=True,\n    cache_implementation="staic",')
    assert release.problems(("python", GENERATE_SCRIPT), ((GENERATE_SCRIPT, bad_cache),)) == [
        "GenerationConfig(cache_implementation='staic'): not one of " + ", ".join(release.cache_implementations)
    ]
    assert release.problems(("python", "other.py"), ((GENERATE_SCRIPT, script),))


def test_every_fitting_entry_of_the_example_carries_a_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over the catalog, each ``fits`` entry of the example workload gets a launch for its plan (or a reason), and
    through the serving registry (as ``launch.SERVING_LAUNCHES`` will name it) the entry itself carries it."""
    workload = _workload()
    entries = recommend(workload, fixture_views())
    fitting = [entry for entry in entries if entry.verdict == Verdict.FITS]
    assert fitting
    inference = workload.inference
    assert inference is not None
    for entry in fitting:
        assert entry.plan is not None
        launch = transformers_launch(workload, entry.suggested_settings, entry.plan)
        if launch is None:
            assert no_transformers_launch(workload, entry.suggested_settings, entry.plan), entry.plan
            continue
        assert launch.servers == entry.plan.replicas
        sessions = math.ceil(inference.concurrent_sessions / entry.plan.replicas)
        assert _constants(_script(launch))["SESSIONS"] == sessions
    # the entries carry it: the serving registry passes the entry's plan
    assert launch_for(workload, {}, Plan(1, 1, 1)) == transformers_launch(workload, {}, Plan(1, 1, 1))
    carried = [entry for entry in recommend(workload, fixture_views(), top=5) if entry.verdict == Verdict.FITS]
    assert carried and all(entry.launch is not None for entry in carried)


def test_the_script_runs_on_cpu_with_a_tiny_random_model(tmp_path: Path) -> None:
    """The script of a ``runtime.device: cpu`` workload, as generated but pointed at a tiny random Qwen2, loads and
    generates the forced length with both caches and prints its peak resident set: from_pretrained and
    GenerationConfig take its keywords at the installed release. The CUDA script differs only in its device map, its
    synchronize and its counters."""
    transformers = pytest.importorskip("transformers")
    if transformers.__version__ != TRANSFORMERS_RELEASE:
        pytest.skip(f"transformers {transformers.__version__} installed, not {TRANSFORMERS_RELEASE}")
    config = transformers.Qwen2Config(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, eos_token_id=1,
    )  # fmt: skip
    transformers.Qwen2ForCausalLM(config).save_pretrained(tmp_path / "tiny")
    for layout in ("dynamic", "contiguous"):
        workload = _workload(
            inference={
                "kv_cache_layout": layout,
                "max_input_tokens": 8,
                "max_output_tokens": 4,
                "concurrent_sessions": 2,
            },
            runtime={"device": "cpu"},
        )
        script = dict(_launch(workload, Plan(1, 1, 1)).files)[GENERATE_SCRIPT]
        assert "cuda" not in script.replace("CUDA", "")
        cuda = dict(_launch(_workload(inference={"kv_cache_layout": layout}), Plan(1, 1, 1)).files)[GENERATE_SCRIPT]
        assert 'device_map="cuda"' in cuda and "torch.cuda.max_memory_reserved()" in cuda
        path = tmp_path / f"{layout}.py"
        path.write_text(script.replace('"Qwen/Qwen2.5-7B"', repr(str(tmp_path / "tiny"))))
        run = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, check=False)
        assert run.returncode == 0, run.stderr[-3000:]
        assert re.search(r"rank 0: peak resident set [1-9]\d* B", run.stdout), run.stdout
