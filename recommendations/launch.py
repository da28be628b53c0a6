"""Launch commands: what to run for a recommendation's plan, checked against the engine's own flags. Pure.

A vLLM workload's ``fits`` or ``tight`` entry gets ``vllm serve MODEL …`` with the plan's parallel sizes and every
setting the budget assumed (``recommendations.settings.vllm_settings``: memory fraction, context length, sequence
and token budgets; the workload's compute and KV cache dtypes, KV block size, on-the-fly FP8), so that the server
sizes its KV pool as the budget did. ``max_num_seqs`` and ``gpu_memory_utilization`` are passed even where they are
vLLM's defaults: those defaults move with the release and the GPU.

An SGLang workload's gets ``python -m sglang.launch_server --model-path MODEL …`` likewise
(``recommendations.settings.sglang_settings``): ``--mem-fraction-static``, ``--chunked-prefill-size`` and
``--cuda-graph-max-bs`` as the budget resolved them for that GPU and tensor degree (SGLang's own defaults where the
workload names none), ``--max-running-requests`` and ``--context-length`` as the budget's pool arithmetic used them,
``--page-size`` and an explicit ``--kv-cache-dtype`` (SGLang's ``auto`` takes an FP8 KV cache from a checkpoint
that asks for one). ``--dp-size`` runs replicas of the whole model; an expert-parallel plan runs
``--tp-size e --dp-size e --enable-dp-attention --ep-size e`` (``budgets.engine.sglang.server_defaults`` still
reserves as for tensor 1 without DP attention: an approximation the budget's notes name).

A plan on a multi-node configuration (``settings``' ``nodes`` and ``devices_per_node``) runs one server per node when
a copy of the model fits in one, else one server over several nodes: vLLM's multi-node data parallel for an expert
group (``--data-parallel-size-local``, ``--data-parallel-address``), Ray for pipeline stages
(``--distributed-executor-backend ray``), SGLang's ``--nnodes``/``--node-rank``/``--dist-init-addr``; the command is
the first node's, with ``HEAD_NODE_IP`` for its address and a note saying what the other nodes run. A context
beyond the model's ``max_position_embeddings`` gets a note: SGLang starts with it only under an environment variable.

Every command is checked against the flags of the engine release they were extracted from (``fixtures/engines/``, by
``tools/engine_args/extract_vllm.py`` and ``extract_sglang.py`` from PyPI's sdists, their sha256 in the fixtures): a
flag that release does not define, or a value outside the allowed set of a flag that has one, raises
:class:`LaunchError`, so a renamed flag fails a test here rather than a deployment. ``workload_from_vllm`` and
``workload_from_sglang`` read a command back into the workload and plan it launches (the round trip
``tests/recommendations/test_launch.py`` checks reproduces the budget). ``launch_for`` is the one entry point: by
task and engine.
"""

from __future__ import annotations

import argparse
import json
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from budgets.engine import Workload
from budgets.engine import sglang as sglang_rules
from budgets.engine import vllm as vllm_rules
from budgets.engine.dtypes import framework_dtype
from budgets.engine.schema import FLOAT_PRECISIONS, PrecisionSpec

