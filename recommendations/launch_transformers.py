"""Launches for transformers ``generate`` (``inference.engine: transformers``): what to run for an entry's plan. Pure.

An entry gets ``python generate_transformers.py`` (``torchrun --nproc-per-node T×P generate_transformers.py`` for a
tensor or pipeline parallel plan) and that script in ``Launch.files``. The script runs the generation the budget
(``budgets/engine/inference.py`` ``generate_stage``, ``budgets/engine/profiles/transformers.py``) sizes, then prints
``torch.cuda.max_memory_allocated()`` and ``max_memory_reserved()`` (on the CPU, ``runtime.device: cpu``, the
process's peak resident set):

- ``AutoModelForCausalLM.from_pretrained(<hf repo>, dtype=<the compute dtype>, device_map="cuda",
  attn_implementation=<sdpa | eager | flash_attention_2>)``; a quantized checkpoint reads its own quantization config;
- one replica's share of the sessions (``ceil(concurrent_sessions / replicas)``, as ``plans.plan_workload``) as
  prompts of ``max_input_tokens`` random token ids below the vocabulary size (seeded), with an all-ones attention
  mask, generated together, greedy, with ``max_new_tokens = min_new_tokens = max_output_tokens`` (the budget's
  full-length run: with an eos token the two eos-suppressing processors it counts);
- the KV cache as ``inference.kv_cache_layout`` says: ``dynamic`` is generate's default ``DynamicCache``,
  ``contiguous`` is ``cache_implementation="static"``, sized to ``max_length - 1`` positions as the budget's
  ``static_cache_slots`` (generation/utils.py:2963, 2289-2306); ``paged`` has no launch: generate re-routes it to
  continuous batching (generation/utils.py:2715-2719), whose cache is sized by ``ContinuousBatchingConfig`` (256-token
  pages, blocks from 0.8-0.9 of the free memory; generation/configuration_utils.py:1685-1701), not the budget's blocks;
- ``disable_compile=True`` unless ``runtime.compile``: generate compiles the forward of a static cache by itself on
  CUDA (``_valid_auto_compile_criteria``, generation/utils.py:2438-2459); with ``compile`` the static cache's forward
  is generate's compiled one and a dynamic cache's ``torch.compile(model.forward, dynamic=True)``;
- ``repetition_penalty=1.0`` beside the greedy settings: generate fills every attribute a ``GenerationConfig`` leaves
  unset from the checkpoint's ``generation_config.json`` (generation/utils.py:2113-2115), and a penalty other than 1.0
  adds a logits processor the budget does not hold (generation/utils.py:1472).

Plans: tensor T > 1 loads with ``distributed_config=DistributedConfig(tp_plan="auto")`` under torchrun (``tp_plan``
straight to ``from_pretrained`` is deprecated, modeling_utils.py:4233-4239; ``device_map`` and tensor parallelism are
mutually exclusive, distributed/mixin.py:182-183) for a model type whose configuration names a
``base_model_tp_plan`` and whose attention and KV heads T divides (``colwise`` q/k/v projections,
distributed/tensor_parallel.py:143; no KV-head replication as vLLM's); pipeline P > 1 with ``pp_size=P``
(distributed/pipeline_parallel.py:181: an even split of ``base_model.layers``, the first ranks one more where uneven,
as the budget's first stage) for a model type with a ``base_model_pp_plan``; every stage receives the logits
(``broadcast_from_last``, pipeline_parallel.py:146) and samples, where the budget gives them to the last stage only:
a note says so. Replicas are separate processes, each on its own devices with its share of the sessions
(``Launch.servers``). An expert-parallel plan has no launch (the transformers engine has none in the budget either).

Every keyword the script passes to ``from_pretrained``, ``GenerationConfig`` and ``DistributedConfig`` is checked
against transformers 5.24.0's definitions, extracted from PyPI's wheel into
``fixtures/engines/transformers-5.24.0.json`` (``tools/engine_args/extract_trl.py``):
``PreTrainedModel.from_pretrained``'s parameters and ``kwargs.pop`` names (modeling_utils.py:3903, 4149-4177, 4309)
and the auto class's own (models/auto/auto_factory.py:261),
``GenerationConfig.__init__``'s ``kwargs.pop`` names (generation/configuration_utils.py:385-498; any other keyword
becomes an attribute nothing reads, :500-509), ``cache_implementation``'s allowed values (:686), ``DistributedConfig``'s
fields (distributed/configuration_utils.py:25) and the attention implementations. A keyword or value the release does
not define raises :class:`~recommendations.launch.LaunchError` (``training_launch.common._checked``). The torchrun
flags are torch's (``torch.distributed.run``), not checked here.
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from budgets.engine import Workload
from budgets.engine.dtypes import framework_dtype
from budgets.engine.profiles.transformers import DEFAULT_TRANSFORMERS_VERSION
from budgets.engine.schema import FLOAT_PRECISIONS
from budgets.engine.vllm import parse_version

from .launch import FIXTURES, HEAD_NODE, Launch
from .plans import Plan
from .scratch import SCRATCH_DIR, scratch_model
from .training_launch.common import ALLOCATOR, EXPANDABLE, _checked, call_problems, split_env, value_problems
from .training_launch.transformers import HF_ATTENTION

#: The transformers release whose definitions a generate script is checked against: the budget's default profile's.
TRANSFORMERS_RELEASE = DEFAULT_TRANSFORMERS_VERSION
#: The script a run is: ``python generate_transformers.py`` (or under torchrun).
GENERATE_SCRIPT = "generate_transformers.py"
#: ``GenerationConfig``'s ``cache_implementation`` by the workload's ``kv_cache_layout`` (None: generate's default
#: DynamicCache, the keyword left out); ``paged`` has none (module docstring).
CACHE_IMPLEMENTATIONS: dict[str, str | None] = {"dynamic": None, "contiguous": "static"}
#: The calls of a script whose keywords are checked, and the fixture's list each is checked against.
GENERATE_CALLS = {
    "AutoModelForCausalLM.from_pretrained": "from_pretrained",
    "GenerationConfig": "generation_config",
    "DistributedConfig": "distributed_config",
}
#: The calls every script makes (``DistributedConfig`` only under torchrun).
REQUIRED_CALLS = ("AutoModelForCausalLM.from_pretrained", "GenerationConfig")
#: torchrun's first port: replica k of a torchrun plan uses the next ones.
MASTER_PORT = 29500


@dataclass(frozen=True, slots=True)
class GenerateRelease:
    """What transformers' release defines for a generate script, as extracted (``extract_trl.py``)."""

    release: str
    keywords: Mapping[str, frozenset[str]]  # by GENERATE_CALLS' list name
    cache_implementations: tuple[str, ...]
    attention: tuple[str, ...]
    tp_model_types: frozenset[str]
    pp_model_types: frozenset[str]
    source: Mapping[str, Any]

    @property
    def label(self) -> str:
        return f"transformers {self.release}"

    def problems(self, argv: Sequence[str], files: Sequence[tuple[str, str]]) -> list[str]:
        """What the release would refuse or never read in the command and its script: a command other than python or
        torchrun of the script, a keyword the called function does not read, a ``cache_implementation`` or
        ``attn_implementation`` it does not allow, a required call missing."""
        _, rest = split_env(argv)
        script = dict(files).get(GENERATE_SCRIPT)
        plain = rest == ["python", GENERATE_SCRIPT]
        port = rest[3:-1]
        torchrun = (len(rest) >= 4 and rest[:2] == ["torchrun", "--nproc-per-node"] and rest[2].isdigit()
                    and (port == [] or (port[:1] == ["--master-port"] and port[1:2] != [] and port[1].isdigit()
                                        and len(port) == 2))
                    and rest[-1] == GENERATE_SCRIPT)  # fmt: skip
        if script is None or not (plain or torchrun):
            return [f"the command is python (or torchrun) {GENERATE_SCRIPT} with that file beside it"]
        try:
            tree = ast.parse(script)
        except SyntaxError as exc:
            return [f"{GENERATE_SCRIPT}: {exc}"]
        known = {name: self.keywords[entry] for name, entry in GENERATE_CALLS.items()}
        found, called = call_problems(tree, known, f"not read by {self.label}", self._value_problems)
        found += [f"{name}: not called" for name in REQUIRED_CALLS if name not in called]
        if torchrun and "DistributedConfig" not in called:
            found.append("torchrun without a DistributedConfig: every rank would load the whole model")
        return found

    def _value_problems(self, name: str, keyword: str, value: ast.expr) -> list[str]:
        caches, attention = self.cache_implementations, self.attention
        return value_problems(
            name,
            keyword,
            value,
            {
                "cache_implementation": (caches, f"not one of {', '.join(caches)}"),
                "attn_implementation": (attention, f"not one of {', '.join(attention)}"),
            },
        )


