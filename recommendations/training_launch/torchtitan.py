"""torchtitan's training launches (``recommendations.training_launch``).

A torchtitan workload's entry gets ``torchrun --nproc_per_node N -m torchtitan.train --job.config_file <a train config
of the release> --section.field value …`` (over several nodes ``--nnodes``, a node's processes and the c10d
rendezvous at the first node, ``common.torchrun_flags``) (torchtitan 0.2.0, the profile's; JobConfig's fields are
tyro flags): the
flavor whose architecture is the workload's (Llama 3 8B/70B/405B, Qwen3's dense ones), micro batch and sequence
length (under a pipeline one micro-batch per stage), the parallel degrees (ZeRO-0 of one-device replicas as DDP,
ZeRO-2 and 3 as FSDP2 keeping or resharding the gathered layers), the dtype and FSDP's mixed-precision policy, the
recomputation mode, torch.compile, AdamW's step and CPU offload. Checked against
``fixtures/engines/torchtitan-0.2.0.json`` (``tools/engine_args/extract_torchtitan.py``, from PyPI's sdist and the
v0.2.0 tag's train configs; tyro refuses an unknown flag, the check refuses it first, and a value outside a field's
``Literal``); ``workload_from_torchtitan`` reads a command back.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from budgets.engine import Workload
from budgets.engine.frameworks import framework_profile
from budgets.engine.models.spec import ModelSpec
from budgets.engine.schema import PrecisionSpec

from ..launch import FIXTURES, Launch, LaunchError
from ..plans import Plan
from .common import ALLOCATOR, EXPANDABLE, LESS, _checked, split_env, torchrun_flags, torchrun_processes

#: The torchtitan release whose JobConfig, models and train configs commands are checked against: the profile's.
TORCHTITAN_RELEASE = framework_profile("torchtitan").release or ""
#: The architecture numbers a torchtitan flavor builds (the fixture's, computed from its args), by the ModelSpec field.
TITAN_ARCHITECTURE = {
    "embed_dim": "hidden_size",
    "num_layers": "num_layers",
    "num_heads": "num_attention_heads",
    "num_kv_heads": "num_kv_heads",
    "head_dim": "head_dim",
    "intermediate_dim": "intermediate_size",
    "vocab_size": "vocab_size",
    "tie_word_embeddings": "tie_word_embeddings",
    "qk_norm": "qk_norm",
}
#: ``--training.dtype`` and ``--training.mixed_precision_param`` by the workload's floating precision
#: (torchtitan/config/job_config.py:224-243: bfloat16 and float32 only).
TITAN_DTYPES = {"bf16": "bfloat16", "fp32": "float32"}
#: ``--optimizer.implementation`` by the workload's ``optimizer_impl`` (components/optimizer.py:290-302: ``fused``
#: and ``foreach`` passed to torch.optim.AdamW, the for-loop step with both False).
TITAN_IMPLEMENTATIONS = {"fused": "fused", "foreach": "foreach", "for_loop": "for-loop"}
#: torch's AdamW step on CUDA when neither ``fused`` nor ``foreach`` is given (``optimizer_impl`` null): foreach
#: (``budgets.engine.components.training.default_optimizer_impl``); torchtitan's own default is ``fused``.
TITAN_DEFAULT_IMPLEMENTATION = "foreach"
#: What ``--activation_checkpoint.mode`` (and ``selective_ac_option``) each recomputation runs as: per-op selective
#: checkpointing is torchtitan's ``selective`` with ``op`` (distributed/activation_checkpoint.py:242-271); Megatron's
#: attention-only recomputation has no mode, and runs as ``full``, holding less.
TITAN_RECOMPUTE: dict[str, tuple[str, str | None]] = {
    "none": ("none", None),
    "full": ("full", None),
    "selective_op": ("selective", "op"),
    "selective": ("full", None),
}


@dataclass(frozen=True, slots=True)
class TitanCommand:
    """``[env VAR=value …] torchrun [--flag value …] -m <module> [--section.field [value] …]``: a ``bool`` field is a
    flag alone (value None), tyro's ``--section.no_field`` its negation."""

    module: str
    args: tuple[tuple[str, str | None], ...]
    torchrun: tuple[tuple[str, str], ...] = ()
    env: tuple[tuple[str, str], ...] = ()

    @property
    def argv(self) -> tuple[str, ...]:
        env = ("env", *(f"{name}={value}" for name, value in self.env)) if self.env else ()
        torchrun = tuple(item for pair in self.torchrun for item in pair)
        args = tuple(item for flag, value in self.args for item in (flag, value) if item is not None)
        return (*env, "torchrun", *torchrun, "-m", self.module, *args)

    @property
    def processes(self) -> int:
        """The processes it starts over all nodes."""
        return torchrun_processes(self.torchrun)

    @classmethod
    def parse(cls, argv: Sequence[str]) -> TitanCommand:
        """The parts of a command; :class:`LaunchError` for one that is not ``torchrun … -m <module> …``. A flag
        takes the next item as its value unless that item is a flag."""
        env, rest = split_env(argv)
        if rest[:1] != ["torchrun"] or "-m" not in rest:
            raise LaunchError("the command is torchrun … -m <module> …")
        split = rest.index("-m")
        torchrun = rest[1:split]
        if len(torchrun) % 2 or len(rest) < split + 2:
            raise LaunchError("torchrun takes --flag value pairs, then -m <module>")
        args: list[tuple[str, str | None]] = []
        items = rest[split + 2 :]
        while items:
            flag = items.pop(0)
            if not flag.startswith("--"):
                raise LaunchError(f"{flag}: a value without a flag")
            args.append((flag, items.pop(0) if items and not items[0].startswith("--") else None))
        pairs = tuple(zip(torchrun[::2], torchrun[1::2], strict=True))
        return cls(rest[split + 1], tuple(args), pairs, tuple(env))


