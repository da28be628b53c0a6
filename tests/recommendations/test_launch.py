"""Launch commands (``recommendations.launch``): every runnable vLLM or SGLang recommendation carries its server's
command (``vllm serve …``, ``python -m sglang.launch_server …``) that passes the flags of the pinned release
(extracted from its PyPI sdist), and the command read back reproduces the budget the recommendation judged."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import json
import re
from pathlib import Path

import pytest

from benchmarks.recommend_speed import fixture_views
from budgets.engine import Workload, estimate
from budgets.engine import sglang as sglang_rules
from budgets.engine import vllm as vllm_rules
from recommendations.launch import (
    SGLANG_FLAGS_RELEASE,
    VLLM_FLAGS_RELEASE,
    engine_flags,
    launch_for,
    sglang_launch,
    vllm_launch,
    workload_from_sglang,
    workload_from_vllm,
)
from recommendations.plans import plan_workload
from recommendations.recommend import recommend
from recommendations.verdicts import Verdict

ROOT = Path(__file__).resolve().parents[2]
RELEASES = {"vllm": VLLM_FLAGS_RELEASE, "sglang": SGLANG_FLAGS_RELEASE}
READ_BACK = {"vllm": workload_from_vllm, "sglang": workload_from_sglang}


def _examples(engine: str) -> list[Path]:
    return [
        path
        for path in sorted((ROOT / "fixtures" / "workloads").glob("*.json"))
        if (json.loads(path.read_text()).get("inference") or {}).get("engine") == engine
    ]


VLLM_EXAMPLES = _examples("vllm")
SGLANG_EXAMPLES = _examples("sglang")
EXAMPLES = [pytest.param(engine, path, id=path.stem) for engine in RELEASES for path in _examples(engine)]
RUNNABLE = (Verdict.FITS, Verdict.TIGHT)
#: Settings of an SGLang plan, as ``recommendations.settings.sglang_settings`` gives them.
SGLANG_SETTINGS = {"tensor_parallel_size": 1, "pipeline_parallel_size": 1, "replicas": 1, "max_model_len": 4096,
                   "max_num_seqs": 64, "max_num_batched_tokens": 8192, "gpu_memory_utilization": 0.83,
                   "cuda_graph_max_bs": 256, "kv_block_tokens": 1}  # fmt: skip


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


def test_the_sglang_flags_are_the_profiles_release_read_from_its_sdist() -> None:
    flags = engine_flags("sglang", SGLANG_FLAGS_RELEASE)
    assert flags.release == sglang_rules.SGLANG_VERSION == "0.5.10.post1"
    assert flags.source["sha256"] == "01f7adfe7cde85b238fb0e1bae4b31d494e19d1471cf35ff3c5489a02f9d2263"
    assert flags.command == ("python", "-m", "sglang.launch_server") and flags.model_flag == "--model-path"
    assert {"--tp-size", "--tensor-parallel-size", "--dp-size", "--pp-size", "--context-length",
            "--mem-fraction-static", "--max-running-requests", "--chunked-prefill-size", "--cuda-graph-max-bs",
            "--page-size", "--enable-dp-attention"} <= flags.flags  # fmt: skip
    assert "--hybrid-kvcache-ratio" not in flags.flags  # a DeprecatedAction: accepted, then ignored
    assert flags.choices["--kv-cache-dtype"] == ("auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16", "fp4_e2m1")
    assert "fp8" in flags.choices["--quantization"] and "bfloat16" in flags.choices["--dtype"]


def test_the_sglang_extractor_reads_aliases_switches_the_model_flag_and_written_choices() -> None:
    """``tools/engine_args/extract_sglang.py`` on a small ``add_cli_args``: what the fixture was made by."""
    spec = importlib.util.spec_from_file_location("extract_sglang", ROOT / "tools/engine_args/extract_sglang.py")
    assert spec is not None and spec.loader is not None
    extractor = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(extractor)
    source = """
KINDS = ["a", "b"]
MORE = [*KINDS, "c"]
class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--model-path", "--model", type=str, required=True)
        parser.add_argument("--tp-size", "--tensor-parallel-size", type=int)
        parser.add_argument("--kind", choices=MORE)
        parser.add_argument("--size", choices=[16, 32])
        parser.add_argument("--parser", choices=list(REGISTRY.keys()))
        parser.add_argument("--fast", action=argparse.BooleanOptionalAction)
        parser.add_argument("--old", action=DeprecatedAction)