@cache
def generate_release(release: str) -> GenerateRelease:
    data = json.loads((FIXTURES / f"transformers-{release}.json").read_text())
    loading, generation = data["from_pretrained"], data["generation_config"]
    keywords = {
        "from_pretrained": frozenset(loading["parameters"] + loading["popped"] + loading["auto_popped"]),
        "generation_config": frozenset(generation["attributes"]),
        "distributed_config": frozenset(data["distributed_config"]["fields"]),
    }
    plans = data["parallel_plans"]
    return GenerateRelease(
        release=data["release"],
        keywords=keywords,
        cache_implementations=tuple(generation["cache_implementations"]),
        attention=tuple(data["attention_implementations"]),
        tp_model_types=frozenset(plans["base_model_tp_plan"]),
        pp_model_types=frozenset(plans["base_model_pp_plan"]),
        source=data["source"],
    )


def entry_plan(settings: Mapping[str, Any], plan: Plan | None) -> Plan | None:
    """The entry's plan; else the one its settings name (``vllm_settings``' keys), where they name one."""
    if plan is not None:
        return plan
    tensor, pipeline = settings.get("tensor_parallel_size"), settings.get("pipeline_parallel_size")
    if tensor is None or pipeline is None:
        return None
    return Plan(tensor, pipeline, settings.get("replicas") or 1, expert=settings.get("expert_parallel_size") or 1)