@dataclass(frozen=True, slots=True)
class TorchtitanRelease:
    """A torchtitan release's command line (JobConfig's fields as tyro's flags), its models and flavors, optimizers
    and train configs, as extracted from its sdist and tag (``tools/engine_args/extract_torchtitan.py``)."""

    release: str
    module: str
    torchrun_flags: frozenset[str]
    flags: Mapping[str, Mapping[str, Any]]
    models: Mapping[str, Mapping[str, Any]]
    optimizers: tuple[str, ...]
    train_configs: Mapping[str, Mapping[str, Any]]
    source: Mapping[str, Any] = field(default_factory=dict)

    def problems(self, argv: Sequence[str]) -> list[str]:
        """What this release would refuse in ``argv``, or run otherwise than it reads."""
        try:
            command = TitanCommand.parse(argv)
        except LaunchError as exc:
            return [str(exc)]
        found = [f"{flag}: not a torchrun flag" for flag, _ in command.torchrun if flag not in self.torchrun_flags]
        if command.module != self.module:
            found.append(f"-m {command.module}: torchtitan {self.release} trains with -m {self.module}")
        fields = [self.flags.get(flag, {}).get("negates", flag) for flag, _ in command.args]  # a negation: its field
        found += [f"{flag}: given twice" for flag in sorted(set(fields)) if fields.count(flag) > 1]
        for flag, value in command.args:
            found += self._flag_problems(flag, value)
        if found:
            return found
        return self._config_problems(command)

    def _flag_problems(self, flag: str, value: str | None) -> list[str]:
        entry = self.flags.get(flag)
        if entry is None:
            return [f"{flag}: not a field of torchtitan {self.release}'s JobConfig (config/job_config.py)"]
        if entry["kind"] == "bool":
            negation = flag.replace(".", ".no_", 1) if "negates" not in entry else entry["negates"]
            return [] if value is None else [f"{flag} {value}: a bool flag takes no value ({negation} negates it)"]
        if value is None:
            return [f"{flag}: no value"]
        if entry["choices"] and value not in entry["choices"]:
            return [f"{flag} {value}: not one of {', '.join(entry['choices'])}"]
        if entry["type"] == "int" and not value.lstrip("-").isdigit():
            return [f"{flag} {value}: not an int"]
        if flag == "--activation_checkpoint.selective_ac_option" and not (value == "op" or value.isdigit()):
            return [f"{flag} {value}: 'op' or a layer frequency (distributed/activation_checkpoint.py:242-248)"]
        if flag == "--optimizer.name" and value not in self.optimizers:
            return [f"{flag} {value}: torchtitan {self.release} builds {', '.join(self.optimizers)}"]
        if flag == "--job.config_file" and value.removeprefix("./") not in self.train_configs:
            return [f"{flag} {value}: not a train config of torchtitan {self.release}"]
        return []

    def _config_problems(self, command: TitanCommand) -> list[str]:
        """What the merged config (the command over its train config) names that the release does not build: the
        model and flavor, a converter the command cannot clear, devices the parallel degrees do not cover."""
        config = self.config(command)
        found = []
        model = self.models.get(str(config["model.name"]))
        if model is None:
            found.append(f"model.name {config['model.name']}: not a model of torchtitan {self.release}")
        elif config["model.flavor"] not in model["flavors"]:
            found.append(f"model.flavor {config['model.flavor']}: not a flavor of {config['model.name']}")
        converters = config["model.converters"]
        if converters and "--model.converters" not in dict(command.args):
            found.append(f"model.converters {converters}: the config converts the model (float8),"
                         " which the command cannot clear")  # fmt: skip
        elif converters and converters != ["float8"]:
            found.append(f"model.converters {converters}: the budget models the float8 converter only")
        degrees = ("data_parallel_replicate_degree", "data_parallel_shard_degree", "tensor_parallel_degree",
                   "pipeline_parallel_degree", "context_parallel_degree")  # fmt: skip
        product = math.prod(int(config[f"parallelism.{name}"]) for name in degrees)
        if int(config["parallelism.data_parallel_shard_degree"]) > 0 and product != command.processes:
            found.append(f"the parallel degrees cover {product} devices, torchrun starts {command.processes}"
                         " (distributed/parallel_dims.py:52-55)")  # fmt: skip
        return found

    def config(self, command: TitanCommand) -> dict[str, Any]:
        """The run's settings, ``section.field`` → value: JobConfig's defaults, then the train config's TOML, then
        the command (torchtitan/config/manager.py:30-32: CLI > TOML > defaults)."""
        values = {flag[2:]: entry["default"] for flag, entry in self.flags.items() if "negates" not in entry}
        args = dict(command.args)
        path = args.get("--job.config_file")
        if path is not None:
            values |= self.train_configs[path.removeprefix("./")]["values"]
        for flag, value in command.args:
            entry = self.flags[flag]
            values[entry.get("negates", flag)[2:]] = self._typed(entry, value)
        return values

    @staticmethod
    def _typed(entry: Mapping[str, Any], value: str | None) -> Any:
        if entry["kind"] == "bool":
            return "negates" not in entry
        if entry["type"] == "int":
            return int(str(value))
        return [value] if entry["kind"] == "list" else value