from .plans import Plan
from .scratch import SCRATCH_DIR, Scratch, scratch_model

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "engines"
#: The vLLM release whose flags commands are checked against: the engine's default profile's release.
VLLM_FLAGS_RELEASE = vllm_rules.DEFAULT_VLLM_VERSION
#: The workload's KV cache dtypes as vLLM's ``--kv-cache-dtype`` spells them (the fixture's choices).
VLLM_KV_DTYPES = {"bf16": "bfloat16", "fp8": "fp8"}
#: The SGLang release whose flags commands are checked against: the one SGLang profile's release.
SGLANG_FLAGS_RELEASE = sglang_rules.SGLANG_VERSION
#: The workload's KV cache dtypes as SGLang's ``--kv-cache-dtype`` spells them (``fp8_e4m3``: what vLLM's ``fp8``
#: is); a KV cache of the compute dtype otherwise is SGLang's ``auto``.
SGLANG_KV_DTYPES = {"bf16": "bfloat16", "fp8": "fp8_e4m3"}
#: The weight precisions both servers quantize to as they load (``--quantization fp8``: ``_dtype_flags``).
ON_THE_FLY = ("fp8",)
#: ``--dtype`` back to the workload's compute precision.
COMPUTE_OF_DTYPE = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


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
    model_flag: str | None = None  # the flag that names the model (SGLang's --model-path); None: positional (vLLM)
    switches: frozenset[str] = frozenset()  # flags that take no value (``--enable-expert-parallel``)

    def problems(self, argv: Sequence[str]) -> list[str]:
        """What this release would refuse in ``argv``: the command, the model (positional, or its flag), then
        ``--flag value`` pairs."""
        n = len(self.command)
        if tuple(argv[:n]) != self.command:
            return [f"the command is {' '.join(self.command)}, not {' '.join(argv[:n])}"]
        items = list(argv[n:])
        if self.model_flag is None:
            if not items or items[0].startswith("-"):
                return ["the model comes first, as vLLM's positional model_tag"]
            items = items[1:]
        elif self.model_flag not in items[::2]:
            return [f"no model: {self.engine} takes it as {self.model_flag}"]
        found = []
        i = 0
        while i < len(items):
            flag, value = items[i], items[i + 1] if i + 1 < len(items) else None
            if flag in self.switches:
                i += 1
                continue
            i += 2
            if flag not in self.flags:
                found.append(f"{flag}: not a flag of {self.engine} {self.release}")
            elif value is None or value.startswith("--"):
                found.append(f"{flag}: no value")
            elif flag in self.choices and value not in self.choices[flag]:
                found.append(f"{flag} {value}: not one of {', '.join(self.choices[flag])}")
        return found

    def parse(self, argv: Sequence[str]) -> argparse.Namespace:
        """``argv``'s values by flag (``--tp-size`` → ``tp_size``; the positional model as ``model``), every flag
        taking one value: how the commands of this module are read back."""
        parser = argparse.ArgumentParser(add_help=False, exit_on_error=False)
        if self.model_flag is None:
            parser.add_argument("model")
        for flag in self.flags:
            if flag in self.switches:
                parser.add_argument(flag, action="store_true")
            else:
                parser.add_argument(flag)
        return parser.parse_args(list(argv[len(self.command) :]))


def _switches(data: Mapping[str, Any]) -> frozenset[str]:
    """The flags that take no value: as the fixture lists them (SGLang's extractor), else each flag argparse gave a
    ``--no-`` twin, which only ``BooleanOptionalAction`` does (vLLM's boolean engine arguments)."""
    if "switches" in data:
        return frozenset(data["switches"])
    flags = set(data["flags"])
    paired = {flag for flag in flags if flag.startswith("--") and f"--no-{flag[2:]}" in flags}
    return frozenset(paired | {f"--no-{flag[2:]}" for flag in paired})


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
        model_flag=data.get("model_flag"),
        switches=_switches(data),
    )


@dataclass(frozen=True, slots=True)
class Launch:
    """A ready-to-run command for an entry's plan, and what a person should know about it."""

    engine: str
    checked_against: str  # "vllm 0.11.0": the release whose flags the command passed
    argv: tuple[str, ...]
    notes: tuple[str, ...]
    files: tuple[tuple[str, str], ...] = ()  # (path, content) the command reads, written beside it (a config file)
    servers: int = 1  # identical servers the configuration runs side by side, each with its share of the sessions

    @property
    def text(self) -> str:
        return shlex.join(self.argv)