def _refusal(workload: Workload, plan: Plan, release: GenerateRelease, model_type: str) -> str | None:
    """Why transformers cannot run ``plan`` of ``workload`` (a ``model_type`` model) as budgeted; None when it can."""
    inference, spec = workload.inference, workload.spec
    assert inference is not None
    layout = inference.kv_cache_layout or "dynamic"
    version = workload.runtime.engine_version
    if version is not None and parse_version(version)[:1] < (5,):
        return (f"runtime.engine_version {version}: the script is checked against {release.label}'s keywords"
                " (4.x reads torch_dtype, not dtype, and has no DistributedConfig)")  # fmt: skip
    if layout not in CACHE_IMPLEMENTATIONS:
        return (f"kv_cache_layout {layout}: generate runs cache_implementation='paged' as continuous batching"
                " (generation/utils.py:2715), whose cache ContinuousBatchingConfig sizes (256-token pages, blocks from"
                " the free memory), not the budget's blocks")  # fmt: skip
    if plan.expert > 1:
        return f"expert parallel {plan.expert}: the transformers budget has no expert-parallel plan to launch"
    if plan.tensor > 1:
        if model_type not in release.tp_model_types:
            return (f"tensor parallel {plan.tensor}: model_type {model_type} has no base_model_tp_plan in"
                    f" {release.label} (DistributedConfig(tp_plan='auto') needs one)")  # fmt: skip
        if spec.num_attention_heads % plan.tensor or spec.num_kv_heads % plan.tensor:
            return (f"tensor parallel {plan.tensor}: {release.label} splits the q/k/v projections column-wise"
                    f" ({spec.num_attention_heads} attention and {spec.num_kv_heads} KV heads do not divide by"
                    f" {plan.tensor}; it does not replicate KV heads)")  # fmt: skip
    if plan.pipeline > 1 and model_type not in release.pp_model_types:
        return (f"pipeline parallel {plan.pipeline}: model_type {model_type} has no base_model_pp_plan in"
                f" {release.label} (its pipeline splits base_model.layers between embed_tokens and norm)")  # fmt: skip
    return None