@cache
def torchtitan_release(release: str) -> TorchtitanRelease:
    data = json.loads((FIXTURES / f"torchtitan-{release}.json").read_text())
    return TorchtitanRelease(
        release=data["release"],
        module=data["module"],
        torchrun_flags=frozenset(data["torchrun_flags"]),
        flags=data["job_config"]["flags"],
        models=data["models"],
        optimizers=tuple(data["optimizers"]),
        train_configs=data["train_configs"],
        source=data["source"],
    )


def titan_flavor(release: TorchtitanRelease, spec: ModelSpec) -> tuple[str, str] | None:
    """The (model, flavor) whose architecture is the workload's: a dense, gated, bias-free decoder of the same
    numbers (``TITAN_ARCHITECTURE``), no sliding window."""
    if spec.num_experts != 1 or spec.mlp != "gated" or spec.sliding_window or spec.qkv_bias or spec.o_bias:
        return None
    for model, entry in release.models.items():
        for flavor, built in entry["flavors"].items():
            numbers = built["architecture"]
            if numbers and all(numbers[name] == getattr(spec, field) for name, field in TITAN_ARCHITECTURE.items()):
                return model, flavor
    return None


def titan_config(release: TorchtitanRelease, model: str, flavor: str) -> str | None:
    """The train config the command starts from: one of the model's whose TOML converts nothing (a converter cannot
    be cleared from the command line); that of the flavor first, then one not of a debug or MoE flavor."""
    prefix = f"torchtitan/models/{model}/train_configs/"
    usable = [path for path, entry in release.train_configs.items()
              if path.startswith(prefix) and not entry["values"].get("model.converters")]  # fmt: skip

    def rank(path: str) -> tuple[bool, bool, str]:
        given = str(release.train_configs[path]["values"].get("model.flavor", ""))
        return given != flavor, "debug" in given or "moe" in given, path

    return min(usable, key=rank, default=None)