def _served(workload: Workload, engine: str, settings: Mapping[str, Any], *needed: str) -> str | Scratch | None:
    """The checkpoint an ``engine`` server of ``workload`` loads, when ``settings`` are that plan's, or for a workload
    that names none (an architecture) the model built from its numbers (``recommendations.scratch``): None for
    another engine or task, settings without one of ``needed``, or a model that cannot be built."""
    inference = workload.inference
    if workload.task != "inference" or inference is None or inference.engine != engine:
        return None
    if any(settings.get(name) is None for name in needed):
        return None
    repo = workload.model.hf_repo() if workload.model is not None else None
    if repo is not None:
        return repo
    scratch = scratch_model(workload, settings["max_model_len"], ON_THE_FLY, dummy=True)
    return None if isinstance(scratch, str) else scratch


def _scratch_flags(scratch: Scratch | None, load_format: str, tokenizer: str) -> list[tuple[str, object]]:
    """A server of a model built from the workload's numbers loads random weights of its config.json (both engines'
    ``dummy`` load format) and a tokenizer from elsewhere, since the directory holds none."""
    if scratch is None:
        return []
    return [(load_format, "dummy"), (tokenizer, scratch.tokenizer)]


def _with_scratch(launch: Launch, scratch: Scratch | None) -> Launch:
    return launch if scratch is None else replace(launch, files=(*launch.files, scratch.config_file))


def _dtype_flags(
    precision: PrecisionSpec, kv_dtypes: Mapping[str, str], label: str, explicit_kv: bool
) -> tuple[list[tuple[str, object]], list[str]]:
    """``--kv-cache-dtype`` and ``--quantization`` for the workload's precision, and what the server does otherwise
    than the budget. ``explicit_kv``: pass the KV dtype even where it is the compute dtype (``auto`` when it has no
    name of its own); else only where it differs."""
    pairs: list[tuple[str, object]] = []
    notes = []
    kv, compute = precision.kv_cache or "bf16", precision.compute or "bf16"  # set by PrecisionSpec's defaults
    if kv in kv_dtypes and (explicit_kv or kv != compute):
        pairs.append(("--kv-cache-dtype", kv_dtypes[kv]))
    elif kv == compute and explicit_kv:
        pairs.append(("--kv-cache-dtype", "auto"))
    elif kv != compute:
        notes.append(f"a {kv} KV cache: {label}'s --kv-cache-dtype has no such choice; this server keeps"
                     " the compute dtype's, larger than the budget's")  # fmt: skip
    if precision.weights == "fp8":
        pairs.append(("--quantization", "fp8"))
        notes.append("--quantization fp8: FP8 weights (an FP8 checkpoint, or a bf16 one quantized as it loads)")
    elif precision.weights not in FLOAT_PRECISIONS:
        notes.append(f"{precision.weights} weights: {label} reads the method from the checkpoint's quantization config")
    return pairs, notes


def _checked(
    flags: EngineFlags,
    label: str,
    version: str,
    base: list[str],
    pairs: list[tuple[str, object]],
    notes: list[str],
    servers: int = 1,
) -> Launch:
    """The command ``base`` + ``pairs`` (those with a value), refused with :class:`LaunchError` where ``flags``'s
    release would refuse it; a note when the workload names another release than the one checked against."""
    argv = list(base)
    for flag, value in pairs:
        if value is True:  # a switch: the flag alone
            argv.append(flag)
        elif value is not None and value is not False:
            argv += [flag, str(value)]
    if version != flags.release:
        notes.append(f"flags checked against {label} {flags.release}'s; the workload names {label} {version}")
    problems = flags.problems(argv)
    if problems:
        raise LaunchError("; ".join(problems))
    return Launch(flags.engine, f"{flags.engine} {flags.release}", tuple(argv), tuple(notes), servers=servers)


def _replicas_note(flag: str, replicas: int) -> list[str]:
    return [f"{flag} {replicas}: one server, a replica per data-parallel rank"] if replicas > 1 else []


#: What a multi-node command names the first node by: the person running it puts that node's address there.
HEAD_NODE = "HEAD_NODE_IP"


