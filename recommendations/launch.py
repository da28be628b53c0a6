"""Launch commands: what to run for a recommendation's plan, checked against the engine's own flags. Pure.

A vLLM workload's ``fits`` or ``tight`` entry gets ``vllm serve MODEL …`` with the plan's parallel sizes and every
setting the budget assumed (``recommendations.settings.vllm_settings``: memory fraction, context length, sequence
and token budgets; the workload's compute and KV cache dtypes, KV block size, on-the-fly FP8), so that the server
sizes its KV pool as the budget did. ``max_num_seqs`` and ``gpu_memory_utilization`` are passed even where they are
vLLM's defaults: those defaults move with the release and the GPU.

Every command is checked against the flags of the vLLM release they were extracted from (``fixtures/engines/``, by
``tools/engine_args/extract_vllm.py`` from PyPI's sdist, its sha256 in the fixture): a flag that release does not
define, or a value outside the allowed set of a flag that has one, raises :class:`LaunchError`, so a renamed flag
fails a test here rather than a deployment. ``workload_from_vllm`` reads a command back into the workload and plan it
launches (the round trip ``tests/recommendations/test_launch.py`` checks reproduces the budget).
"""

from __future__ import annotations

import argparse
import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from budgets.engine import Workload
from budgets.engine import vllm as vllm_rules
from budgets.engine.dtypes import framework_dtype

from .plans import Plan

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "engines"
#: The vLLM release whose flags commands are checked against: the engine's default profile's release.
VLLM_FLAGS_RELEASE = vllm_rules.DEFAULT_VLLM_VERSION
#: The workload's KV cache dtypes as vLLM's ``--kv-cache-dtype`` spells them (the fixture's choices).
VLLM_KV_DTYPES = {"bf16": "bfloat16", "fp8": "fp8"}


class LaunchError(ValueError):
    """A command the engine's pinned flags would refuse (a bug in this module, never the user's input)."""


@dataclass(frozen=True, slots=True)
class EngineFlags:
    """An engine release's command-line flags, as extracted from its source."""

    engine: str
    release: str
    command: tuple[str, ...]
    flags: frozenset[str]
    choices: Mapping[str, tuple[str, ...]]
    source: Mapping[str, Any]

    def problems(self, argv: Sequence[str]) -> list[str]:
        """What this release would refuse in ``argv`` (the command, one positional, then ``--flag value`` pairs)."""
        n = len(self.command)
        if tuple(argv[:n]) != self.command:
            return [f"the command is {' '.join(self.command)}, not {' '.join(argv[:n])}"]
        rest = list(argv[n:])
        if not rest or rest[0].startswith("-"):
            return ["the model comes first, as vLLM's positional model_tag"]
        found = []
        items = rest[1:]
        for i in range(0, len(items), 2):
            flag, value = items[i], items[i + 1] if i + 1 < len(items) else None
            if flag not in self.flags:
                found.append(f"{flag}: not a flag of {self.engine} {self.release}")
            elif value is None or value.startswith("--"):
                found.append(f"{flag}: no value")
            elif flag in self.choices and value not in self.choices[flag]:
                found.append(f"{flag} {value}: not one of {', '.join(self.choices[flag])}")
        return found


@cache
def engine_flags(engine: str, release: str) -> EngineFlags:
    data = json.loads((FIXTURES / f"{engine}-{release}.json").read_text())
    return EngineFlags(
        engine=data["engine"],
        release=data["release"],
        command=tuple(data["command"]),
        flags=frozenset(data["flags"]),
        choices={flag: tuple(values) for flag, values in data["choices"].items()},
        source=data["source"],
    )


@dataclass(frozen=True, slots=True)
class Launch:
    """A ready-to-run command for an entry's plan, and what a person should know about it."""

    engine: str
    checked_against: str  # "vllm 0.11.0": the release whose flags the command passed
    argv: tuple[str, ...]
    notes: tuple[str, ...]

    @property
    def text(self) -> str:
        return shlex.join(self.argv)