def _notes(workload: Workload, plan: Plan, sessions: int, release: GenerateRelease) -> list[str]:
    precision, runtime, inference = workload.precision, workload.runtime, workload.inference
    assert inference is not None
    accelerate = (
        " and accelerate (from_pretrained refuses a device_map without it: integrations/accelerate.py:135-142)"
        if runtime.device == "cuda"
        else ""
    )
    notes = [f"needs torch, transformers {release.release}{accelerate}",
             f"the prompts are {sessions} × {inference.max_input_tokens} random token ids (seed 0); the run is"
             f" forced to {inference.max_output_tokens} new tokens (min_new_tokens), greedy"]  # fmt: skip
    if runtime.device == "cpu":
        notes.append("runtime.device cpu: the model loads and generates on the CPU, and the script prints the"
                     " process's peak resident set (resource.getrusage), which holds the Python runtime and libraries"
                     " beside the tensors the budget counts (its framework_allocated view)")  # fmt: skip
    if precision.weights == "fp8" or precision.weights not in FLOAT_PRECISIONS:
        notes.append(f"{precision.weights} weights: from_pretrained reads the method from the checkpoint's"
                     " quantization config (a checkpoint without one loads in the compute dtype)")  # fmt: skip
    kv, compute = precision.kv_cache or "bf16", precision.compute or "bf16"
    if kv != compute:
        notes.append(f"a {kv} KV cache: transformers' {inference.kv_cache_layout} cache holds the compute dtype"
                     f" ({framework_dtype(compute)}), more than the budget's")  # fmt: skip
    if runtime.attention == "flash":
        notes.append("attn_implementation flash_attention_2: pip install flash-attn")
    if runtime.compile:
        notes.append("torch.compile: the budget of generate does not include the compiled graphs' memory")
    version = runtime.engine_version
    if version is not None and version != release.release:
        notes.append(f"keywords checked against {release.label}'s; the workload names transformers {version}")
    if plan.pipeline > 1:
        notes.append(f"pipeline parallel {plan.pipeline}: every stage receives each step's logits from the last"
                     " (broadcast_from_last, distributed/pipeline_parallel.py:146) and runs generate's sampling,"
                     " which the budget puts on the last stage only: the first stage may hold more than its"
                     " budget")  # fmt: skip
    if plan.devices_per_replica > 1:
        notes.append(f"the {plan.devices_per_replica} processes of a copy run on one node; across nodes, run torchrun"
                     f" with --nnodes, --node-rank and --master-addr {HEAD_NODE} on each")  # fmt: skip
    if plan.replicas > 1:
        port = f" and --master-port {MASTER_PORT}+k" if plan.devices_per_replica > 1 else ""
        notes.append(f"run {plan.replicas} such processes, replica k on its own {plan.devices_per_replica} device(s)"
                     f" (CUDA_VISIBLE_DEVICES){port}, each generating {sessions} of the"
                     f" {inference.concurrent_sessions} sessions")  # fmt: skip
    return notes


def _script(workload: Workload, repo: str, plan: Plan, sessions: int) -> str:
    inference, runtime = workload.inference, workload.runtime
    assert inference is not None
    layout = inference.kv_cache_layout or "dynamic"
    cache_implementation = CACHE_IMPLEMENTATIONS[layout]
    distributed = plan.devices_per_replica > 1
    imports = "AutoModelForCausalLM, DistributedConfig, GenerationConfig" if distributed else (
        "AutoModelForCausalLM, GenerationConfig")  # fmt: skip
    if distributed:
        sizes = [f'tp_plan="auto", tp_size={plan.tensor}' if plan.tensor > 1 else None,
                 f"pp_size={plan.pipeline}" if plan.pipeline > 1 else None]  # fmt: skip
        placement = f"    distributed_config=DistributedConfig({', '.join(s for s in sizes if s)}),"
    elif runtime.device == "cpu":
        placement = None  # from_pretrained loads on the CPU without a device map
    else:
        placement = '    device_map="cuda",'
    cpu = runtime.device == "cpu"
    compile_dynamic = runtime.compile and cache_implementation is None
    lines = [
        f'"""transformers {TRANSFORMERS_RELEASE} generate of {repo} as budgeted: {sessions} prompts of'
        f" {inference.max_input_tokens} random token ids",
        f"generated together to {inference.max_output_tokens} new tokens each (greedy, full length), {layout} KV cache."
        + (f" Run under torchrun, {plan.devices_per_replica} processes." if distributed else ""),
        ("Prints the process's peak resident set." if cpu else "Prints the CUDA memory peaks.") + '"""',
        "",
        "import os",
        *(["import resource"] if cpu else []),
        "",
        "import torch",
        f"from transformers import {imports}",
        "",
        f"SESSIONS = {sessions}",
        f"INPUT_TOKENS = {inference.max_input_tokens}",
        f"OUTPUT_TOKENS = {inference.max_output_tokens}",
        "",
        "model = AutoModelForCausalLM.from_pretrained(",
        f"    {json.dumps(repo)},",
        f"    dtype=torch.{framework_dtype(workload.precision.compute)},",
        *([placement] if placement else []),
        f"    attn_implementation={json.dumps(HF_ATTENTION[runtime.attention])},",
        ")",
        *(["model.forward = torch.compile(model.forward, dynamic=True)"] if compile_dynamic else []),
        "torch.manual_seed(0)  # the same prompts on every rank",
        "vocab = model.config.get_text_config().vocab_size",
        "input_ids = torch.randint(0, vocab, (SESSIONS, INPUT_TOKENS), device=model.device)",
        "attention_mask = torch.ones_like(input_ids)",
        "config = GenerationConfig(",
        "    max_new_tokens=OUTPUT_TOKENS,",
        "    min_new_tokens=OUTPUT_TOKENS,",
        "    do_sample=False,",
        "    num_beams=1,",
        "    repetition_penalty=1.0,",
        "    use_cache=True,",
        *([f"    cache_implementation={json.dumps(cache_implementation)},"] if cache_implementation else []),
        f"    disable_compile={not runtime.compile},",
        ")",
        "output = model.generate(input_ids=input_ids, attention_mask=attention_mask, generation_config=config)",
        *([] if cpu else ["torch.cuda.synchronize()"]),
        "assert tuple(output.shape) == (SESSIONS, INPUT_TOKENS + OUTPUT_TOKENS), output.shape",
        'rank = os.environ.get("RANK", "0")',
        *(_cpu_peak() if cpu else _cuda_peaks()),
        "",
    ]
    return "\n".join(lines)