@dataclass
class _TitanDraft:
    """A torchtitan command being built: flags in order, notes, and why it cannot be (``refusal``)."""

    args: list[tuple[str, str | None]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    refusal: str | None = None

    def set(self, flag: str, value: object) -> None:
        self.args.append((flag, str(value)))

    def switch(self, flag: str, on: bool) -> None:
        """A bool field: ``--section.field`` or ``--section.no_field``."""
        section, _, name = flag.rpartition(".")
        self.args.append((flag if on else f"{section}.no_{name}", None))

    def refuse(self, reason: str) -> None:
        self.refusal = self.refusal or reason


def titan_precision(precision: PrecisionSpec, fsdp: bool, autocast: bool) -> tuple[tuple[str, str], list[str]] | str:
    """``(--training.dtype, --training.mixed_precision_param)`` that runs the workload's precision, and the notes; or
    why none does. ``fsdp``: more than one data-parallel shard, where the mixed-precision policy is FSDP2's
    (models/llama3/infra/parallelize.py:118-126); ``autocast``: one device or DDP, where torchtitan runs the step
    under ``torch.autocast(mixed_precision_param)`` (distributed/utils.py:218-238; under tensor or pipeline
    parallelism alone there is none).

    One dtype throughout (``training.dtype``: "all parameters, gradients, and optimizer states",
    config/job_config.py:224-229) is a pure-precision workload, run as budgeted where no autocast casts it: fp32
    anywhere (autocast to float32 casts nothing), bf16 under FSDP or tensor/pipeline parallelism alone (autocast runs
    its fp32 ops, norms and losses, in fp32, which the budget's pure-precision layers do not). FSDP2's mixed
    precision keeps fp32 sharded parameters, the master copy, gathers them in bf16 for compute and keeps fp32
    gradients (``mixed_precision_reduce`` is float32 only): the workload's fp32 weights with bf16 compute and fp32
    gradients exactly; bf16 weights with an fp32 master copy with 4 B of parameters where the budget holds 2 + 4."""
    weights, compute, master = precision.weights, precision.compute or "bf16", precision.master_weights
    gradients = precision.gradients or weights
    if compute not in TITAN_DTYPES or weights not in TITAN_DTYPES:
        return f"{weights} weights, {compute} compute: torchtitan trains in bfloat16 or float32 (job_config.py:224)"
    if weights == compute == gradients and master is None:
        if autocast and weights != "fp32":
            return (f"pure {weights} on one data-parallel rank (one device, DDP): torchtitan runs the step under"
                    " torch.autocast (distributed/utils.py:233-238), whose fp32 ops (norms, losses) the budget's"
                    " pure-precision layers do not run")  # fmt: skip
        return (TITAN_DTYPES[weights], TITAN_DTYPES[weights]), []
    if compute != "bf16" or not (master == "fp32" or weights == gradients == "fp32"):
        return f"{weights} weights, {gradients} gradients, {compute} compute: no torchtitan dtype runs them"
    if not fsdp:
        return ("mixed precision without FSDP: torchtitan runs it under torch.autocast on one device or DDP, whose"
                " cached bf16 copies of the weights the budget does not hold, and not at all under tensor or pipeline"
                " parallelism alone (distributed/utils.py:218-238)")  # fmt: skip
    notes = []
    if master is not None:  # 4 B parameters + 4 B gradients for the budget's 2 + 4 (master) + 2 or 4
        gradients_note = "" if gradients == "fp32" else f", and fp32 gradients where the budget has {gradients}"
        notes.append(
            "FSDP2 mixed precision: the fp32 parameter shards are the master copy, gathered in bf16 for"
            f" compute (--training.mixed_precision_param bfloat16); no {weights} weights beside them"
            f"{gradients_note}: " + (LESS if gradients == "fp32" else "as many bytes as the budget's")
        )
    return ("float32", "bfloat16"), notes


def _titan_model(draft: _TitanDraft, release: TorchtitanRelease, workload: Workload) -> tuple[str, str] | None:
    """``--job.config_file``, ``--model.name``, ``--model.flavor`` and the tokenizer's (and checkpoint's) folder."""
    found = titan_flavor(release, workload.spec)
    if found is None:
        draft.refuse(f"no dense flavor of torchtitan {release.release}'s models builds this model's architecture")
        return None
    model, flavor = found
    config = titan_config(release, model, flavor)
    if config is None:
        draft.refuse(f"no train config of {model} in torchtitan {release.release} runs without a converter")
        return None
    draft.set("--job.config_file", f"./{config}")
    draft.set("--model.name", model)
    draft.set("--model.flavor", flavor)
    repo = workload.model.hf_repo() if workload.model is not None else None
    if repo:
        draft.set("--model.hf_assets_path", f"./assets/hf/{repo.rsplit('/', 1)[-1]}")
    return model, flavor


def _titan_shape(draft: _TitanDraft, workload: Workload, settings: Mapping[str, Any], plan: Plan) -> None:
    """Micro batch and sequence length: under a pipeline, ``local_batch_size`` holds one micro-batch per stage,
    each ``pipeline_parallel_microbatch_size`` sequences (distributed/pipeline_parallel.py: ``n_microbatches =
    local_batch_size // microbatch_size``), so 1F1B's first stage has as many in flight as the budget's."""
    training = workload.training
    assert training is not None
    if plan.pipeline > 1:
        draft.set("--training.local_batch_size", training.micro_batch_size * plan.pipeline)
        draft.set("--parallelism.pipeline_parallel_microbatch_size", training.micro_batch_size)
    else:
        draft.set("--training.local_batch_size", training.micro_batch_size)
    draft.set("--training.seq_len", training.sequence_length)
    divisor = plan.tensor * 2 * plan.context  # parallel_dims.py:252-259 seq_len_divisor = tp * (cp * 2)
    if training.sequence_length % divisor:
        draft.refuse(f"sequence length {training.sequence_length}: torchtitan needs a multiple of the tensor degree ×"
                     f" 2 × the context degree, {divisor} (models/llama3/infra/parallelize.py:62-66)")  # fmt: skip
    largest = settings.get("max_micro_batch_size")
    if largest is not None and largest > training.micro_batch_size:
        draft.notes.append(f"micro batch {training.micro_batch_size} as budgeted; up to {largest} fits this plan")
    draft.notes.append("the dataset is the config's (c4, from the Hugging Face hub); torchtitan packs its tokens into"
                       " rows of training.seq_len, so every step holds what the budget assumed")  # fmt: skip


def _titan_parallel(draft: _TitanDraft, release: TorchtitanRelease, model: str, workload: Workload, plan: Plan) -> bool:
    """The parallel degrees, FSDP's resharding and CPU offload; whether FSDP shards (more than one data-parallel
    shard). ZeRO-0 without tensor or pipeline parallelism is DDP (``data_parallel_replicate_degree``, exactly the
    budget's); any other data parallelism is FSDP2 (parallelize.py:112-145), ZeRO-3 resharding after every forward
    (``always``; ``default`` keeps a pipeline stage's layers gathered, parallelize.py:284-292) and ZeRO-2 never
    (``never``), the stages ``budgets.engine.frameworks``'s torchtitan profile runs; a plan of ZeRO-0 or 1 with tensor
    or pipeline parallelism runs as ZeRO-3, sharded further, holding less."""
    training = workload.training
    assert training is not None
    spec = workload.spec
    if plan.pipeline > 1 and not release.models[model]["pipelining"]:
        draft.refuse(f"pipeline parallelism: torchtitan {release.release}'s {model} has no pipelining_fn")
    if spec.num_layers % plan.pipeline:
        draft.refuse(f"{spec.num_layers} layers over {plan.pipeline} stages: torchtitan splits them evenly (each stage"
                     " one more for the first layers, pipeline_parallel.py generate_llm_fqn_per_model_part), not as"
                     " the budget's stages of ceil(layers / stages)")  # fmt: skip
    if spec.num_kv_heads % plan.tensor or spec.num_attention_heads % plan.tensor:
        draft.refuse(f"tensor degree {plan.tensor}: torchtitan shards the {spec.num_kv_heads} KV heads, it does not"
                     " replicate them")  # fmt: skip
    ddp = plan.replicas > 1 and plan.zero_stage == 0 and plan.devices_per_replica == 1
    # FSDP shards over data × context (parallel_dims.py:221-222: fsdp_enabled = dp_shard or cp)
    fsdp = (plan.replicas > 1 and not ddp) or plan.context > 1
    draft.set("--parallelism.data_parallel_replicate_degree", plan.replicas if ddp else 1)
    draft.set("--parallelism.data_parallel_shard_degree", plan.replicas if fsdp else 1)
    draft.set("--parallelism.tensor_parallel_degree", plan.tensor)
    draft.set("--parallelism.pipeline_parallel_degree", plan.pipeline)
    draft.set("--parallelism.context_parallel_degree", plan.context)
    if plan.pipeline > 1:
        draft.set("--parallelism.pipeline_parallel_schedule", "1F1B")
        draft.set("--parallelism.pipeline_parallel_first_stage_less_layers", 0)
        draft.set("--parallelism.pipeline_parallel_last_stage_less_layers", 0)
    if fsdp and plan.pipeline > 1:
        # the default keeps each stage gathered under a pipeline (parallelize.py:289-292), as the budget holds it
        # (budgets/engine/training_stage.py `_pipelined_fsdp`), whatever the plan's ZeRO stage
        draft.set("--parallelism.fsdp_reshard_after_forward", "default")
        draft.notes.append(
            "pipeline stages under FSDP2 keep their parameters gathered and their gradients unsharded, in fp32, until"
            " the last micro-batch's backward (fsdp_reshard_after_forward default; torch.distributed.pipelining turns"
            " gradient sync off between micro-batches): budgeted"
        )
    elif fsdp:
        draft.set("--parallelism.fsdp_reshard_after_forward", "never" if plan.zero_stage == 2 else "always")
    if fsdp and plan.zero_stage < 2:
        how = "keeping each stage gathered" if plan.pipeline > 1 else "resharding after every forward (ZeRO-3)"
        draft.notes.append(f"ZeRO-{plan.zero_stage}: torchtitan shards with FSDP2, {how}, " + LESS)
    if plan.tensor > 1:
        draft.notes.append(
            "tensor parallelism with sequence parallelism (parallelize.py apply_tp: the norms and the"
            " residual stream sharded over the sequence, the loss over the vocabulary): " + LESS
        )
    if training.cpu_offload == "optimizer":
        draft.refuse("optimizer-only CPU offload: torchtitan's enable_cpu_offload moves the parameters too, more host"
                     " memory than the budget's")  # fmt: skip
    if training.cpu_offload == "parameters" and not fsdp:
        draft.refuse("CPU offload runs on FSDP2, which one data-parallel shard does not apply (parallelize.py:116)")
    draft.switch("--training.enable_cpu_offload", training.cpu_offload == "parameters")
    return fsdp


def _titan_memory(draft: _TitanDraft, workload: Workload, plan: Plan) -> None:
    """Recomputation, torch.compile (the layers only: the budget's loss is eager), the loss and the attention."""
    training, runtime = workload.training, workload.runtime
    assert training is not None
    recompute = plan.recompute or training.activation_checkpointing
    mode, option = TITAN_RECOMPUTE[recompute]
    draft.set("--activation_checkpoint.mode", mode)
    if option is not None:
        draft.set("--activation_checkpoint.selective_ac_option", option)
    if recompute == "selective":
        draft.notes.append("activation_checkpointing selective: torchtitan has no attention-only recomputation; it"
                           " recomputes whole layers (--activation_checkpoint.mode full), " + LESS)  # fmt: skip
    if training.float8_linear:
        # torchao Float8 linears, tensorwise scaling, FSDP's all-gather in float8 (components/quantization/float8.py:
        # 86-96); `switch` writes a bool flag alone
        draft.set("--model.converters", "float8")
        draft.switch("--quantize.linear.float8.enable_fsdp_float8_all_gather", True)
        draft.switch("--quantize.linear.float8.precompute_float8_dynamic_scale_for_fsdp", True)
        draft.notes.append("float8 linears need torchao (pip install torchao) and an sm_89 or newer GPU (float8 tensor"
                           " cores)")  # fmt: skip
    draft.switch("--compile.enable", runtime.compile)
    if runtime.compile:
        draft.set("--compile.components", "model")
    if training.loss_chunks > 1:
        draft.refuse(f"loss_chunks {training.loss_chunks}: torchtitan's cross-entropy takes the whole logits"
                     " (components/loss.py), more than the budget's chunks")  # fmt: skip
    if runtime.attention == "eager":
        draft.notes.append("attention runs in torch SDPA (models/attention.py), not eager: no score matrix, " + LESS)
    elif runtime.attention == "flash":
        draft.notes.append("attention runs in torch SDPA, whose flash kernel is the one it picks for bf16 on CUDA"
                           " (its output is in the per-op save list, parallelize.py:33-44)")  # fmt: skip


def _titan_optimizer(draft: _TitanDraft, workload: Workload) -> None:
    """AdamW (the only optimizer of the workload's that torchtitan builds) and its step's implementation."""
    training = workload.training
    assert training is not None
    if training.optimizer != "adamw":
        draft.refuse(f"optimizer {training.optimizer}: torchtitan builds Adam and AdamW only"
                     " (components/optimizer.py:305-310)")  # fmt: skip
    draft.set("--optimizer.name", "AdamW")
    implementation = TITAN_IMPLEMENTATIONS.get(training.optimizer_impl or "", TITAN_DEFAULT_IMPLEMENTATION)
    draft.set("--optimizer.implementation", implementation)
    if training.optimizer_impl is None:
        draft.notes.append("--optimizer.implementation foreach: torch's AdamW step on CUDA, which the budget assumed"
                           " (torchtitan's own default is fused)")  # fmt: skip
    draft.switch("--optimizer.early_step_in_backward", False)


def _titan_notes(release: TorchtitanRelease, workload: Workload) -> list[str]:
    """Where the command runs and what it loads."""
    commit = release.source["git"]["commit"][:7]
    notes = [f"run from a checkout of pytorch/torchtitan at v{release.release} ({commit}), pip install"
             f" torchtitan=={release.release}: the train configs are not in PyPI's package"]  # fmt: skip
    repo = workload.model.hf_repo() if workload.model is not None else None
    if repo:
        name = repo.rsplit("/", 1)[-1]
        notes.append(
            f"first: python scripts/download_hf_assets.py --repo_id {repo} --assets tokenizer safetensors"
            f" index config; to start from its weights add --checkpoint.enable --checkpoint.initial_load_path"
            f" ./assets/hf/{name} --checkpoint.initial_load_in_hf (else torchtitan initializes the model)"
        )
    return notes


def torchtitan_command(
    workload: Workload, settings: Mapping[str, Any], plan: Plan
) -> tuple[TitanCommand, list[str]] | str:
    """``torchrun … -m torchtitan.train`` for the plan and its notes, or why there is none."""
    training = workload.training
    assert training is not None
    release = torchtitan_release(TORCHTITAN_RELEASE)
    if workload.runtime.device != "cuda":
        return "torchtitan trains on accelerators only (tools/utils.py: device_type falls back to cuda)"
    if training.method != "full":
        return f"{training.method}: torchtitan {release.release} trains every parameter, it has no adapters"
    draft = _TitanDraft()
    found = _titan_model(draft, release, workload)
    if found is None:
        return draft.refusal or ""
    _titan_shape(draft, workload, settings, plan)
    fsdp = _titan_parallel(draft, release, found[0], workload, plan)
    precision = titan_precision(workload.precision, fsdp, autocast=not fsdp and plan.devices_per_replica == 1)
    if isinstance(precision, str):
        return precision
    (dtype, param), precision_notes = precision
    draft.set("--training.dtype", dtype)
    draft.set("--training.mixed_precision_param", param)
    draft.set("--training.mixed_precision_reduce", "float32")
    draft.notes += precision_notes
    _titan_memory(draft, workload, plan)
    _titan_optimizer(draft, workload)
    draft.switch("--profiling.enable_profiling", False)
    draft.switch("--validation.enable", False)
    if draft.refusal is not None:
        return draft.refusal
    env = ((ALLOCATOR, EXPANDABLE),) if workload.runtime.expandable_segments else ()
    placed = torchrun_flags(plan.devices, settings)
    if isinstance(placed, str):
        return placed
    torchrun, placement = placed
    command = TitanCommand(release.module, tuple(draft.args), torchrun, env)
    return command, [*_titan_notes(release, workload), *placement, *draft.notes]


def torchtitan_launch(workload: Workload, settings: Mapping[str, Any], plan: Plan) -> Launch | str:
    """The checked launch of ``torchtitan_command``, or why there is none."""
    found = torchtitan_command(workload, settings, plan)
    if isinstance(found, str):
        return found
    command, notes = found
    release = torchtitan_release(TORCHTITAN_RELEASE)
    return _checked("torchtitan", release.release, command.argv, notes, release.problems(command.argv))


def _titan_recompute(mode: str, option: str) -> str:
    """The workload's ``activation_checkpointing`` a mode runs (``TITAN_RECOMPUTE`` read backwards)."""
    given = (mode, option if mode == "selective" else None)
    found = next((name for name, pair in TITAN_RECOMPUTE.items() if pair == given), None)
    if found is None:
        raise LaunchError(f"--activation_checkpoint.mode {mode} {option}: no recomputation the budget models")
    return found


def _titan_read_precision(workload: Workload, config: Mapping[str, Any], fsdp: bool, autocast: bool) -> PrecisionSpec:
    """The precision a command runs: the workload's where it runs as these flags (the flags cannot tell bf16 weights
    with an fp32 master copy from fp32 weights), else what the flags say."""
    flags = (config["training.dtype"], config["training.mixed_precision_param"])
    own = titan_precision(workload.precision, fsdp, autocast)
    if not isinstance(own, str) and own[0] == flags:
        return workload.precision
    dtype = {value: name for name, value in TITAN_DTYPES.items()}[flags[0]]
    compute = "bf16" if fsdp and flags == ("float32", "bfloat16") else dtype
    update = {"weights": dtype, "compute": compute, "kv_cache": compute, "gradients": dtype, "master_weights": None}
    return workload.precision.model_copy(update=update)


def workload_from_torchtitan(argv: Sequence[str], workload: Workload) -> tuple[Workload, Plan]:
    """The workload and plan a ``torchrun -m torchtitan.train`` command launches: ``workload`` (its model) with every
    setting the merged config (the command over its train config) sets. What a budget of the run reads, read back."""
    release = torchtitan_release(TORCHTITAN_RELEASE)
    command = TitanCommand.parse(argv)
    config = release.config(command)
    training = workload.training
    assert training is not None
    tensor, pipeline = config["parallelism.tensor_parallel_degree"], config["parallelism.pipeline_parallel_degree"]
    replicate, shard = (
        config["parallelism.data_parallel_replicate_degree"],
        config["parallelism.data_parallel_shard_degree"],
    )
    context = config["parallelism.context_parallel_degree"]
    fsdp = shard > 1 or context > 1
    local = config["training.local_batch_size"]
    implementation = config["optimizer.implementation"]
    own = TITAN_IMPLEMENTATIONS.get(training.optimizer_impl or "", TITAN_DEFAULT_IMPLEMENTATION)
    impl = (
        training.optimizer_impl
        if own == implementation
        else {v: k for k, v in TITAN_IMPLEMENTATIONS.items()}[implementation]
    )
    trained = training.model_copy(
        update={
            "method": "full",
            "micro_batch_size": config["parallelism.pipeline_parallel_microbatch_size"] if pipeline > 1 else local,
            "sequence_length": config["training.seq_len"],
            "activation_checkpointing": _titan_recompute(
                config["activation_checkpoint.mode"], config["activation_checkpoint.selective_ac_option"]
            ),
            "optimizer": {"AdamW": "adamw"}[config["optimizer.name"]],
            "optimizer_impl": impl,
            "optimizer_in_backward": False,
            "cpu_offload": "parameters" if config["training.enable_cpu_offload"] else "none",
            "float8_linear": config["model.converters"] == ["float8"]
            and config["quantize.linear.float8.enable_fsdp_float8_all_gather"],
        }
    )
    precision = _titan_read_precision(workload, config, fsdp, autocast=not fsdp and tensor * pipeline == 1)
    runtime = workload.runtime.model_copy(
        update={
            "compile": config["compile.enable"],
            "expandable_segments": dict(command.env).get(ALLOCATOR) == EXPANDABLE,
            "attention": "sdpa" if workload.runtime.attention == "eager" else workload.runtime.attention,
        }
    )
    update = {"training": trained, "precision": precision, "runtime": runtime}
    # "default" under a pipeline keeps each stage gathered over sharded parameters: ZeRO-3's budget, which
    # `_pipelined_fsdp` then gathers per stage
    zero = (2 if config["parallelism.fsdp_reshard_after_forward"] == "never" else 3) if fsdp else 0
    return workload.model_copy(update=update), Plan(tensor, pipeline, replicate * shard, zero, context=context)