def vllm_launch(workload: Workload, settings: Mapping[str, Any]) -> Launch | None:
    """``vllm serve`` for a vLLM workload's plan (``settings``: an entry's suggested settings); None for another
    engine or task, a plan without vLLM settings, or a workload that names no checkpoint (an architecture)."""
    inference = workload.inference
    if workload.task != "inference" or inference is None or inference.engine != "vllm":
        return None
    if settings.get("tensor_parallel_size") is None or settings.get("max_model_len") is None:
        return None
    model = workload.model.hf_repo() if workload.model is not None else None
    if model is None:
        return None
    version = workload.runtime.engine_version or vllm_rules.DEFAULT_VLLM_VERSION
    utilization = inference.gpu_memory_utilization or vllm_rules.default_gpu_memory_utilization(version)
    precision = workload.precision
    argv = ["vllm", "serve", model]
    pairs: list[tuple[str, object]] = [
        ("--tensor-parallel-size", settings["tensor_parallel_size"]),
        ("--pipeline-parallel-size", settings["pipeline_parallel_size"]),
        ("--data-parallel-size", settings["replicas"]),
        ("--max-model-len", settings["max_model_len"]),
        ("--max-num-seqs", settings["max_num_seqs"]),
        ("--max-num-batched-tokens", settings["max_num_batched_tokens"]),
        ("--gpu-memory-utilization", utilization),
        ("--dtype", framework_dtype(precision.compute)),
        ("--block-size", inference.kv_block_tokens),
    ]
    notes = []
    if precision.kv_cache != precision.compute and precision.kv_cache in VLLM_KV_DTYPES:
        pairs.append(("--kv-cache-dtype", VLLM_KV_DTYPES[precision.kv_cache]))
    elif precision.kv_cache != precision.compute:
        notes.append(f"a {precision.kv_cache} KV cache: vLLM's --kv-cache-dtype has no such choice; this server keeps"
                     " the compute dtype's, larger than the budget's")  # fmt: skip
    if precision.weights == "fp8":
        pairs.append(("--quantization", "fp8"))
        notes.append("--quantization fp8: FP8 weights (an FP8 checkpoint, or a bf16 one quantized as it loads)")
    elif precision.weights not in ("bf16", "fp16", "fp32"):
        notes.append(f"{precision.weights} weights: vLLM reads the method from the checkpoint's quantization config")
    for flag, value in pairs:
        if value is not None:
            argv += [flag, str(value)]
    if settings["replicas"] > 1:
        notes.append(f"--data-parallel-size {settings['replicas']}: one server, a replica per data-parallel rank")
    flags = engine_flags("vllm", VLLM_FLAGS_RELEASE)
    if version != flags.release:
        notes.append(f"flags checked against vLLM {flags.release}'s; the workload names vLLM {version}")
    problems = flags.problems(argv)
    if problems:
        raise LaunchError("; ".join(problems))
    return Launch("vllm", f"vllm {flags.release}", tuple(argv), tuple(notes))


def workload_from_vllm(argv: Sequence[str], workload: Workload) -> tuple[Workload, Plan]:
    """The workload and plan a ``vllm serve`` command launches: ``workload`` (its model, sizes and concurrency) with
    the serving settings the command sets. What a budget of the command's server reads, read back from it."""
    flags = engine_flags("vllm", VLLM_FLAGS_RELEASE)
    parser = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    parser.add_argument("model")
    for flag in flags.flags:
        parser.add_argument(flag)
    args = parser.parse_args(list(argv[len(flags.command) :]))
    inference = workload.inference
    assert inference is not None
    kv_dtypes = {name: key for key, name in VLLM_KV_DTYPES.items()}
    # fp8 compute launches as bfloat16 (framework_dtype): the dtype read back is the workload's when it maps there
    same = framework_dtype(workload.precision.compute) == args.dtype
    compute = (
        workload.precision.compute if same else {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}[args.dtype]
    )
    precision = workload.precision.model_copy(
        update={"compute": compute, "kv_cache": kv_dtypes.get(args.kv_cache_dtype, compute)}
    )
    served = inference.model_copy(
        update={
            "max_model_len": int(args.max_model_len),
            "max_num_seqs": int(args.max_num_seqs),
            "max_num_batched_tokens": int(args.max_num_batched_tokens),
            "gpu_memory_utilization": float(args.gpu_memory_utilization),
            "kv_block_tokens": int(args.block_size),
        }
    )
    plan = Plan(int(args.tensor_parallel_size), int(args.pipeline_parallel_size), int(args.data_parallel_size or 1))
    return workload.model_copy(update={"inference": served, "precision": precision}), plan