def _cuda_peaks() -> list[str]:
    return [
        "allocated, reserved = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()",
        'print(f"rank {rank}: max_memory_allocated {allocated} B ({allocated / 2**30:.2f} GiB),"',
        '      f" max_memory_reserved {reserved} B ({reserved / 2**30:.2f} GiB)")',
    ]


def _cpu_peak() -> list[str]:
    """On the CPU PyTorch has no allocator counters: the process's peak resident set (Linux reports KiB)."""
    return [
        "peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024",
        'print(f"rank {rank}: peak resident set {peak} B ({peak / 2**30:.2f} GiB)")',
    ]


def _launch(workload: Workload, settings: Mapping[str, Any], plan: Plan | None) -> Launch | str:
    inference = workload.inference
    if workload.task != "inference" or inference is None or inference.engine != "transformers":
        return "not a transformers generate workload"
    repo = workload.model.hf_repo() if workload.model is not None else None
    scratch = None
    if repo is None:  # the model built from the workload's numbers, its random weights written first
        found = scratch_model(workload, inference.max_input_tokens + inference.max_output_tokens)
        if isinstance(found, str):
            return f"the workload names no checkpoint for from_pretrained, and vramplan cannot build one: {found}"
        scratch, repo = found, SCRATCH_DIR
    chosen = entry_plan(settings, plan)
    if chosen is None:
        return "the entry names no plan"
    release = generate_release(TRANSFORMERS_RELEASE)
    model_type = scratch.config["model_type"] if scratch is not None else workload.spec.model_type
    refusal = _refusal(workload, chosen, release, model_type)
    if refusal is not None:
        return refusal
    sessions = math.ceil(inference.concurrent_sessions / chosen.replicas)
    env: list[str] = []
    if chosen.replicas > 1:
        env.append("CUDA_VISIBLE_DEVICES=" + ",".join(map(str, range(chosen.devices_per_replica))))
    if workload.runtime.expandable_segments:
        env.append(f"{ALLOCATOR}={EXPANDABLE}")
    prefix = ("env", *env) if env else ()
    if chosen.devices_per_replica > 1:
        port = ("--master-port", str(MASTER_PORT)) if chosen.replicas > 1 else ()
        command: tuple[str, ...] = ("torchrun", "--nproc-per-node", str(chosen.devices_per_replica), *port)
    else:
        command = ("python",)
    argv = (*prefix, *command, GENERATE_SCRIPT)
    files = ((GENERATE_SCRIPT, _script(workload, repo, chosen, sessions)), *(scratch.init_files if scratch else ()))
    notes = _notes(workload, chosen, sessions, release)
    if scratch is not None:
        dtype = framework_dtype(workload.precision.compute)
        notes[1:1] = scratch.init_notes(workload, chosen, dtype, tokenizer=False)
    launch = _checked("transformers", release.release, argv, notes, release.problems(argv, files), None, files)
    return replace(launch, servers=chosen.replicas)


def transformers_launch(workload: Workload, settings: Mapping[str, Any], plan: Plan | None = None) -> Launch | None:
    """``python generate_transformers.py`` (torchrun for a tensor or pipeline plan) and that script for a transformers
    generate workload's ``plan`` (else the plan ``settings`` name), checked against transformers 5.24.0's
    definitions; None for another engine or task, a workload that names no checkpoint, no plan, or a plan
    transformers cannot run as budgeted (``no_transformers_launch`` says why)."""
    found = _launch(workload, settings, plan)
    return found if isinstance(found, Launch) else None


def no_transformers_launch(workload: Workload, settings: Mapping[str, Any], plan: Plan | None = None) -> str | None:
    """Why ``transformers_launch`` gives no command; None when it gives one."""
    found = _launch(workload, settings, plan)
    return found if isinstance(found, str) else None