"""
    flags = "--fast --kind --model --model-path --no-fast --parser --size --tensor-parallel-size --tp-size"
    assert extractor.read_flags(ast.parse(source)) == {
        "model_flag": "--model-path",
        "flags": flags.split(),
        "choices": {"--kind": ["a", "b", "c"], "--size": ["16", "32"]},
        "choices_unread": ["--parser"],
        "switches": ["--fast", "--no-fast"],
    }


@pytest.mark.parametrize("engine,path", EXAMPLES)
def test_every_runnable_entry_has_a_launch_the_release_accepts(engine: str, path: Path) -> None:
    _, _, entries = _runnable(path)
    assert entries, "no fitting configuration: nothing was checked"
    flags = engine_flags(engine, RELEASES[engine])
    for entry in entries:
        assert entry.launch is not None, entry.configuration["slug"]
        assert entry.launch.engine == engine and entry.launch.checked_against == f"{engine} {RELEASES[engine]}"
        assert entry.launch.argv[: len(flags.command)] == flags.command
        assert flags.problems(entry.launch.argv) == []
        assert entry.as_dict()["launch"]["text"] == entry.launch.text


@pytest.mark.parametrize("engine,path", EXAMPLES)
def test_the_command_read_back_reproduces_the_budget(engine: str, path: Path) -> None:
    workload, views, entries = _runnable(path)
    for entry in entries:
        assert entry.launch is not None and entry.plan is not None and entry.budget is not None
        # a multi-node configuration runs ``servers`` identical servers, each with its share of the sessions
        servers = entry.launch.servers
        share = workload
        if servers > 1:
            assert workload.inference is not None
            sessions = -(-workload.inference.concurrent_sessions // servers)
            share = workload.model_copy(
                update={"inference": workload.inference.model_copy(update={"concurrent_sessions": sessions})}
            )
        served, plan = READ_BACK[engine](entry.launch.argv, share)
        if servers == 1:
            assert plan == entry.plan
        else:  # the servers hold every replica (the first ones one more where they do not divide evenly)
            assert dataclasses.replace(plan, replicas=entry.plan.replicas) == entry.plan
            assert plan.replicas * servers >= entry.plan.replicas > (plan.replicas - 1) * servers
        view = views[entry.configuration["slug"]]
        again = estimate(
            plan_workload(served, plan), entry.usable_bytes, view.accelerator_name, view.compute_capability
        )
        assert again.per_device == entry.budget.per_device, entry.configuration["slug"]
        assert again.serving is not None and entry.budget.serving is not None
        assert again.serving.kv_pool_bytes == entry.budget.serving.kv_pool_bytes
        assert again.serving.kv_pool_tokens == entry.budget.serving.kv_pool_tokens
        assert again.serving.max_num_seqs == entry.budget.serving.max_num_seqs
        assert again.serving.max_concurrent_sessions_at_max_request == (
            entry.budget.serving.max_concurrent_sessions_at_max_request
        )


@pytest.mark.parametrize("path", SGLANG_EXAMPLES, ids=lambda p: p.stem)
def test_sglang_values_are_its_own_defaults_for_the_gpu_and_tensor_degree(path: Path) -> None:
    """On an H100 80GB (nvidia-smi: 81559 MiB) SGLang 0.5.10.post1 picks, for a workload that names none
    (server_args.py:1165-1228, 1281-1334): chunked prefill 8192 and CUDA-graph batch 256 (tensor < 4), and
    mem_fraction_static = round((81559 − reserved) / 81559, 3), reserved = 512 + 8192 × 1.5 + 256 × 2 + tp/8 × 1024
    + 58 piecewise CUDA-graph sizes up to 8192 × 8 = 13,904 MiB at TP1 (0.830), 14,032 at TP2 (0.828).
    The context is the workload's 6144 + 2048; the page size SGLang's default 1; the running requests SGLang's
    min(clamp(pool tokens / context × 512, 2048, 4096), pool tokens // 2), 4096 for a pool of ≥ 65,536 tokens."""
    _, _, entries = _runnable(path)
    expected = {1: "0.83", 2: "0.828"}
    checked = set()
    for entry in entries:
        if not entry.configuration["slug"].startswith("h100-sxm-80gb-") or entry.plan.tensor not in expected:
            continue
        args = dict(zip(entry.launch.argv[3::2], entry.launch.argv[4::2], strict=True))
        assert args["--mem-fraction-static"] == expected[entry.plan.tensor], entry.configuration["slug"]
        assert (args["--chunked-prefill-size"], args["--cuda-graph-max-bs"]) == ("8192", "256")
        assert (args["--context-length"], args["--page-size"]) == ("8192", "1")
        assert entry.budget.serving.kv_pool_tokens >= 65_536 and args["--max-running-requests"] == "4096"
        assert ("--dp-size" in args) == (entry.plan.replicas > 1) and "--enable-dp-attention" not in args
        checked.add(entry.plan.tensor)
    assert checked == set(expected)


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


def test_a_renamed_sglang_flag_a_refused_value_or_no_model_flag_is_a_problem() -> None:
    _, _, entries = _runnable(SGLANG_EXAMPLES[0])
    argv = list(entries[0].launch.argv)
    flags = engine_flags("sglang", SGLANG_FLAGS_RELEASE)
    renamed = [("--max-running-reqs" if arg == "--max-running-requests" else arg) for arg in argv]
    assert flags.problems(renamed) == ["--max-running-reqs: not a flag of sglang 0.5.10.post1"]
    at = argv.index("--kv-cache-dtype") + 1
    assert flags.problems([*argv[:at], "fp8", *argv[at + 1 :]]) == [
        "--kv-cache-dtype fp8: not one of auto, fp8_e5m2, fp8_e4m3, bf16, bfloat16, fp4_e2m1"
    ]
    assert flags.problems([*argv[:3], *argv[5:]]) == ["no model: sglang takes it as --model-path"]
    assert flags.problems(["vllm", "serve", *argv[3:]]) == [
        "the command is python -m sglang.launch_server, not vllm serve --model-path"
    ]


def test_sglang_fp8_weights_and_kv_cache_are_passed_and_read_back() -> None:
    workload = Workload.model_validate(json.loads(SGLANG_EXAMPLES[0].read_text()))
    fp8 = workload.model_copy(
        update={"precision": workload.precision.model_copy(update={"weights": "fp8", "kv_cache": "fp8"})}
    )
    launch = sglang_launch(fp8, SGLANG_SETTINGS)
    assert launch is not None
    args = dict(zip(launch.argv[3::2], launch.argv[4::2], strict=True))
    assert (args["--kv-cache-dtype"], args["--quantization"], args["--dtype"]) == ("fp8_e4m3", "fp8", "bfloat16")
    served, _ = workload_from_sglang(launch.argv, fp8)
    assert served.precision == fp8.precision
    fp16 = workload.model_copy(
        update={"precision": workload.precision.model_copy(update={"compute": "fp16", "kv_cache": "fp16"})}
    )
    launch = sglang_launch(fp16, SGLANG_SETTINGS)
    assert launch is not None and launch.argv[-4:] == ("--dtype", "float16", "--kv-cache-dtype", "auto")
    assert workload_from_sglang(launch.argv, fp16)[0].precision == fp16.precision


def test_an_sglang_context_beyond_the_models_says_what_sglang_needs_to_start() -> None:
    workload = Workload.model_validate(json.loads(SGLANG_EXAMPLES[0].read_text()))
    assert sglang_launch(workload, SGLANG_SETTINGS).notes == ()
    longest = workload.spec.max_position_embeddings
    notes = sglang_launch(workload, {**SGLANG_SETTINGS, "max_model_len": longest + 1}).notes
    assert len(notes) == 1 and "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1" in notes[0]
    assert sglang_launch(workload, {**SGLANG_SETTINGS, "max_model_len": longest}).notes == ()


def test_no_launch_without_a_checkpoint_or_for_another_engine() -> None:
    workload = Workload.model_validate(json.loads(VLLM_EXAMPLES[0].read_text()))
    settings = {"tensor_parallel_size": 1, "pipeline_parallel_size": 1, "replicas": 1, "max_model_len": 4096,
                "max_num_seqs": 8, "max_num_batched_tokens": 4096}  # fmt: skip
    assert vllm_launch(workload, settings) is not None
    assert launch_for(workload, settings) == vllm_launch(workload, settings)
    other = workload.model_copy(update={"inference": workload.inference.model_copy(update={"engine": "generic"})})
    assert vllm_launch(other, settings) is None
    generic = launch_for(other, settings)  # the generic engine's is vramplan's synthetic run (test_launch_generic.py)
    assert generic is not None and generic.engine == "generic"
    assert vllm_launch(workload, {**settings, "tensor_parallel_size": None}) is None
    sglang = Workload.model_validate(json.loads(SGLANG_EXAMPLES[0].read_text()))
    assert launch_for(sglang, SGLANG_SETTINGS) == sglang_launch(sglang, SGLANG_SETTINGS) is not None
    assert sglang_launch(workload, SGLANG_SETTINGS) is None  # a vLLM workload
    assert sglang_launch(sglang, settings) is None  # vLLM's settings: no CUDA-graph batch
    lora = ROOT / "fixtures" / "workloads" / "train-llama-3.1-8b-lora.json"
    training = Workload.model_validate(json.loads(lora.read_text()))
    assert launch_for(training, {**SGLANG_SETTINGS, **settings}) is None


@pytest.mark.parametrize("name", ["--trust-remote-code", "../../etc", "org/model\n", "/models/llama", "a b"])
def test_a_config_name_that_is_no_repository_gives_no_launch_not_an_error(name: str) -> None:
    """A config.json's ``_name_or_path`` is the user's text: only a repository id becomes the command's model (the
    same rule as a job's ``{model}``, ``ModelRef.hf_repo``); anything else gives no launch rather than a command
    the server would read as an option or a path, or a LaunchError."""
    config = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000,
              "max_position_embeddings": 8192}  # fmt: skip
    settings = {"tensor_parallel_size": 1, "pipeline_parallel_size": 1, "replicas": 1, "max_model_len": 4096,
                "max_num_seqs": 8, "max_num_batched_tokens": 4096}  # fmt: skip
    for engine, launch, model_at in (("vllm", vllm_launch, 2), ("sglang", sglang_launch, 4)):
        workload = Workload.model_validate(
            {"model": {"hf_config": {**config, "_name_or_path": name}}, "inference": {"engine": engine}}
        )
        assert workload.model.hf_repo() is None
        assert launch(workload, {**SGLANG_SETTINGS, **settings}) is None
        named = workload.model_copy(update={"model": workload.model.model_copy(update={"hf_config": {**config,
                                    "_name_or_path": "org/tiny-llama"}})})  # fmt: skip
        assert launch(named, {**SGLANG_SETTINGS, **settings}).argv[model_at] == "org/tiny-llama"