@dataclass(frozen=True, slots=True)
class _Placement:
    """How an entry's plan sits on a configuration's nodes (``settings``: ``nodes``, ``devices_per_node``), and the
    data-parallel size of one server."""

    data: int  # one server's data-parallel ranks: its replicas, or its expert group's attention ranks
    nodes_per_server: int  # nodes one server spans (1: it fits in a node, or the configuration is one node)
    servers: int  # servers the configuration runs side by side
    devices_per_node: int
    nodes: int

    @classmethod
    def of(cls, settings: Mapping[str, Any]) -> _Placement:
        tensor, pipeline = settings["tensor_parallel_size"], settings["pipeline_parallel_size"]
        expert, replicas = settings.get("expert_parallel_size") or 1, settings["replicas"]
        nodes = settings.get("nodes") or 1
        per_node = settings.get("devices_per_node") or 0
        copy = max(tensor * pipeline, expert)
        spans = -(-copy // per_node) if nodes > 1 and per_node else 1
        if expert > 1:  # one server per expert group
            group = expert // tensor
            return cls(group, spans, max(1, replicas // group), per_node, nodes)
        if nodes == 1 or not per_node:
            return cls(replicas, 1, 1, per_node, 1)
        servers = max(1, nodes // spans)
        return cls(-(-replicas // servers), spans, servers, per_node, nodes)  # the larger share where uneven

    def notes(self, engine_label: str) -> list[str]:
        if self.nodes == 1:
            if self.servers == 1:
                return []
            return [f"run {self.servers} such servers, each on its own devices (CUDA_VISIBLE_DEVICES) and port, with"
                    " a load balancer in front of them"]  # fmt: skip
        if self.nodes_per_server == 1:
            per_node = max(1, self.servers // self.nodes)
            where = "on each" if per_node == 1 else f"{per_node} to a node (each on its own devices and port) on each"
            return [f"run this command {where} of the {self.nodes} nodes ({self.servers} {engine_label} servers, each"
                    " serving its share of the sessions); put a load balancer in front of them"]  # fmt: skip
        extra = (f"; the configuration holds {self.servers} such servers, each on its own {self.nodes_per_server}"
                 " nodes" if self.servers > 1 else "")  # fmt: skip
        return [f"one server spans {self.nodes_per_server} nodes of {self.devices_per_node} devices: this is the"
                f" first node's command; replace {HEAD_NODE} with that node's address{extra}"]  # fmt: skip


def vllm_launch(workload: Workload, settings: Mapping[str, Any]) -> Launch | None:
    """``vllm serve`` for a vLLM workload's plan (``settings``: an entry's suggested settings); None for another
    engine or task, a plan without vLLM settings, or a workload that names no checkpoint (an architecture)."""
    model = _served(workload, "vllm", settings, "tensor_parallel_size", "max_model_len")
    if model is None:
        return None
    scratch = model if isinstance(model, Scratch) else None
    inference, precision = workload.inference, workload.precision
    assert inference is not None
    version = workload.runtime.engine_version or vllm_rules.DEFAULT_VLLM_VERSION
    utilization = inference.gpu_memory_utilization or vllm_rules.default_gpu_memory_utilization(version)
    place = _Placement.of(settings)
    expert = settings.get("expert_parallel_size") or 1
    data, multi = place.data, place.nodes_per_server > 1
    pairs: list[tuple[str, object]] = [
        ("--tensor-parallel-size", settings["tensor_parallel_size"]),
        ("--pipeline-parallel-size", settings["pipeline_parallel_size"]),
        ("--data-parallel-size", data),
        ("--enable-expert-parallel", expert > 1),
        # a data-parallel (expert) server over nodes: this node's ranks and where the first node listens
        ("--data-parallel-size-local", place.devices_per_node if multi and expert > 1 else None),
        ("--data-parallel-address", HEAD_NODE if multi and expert > 1 else None),
        ("--data-parallel-rpc-port", 13345 if multi and expert > 1 else None),
        # pipeline stages on other nodes run as Ray actors
        ("--distributed-executor-backend", "ray" if multi and expert == 1 else None),
        ("--max-model-len", settings["max_model_len"]),
        ("--max-num-seqs", settings["max_num_seqs"]),
        ("--max-num-batched-tokens", settings["max_num_batched_tokens"]),
        ("--gpu-memory-utilization", utilization),
        ("--dtype", framework_dtype(precision.compute)),
        ("--block-size", inference.block_tokens),
        *_scratch_flags(scratch, "--load-format", "--tokenizer"),
    ]
    dtype_pairs, notes = _dtype_flags(precision, VLLM_KV_DTYPES, "vLLM", explicit_kv=False)
    notes += scratch.notes(tokenizer=True) if scratch is not None else []
    flags = engine_flags("vllm", VLLM_FLAGS_RELEASE)
    notes += _replicas_note("--data-parallel-size", data) if expert == 1 else []
    if expert > 1:
        notes.append(f"--enable-expert-parallel with --data-parallel-size {expert}: the experts split over {expert}"
                     " devices, each rank running the attention whole for its own sessions")  # fmt: skip
    notes += place.notes("vLLM")
    if multi and expert > 1:
        notes.append(f"on node k (1, 2, …) run the same with --headless --data-parallel-start-rank"
                     f" k×{place.devices_per_node} (vLLM's multi-node data parallel)")  # fmt: skip
    elif multi:
        notes.append(f"start a Ray cluster over the {place.nodes_per_server} nodes first (ray start --head on the"
                     " first, ray start --address on the others), then run this on the first")  # fmt: skip
    served = SCRATCH_DIR if scratch is not None else str(model)
    launch = _checked(flags, "vLLM", version, [*flags.command, served], pairs + dtype_pairs, notes, place.servers)
    return _with_scratch(launch, scratch)


def sglang_launch(workload: Workload, settings: Mapping[str, Any]) -> Launch | None:
    """``python -m sglang.launch_server`` for an SGLang workload's plan (``settings``: an entry's suggested
    settings, ``sglang_settings``); None for another engine or task, a plan without SGLang settings, or a workload
    that names no checkpoint."""
    model = _served(workload, "sglang", settings, "tensor_parallel_size", "max_model_len", "cuda_graph_max_bs")
    if model is None:
        return None
    scratch = model if isinstance(model, Scratch) else None
    flags = engine_flags("sglang", SGLANG_FLAGS_RELEASE)
    assert flags.model_flag is not None
    pipeline = settings["pipeline_parallel_size"]
    place = _Placement.of(settings)
    expert = settings.get("expert_parallel_size") or 1
    multi = place.nodes_per_server > 1
    # SGLang's tp size is the whole expert group under DP attention (attention runs tp/dp ways per rank)
    tp = expert if expert > 1 else settings["tensor_parallel_size"]
    dp = place.data
    pairs: list[tuple[str, object]] = [
        ("--tp-size", tp),
        ("--pp-size", pipeline if pipeline > 1 else None),
        ("--dp-size", dp if dp > 1 else None),
        ("--enable-dp-attention", expert > 1),
        ("--ep-size", expert if expert > 1 else None),
        ("--nnodes", place.nodes_per_server if multi else None),
        ("--node-rank", 0 if multi else None),
        ("--dist-init-addr", f"{HEAD_NODE}:5000" if multi else None),
        ("--context-length", settings["max_model_len"]),
        ("--mem-fraction-static", settings["gpu_memory_utilization"]),
        ("--max-running-requests", settings["max_num_seqs"]),
        ("--chunked-prefill-size", settings["max_num_batched_tokens"]),
        ("--cuda-graph-max-bs", settings["cuda_graph_max_bs"]),
        ("--page-size", settings["kv_block_tokens"]),
        ("--dtype", framework_dtype(workload.precision.compute)),
        *_scratch_flags(scratch, "--load-format", "--tokenizer-path"),
    ]
    dtype_pairs, notes = _dtype_flags(workload.precision, SGLANG_KV_DTYPES, "SGLang", explicit_kv=True)
    notes += scratch.notes(tokenizer=True) if scratch is not None else []
    if expert > 1:
        notes.append(f"--enable-dp-attention --ep-size {expert}: the experts split over {expert} devices, each of the"
                     f" {dp} data-parallel ranks running the attention for its own sessions")  # fmt: skip
    else:
        notes += _replicas_note("--dp-size", dp)
    notes += place.notes("SGLang")
    if multi:
        notes.append("on node k (1, 2, …) run the same with --node-rank k")
    if 0 < workload.spec.max_position_embeddings < settings["max_model_len"]:  # 0: the config names none
        notes.append(f"--context-length {settings['max_model_len']} is above the model's max_position_embeddings"
                     f" ({workload.spec.max_position_embeddings}): SGLang refuses it unless"
                     " SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 is set (sglang/srt/configs/model_config.py:383-404;"
                     " a RoPE scaling factor can raise its limit)")  # fmt: skip
    version = workload.runtime.engine_version or SGLANG_FLAGS_RELEASE
    argv = [*flags.command, flags.model_flag, SCRATCH_DIR if scratch is not None else str(model)]
    return _with_scratch(_checked(flags, "SGLang", version, argv, pairs + dtype_pairs, notes, place.servers), scratch)


def _transformers(workload: Workload, settings: Mapping[str, Any], plan: Plan | None) -> Launch | None:
    from .launch_transformers import transformers_launch  # it builds on this module's Launch and checks

    return transformers_launch(workload, settings, plan)


def _generic(workload: Workload, settings: Mapping[str, Any], plan: Plan | None) -> Launch | None:
    from .launch_generic import generic_launch  # it builds on this module's Launch

    return generic_launch(workload, settings, plan)


#: The launch command of each serving engine that has one, by ``inference.engine``: (workload, the entry's settings,
#: its plan) → the command, or None where that engine cannot run the plan as budgeted (``no_serving_launch`` says why).
SERVING_LAUNCHES: dict[str, Callable[[Workload, Mapping[str, Any], Plan | None], Launch | None]] = {
    "vllm": lambda workload, settings, _plan: vllm_launch(workload, settings),
    "sglang": lambda workload, settings, _plan: sglang_launch(workload, settings),
    "transformers": _transformers,
    "generic": _generic,
}


def launch_for(workload: Workload, settings: Mapping[str, Any], plan: Plan | None = None) -> Launch | None:
    """The command that runs an entry's plan (``settings``: its suggested settings; ``plan``: the entry's, which
    the transformers and generic launches read): by the workload's engine for inference (the generic engine's is
    vramplan's synthetic run of the budget, ``launch_generic``); a custom workload's is the replay of its declared
    components (``launch_generic.custom_launch``); None for training (a training entry's command is
    ``training_launch.training_launch``'s, for its plan)."""
    if workload.task == "inference" and workload.inference is not None:
        launch = SERVING_LAUNCHES.get(workload.inference.engine)
        return launch(workload, settings, plan) if launch is not None else None
    if workload.task == "custom":
        from .launch_generic import custom_launch  # it builds on this module's Launch

        return custom_launch(workload)
    return None


def no_serving_launch(workload: Workload, settings: Mapping[str, Any], plan: Plan | None) -> str | None:
    """Why a serving entry that runs has no launch, or None when it has one (or is not a serving entry)."""
    inference = workload.inference
    if workload.task != "inference" or inference is None or launch_for(workload, settings, plan) is not None:
        return None
    if inference.engine == "transformers":
        from .launch_transformers import no_transformers_launch

        return no_transformers_launch(workload, settings, plan)
    if inference.engine == "generic":
        from .launch_generic import no_generic_launch

        return no_generic_launch(workload, settings, plan)
    if inference.engine not in SERVING_LAUNCHES:
        return f"the {inference.engine} engine names no server to launch: choose vllm, sglang, transformers or generic"
    max_model_len = settings.get("max_model_len")
    scratch = scratch_model(workload, max_model_len, ON_THE_FLY, dummy=True) if max_model_len is not None else None
    if isinstance(scratch, str):
        return f"the workload names no checkpoint to load, and vramplan cannot build one: {scratch}"
    return "the workload names no checkpoint to load (a preset's repository, or a config.json's _name_or_path)"


def _read_precision(
    workload: Workload, dtype: str, kv_cache_dtype: str | None, kv_dtypes: Mapping[str, str]
) -> PrecisionSpec:
    """The workload's precision as a command's ``--dtype`` and ``--kv-cache-dtype`` set it: fp8 compute launches as
    bfloat16 (``framework_dtype``), so the workload's compute is kept where it maps to the command's dtype; a KV
    dtype the command leaves out (or ``auto``) is the compute's."""
    same = framework_dtype(workload.precision.compute) == dtype
    compute = workload.precision.compute if same else COMPUTE_OF_DTYPE[dtype]
    kv_names = {name: key for key, name in kv_dtypes.items()}
    kv_cache = kv_names.get(kv_cache_dtype or "auto", compute)
    return workload.precision.model_copy(update={"compute": compute, "kv_cache": kv_cache})


def workload_from_vllm(argv: Sequence[str], workload: Workload) -> tuple[Workload, Plan]:
    """The workload and plan a ``vllm serve`` command launches: ``workload`` (its model, sizes and concurrency) with
    the serving settings the command sets. What a budget of the command's server reads, read back from it."""
    args = engine_flags("vllm", VLLM_FLAGS_RELEASE).parse(argv)
    inference = workload.inference
    assert inference is not None
    served = inference.model_copy(
        update={
            "max_model_len": int(args.max_model_len),
            "max_num_seqs": int(args.max_num_seqs),
            "max_num_batched_tokens": int(args.max_num_batched_tokens),
            "gpu_memory_utilization": float(args.gpu_memory_utilization),
            "kv_block_tokens": int(args.block_size),
        }
    )
    precision = _read_precision(workload, args.dtype, args.kv_cache_dtype, VLLM_KV_DTYPES)
    data = int(args.data_parallel_size or 1)
    if args.enable_expert_parallel:  # vLLM's expert group is every rank: data × tensor
        tensor = int(args.tensor_parallel_size)
        plan = Plan(tensor, int(args.pipeline_parallel_size), data, expert=data * tensor)
    else:
        plan = Plan(int(args.tensor_parallel_size), int(args.pipeline_parallel_size), data)
    return workload.model_copy(update={"inference": served, "precision": precision}), plan


def workload_from_sglang(argv: Sequence[str], workload: Workload) -> tuple[Workload, Plan]:
    """The workload and plan a ``python -m sglang.launch_server`` command launches: ``workload`` with the serving
    settings the command sets (``--mem-fraction-static`` as ``inference.gpu_memory_utilization``, ``--page-size`` as
    ``kv_block_tokens``, the schema's names for the rest); ``--pp-size`` and ``--dp-size`` 1 where absent."""
    args = engine_flags("sglang", SGLANG_FLAGS_RELEASE).parse(argv)
    inference = workload.inference
    assert inference is not None
    served = inference.model_copy(
        update={
            "max_model_len": int(args.context_length),
            "max_num_seqs": int(args.max_running_requests),
            "max_num_batched_tokens": int(args.chunked_prefill_size),
            "gpu_memory_utilization": float(args.mem_fraction_static),
            "cuda_graph_max_bs": int(args.cuda_graph_max_bs),
            "kv_block_tokens": int(args.page_size),
        }
    )
    precision = _read_precision(workload, args.dtype, args.kv_cache_dtype, SGLANG_KV_DTYPES)
    tp, dp = int(args.tp_size), int(args.dp_size or 1)
    if args.enable_dp_attention:  # attention tp/dp ways on each of dp ranks; experts over --ep-size
        plan = Plan(tp // dp, int(args.pp_size or 1), dp, expert=int(args.ep_size or tp))
    else:
        plan = Plan(tp, int(args.pp_size or 1), dp)
    return workload.model_copy(update={"inference": served, "precision": precision}), plan