def test_an_sglang_release_before_piecewise_graphs_launches_the_fraction_its_budget_used() -> None:
    """SGLang 0.5.3–0.5.9 reserve nothing for piecewise CUDA graphs in the default mem_fraction_static (0.5.10.post1
    server_args.py:637, 1305-1311): the launch passes the fraction the budget of that release used, not 0.5.10's."""

    workload = Workload.model_validate(
        {
            "name": "sglang-0.5.9",
            "model": {"preset": "llama-3.1-8b"},
            "inference": {"engine": "sglang", "max_input_tokens": 4096, "max_output_tokens": 512},
            "runtime": {"engine_version": "0.5.9"},
        }
    )
    h100 = next(v for v in fixture_views() if v.slug.startswith("h100-sxm-80gb-x1-"))
    (entry,) = recommend(workload, [h100], None, 1)
    assert entry.launch is not None
    budget = estimate(workload, h100.usable_bytes, h100.accelerator_name, h100.compute_capability)
    used = next(line for line in budget.assumptions if "mem_fraction_static" in line)
    budgeted = float(re.search(r"mem_fraction_static (\d\.\d+)", used).group(1))
    launched = float(entry.launch.argv[entry.launch.argv.index("--mem-fraction-static") + 1])
    assert launched == pytest.approx(budgeted, abs=5e-4), used
