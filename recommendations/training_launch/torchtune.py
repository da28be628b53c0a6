"""torchtune's training launches (``recommendations.training_launch``).

A torchtune workload's ``fits`` or ``tight`` entry gets ``tune run [--nproc_per_node N] <recipe> --config <config>
key=value …`` (over several nodes ``--nnodes``, a node's processes and torchrun's c10d rendezvous at the first node,
``common.torchrun_flags``; torchtune/_cli/run.py passes torchrun's flags through) (torchtune 0.6.1, the release
``budgets.engine.frameworks`` profiles): the recipe by method and device
count, a config the release registers for that recipe whose model builder has the workload's architecture, and an
override for every setting the budget assumed: micro batch (``batch_size``), sequence length
(``tokenizer.max_seq_len``), recomputation, activation offloading, optimizer and its step, optimizer in backward,
loss chunks, precision, LoRA rank, targets and dropout, QLoRA's quantized base, FSDP sharding and CPU offload, tensor
parallelism, torch.compile, the allocator's expandable segments and the device. What the recipes cannot express is
either replaced by what holds less memory (named in the launch's notes, each ending in ``LESS``: full recomputation
for a selective one, FSDP's full sharding for ZeRO-0 to 2, no fp32 master copy), or, where the run would need more
than the budget, refused with the reason (``no_training_launch``).

Every command is checked against the release (``fixtures/engines/torchtune-0.6.1.json``, by
``tools/engine_args/extract_torchtune.py`` from PyPI's wheel, its sha256 in the fixture): ``tune run`` merges any
``key=value`` into the config (torchtune/config/_utils.py:112-193, ``OmegaConf.merge``), so a key that neither the
config nor its recipe has is silently ignored; the check refuses it (:class:`TorchtuneRelease.problems`), so a
renamed key fails a test here rather than a run. ``workload_from_torchtune`` reads a command back into the workload and
plan it launches (the round trip ``tests/recommendations/test_training_launch.py`` checks reproduces the budget).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from budgets.engine import Workload
from budgets.engine.components.training import PROJECTIONS, adapted_projections
from budgets.engine.frameworks import framework_profile
from budgets.engine.models.spec import ModelSpec
from budgets.engine.schema import LoraSpec, TrainingSpec

from ..launch import FIXTURES, Launch, LaunchError
from ..plans import Plan
from .common import (
    ALLOCATOR,
    EXPANDABLE,
    FOUR_BIT,
    LESS,
    _checked,
    _Draft,
    _flag,
    split_env,
    torchrun_flags,
    torchrun_processes,
)

#: The torchtune release whose recipes and configs commands are checked against: the framework profile's.
TORCHTUNE_RELEASE = framework_profile("torchtune").release or ""


#: torchtune's names of the attention projections LoRA adapts (torchtune/modules/peft/_utils.py:14
#: ``LORA_ATTN_MODULES``; the fixture's ``lora_attn_modules``), by the workload's (peft's) names.
TUNE_ATTENTION = {"q_proj": "q_proj", "k_proj": "k_proj", "v_proj": "v_proj", "o_proj": "output_proj"}
#: The MLP projections ``apply_lora_to_mlp`` adapts, all three or none (the component builders' ``w1``/``w2``/``w3``,
#: e.g. torchtune/models/llama3_1/_component_builders.py ``lora_llama3_1_mlp``).
TUNE_MLP = frozenset(PROJECTIONS) - set(TUNE_ATTENTION)
#: The optimizer class each of the workload's optimizers is (torch.optim; bitsandbytes.optim, which the release's
#: configs name for the 8-bit and paged ones), and the keyword arguments it needs beyond the defaults.
TUNE_OPTIMIZERS: dict[str, tuple[str, dict[str, object]]] = {
    "adamw": ("torch.optim.AdamW", {}),
    "adamw_8bit": ("bitsandbytes.optim.AdamW8bit", {}),
    "paged_adamw_8bit": ("bitsandbytes.optim.PagedAdamW8bit", {}),
    "sgd": ("torch.optim.SGD", {}),
    "sgd_momentum": ("torch.optim.SGD", {"momentum": 0.9}),
    "adafactor": ("torch.optim.Adafactor", {}),
    "lion": ("bitsandbytes.optim.Lion", {}),
}
#: The one keyword every optimizer class above takes: a config's other optimizer arguments (AdamW's ``fused``,
#: ``weight_decay``) are removed (``~optimizer.<key>``) when the command names another class.
KEPT_OPTIMIZER_KWARGS = frozenset({"lr"})
#: torch.optim.AdamW's ``fused`` for the workload's ``optimizer_impl``: ``fused=False`` leaves torch to pick the
#: foreach step on CUDA (torch optim/optimizer.py ``_default_to_fused_or_foreach``, the schema's reading); the
#: for-loop step needs ``foreach=False``, which no config of the release passes (refused).
TUNE_FUSED = {"fused": True, "foreach": False}
#: The architecture numbers a torchtune model builder passes to its component builder, by the ModelSpec field.
TUNE_ARCHITECTURE = {
    "vocab_size": "vocab_size",
    "num_layers": "num_layers",
    "num_heads": "num_attention_heads",
    "num_kv_heads": "num_kv_heads",
    "embed_dim": "hidden_size",
    "intermediate_dim": "intermediate_size",
}
#: What a recipe's checkpointing names: full recomputation is ``enable_activation_checkpointing``; the recipes'
#: selective mode is per layer, not per op (torchtune/training/activations.py:31-58), and Megatron's attention-only
#: recomputation is not there at all.
RECOMPUTE = {"none": False, "full": True, "selective": True, "selective_op": True}


@dataclass(frozen=True, slots=True)
class TuneCommand:
    """``[env VAR=value …] tune run [torchrun flags] <recipe> --config <config> [~key …] [key=value …]``."""

    recipe: str
    config: str
    overrides: tuple[tuple[str, str], ...]
    removals: tuple[str, ...] = ()
    torchrun: tuple[tuple[str, str], ...] = ()
    env: tuple[tuple[str, str], ...] = ()

    @property
    def argv(self) -> tuple[str, ...]:
        env = ("env", *(f"{name}={value}" for name, value in self.env)) if self.env else ()
        torchrun = tuple(item for pair in self.torchrun for item in pair)
        removals = tuple(f"~{key}" for key in self.removals)
        overrides = tuple(f"{key}={value}" for key, value in self.overrides)
        return (*env, "tune", "run", *torchrun, self.recipe, "--config", self.config, *removals, *overrides)

    @property
    def values(self) -> dict[str, str]:
        return dict(self.overrides)

    @property
    def processes(self) -> int:
        """The processes it starts over all nodes."""
        return torchrun_processes(self.torchrun)

    @classmethod
    def parse(cls, argv: Sequence[str]) -> TuneCommand:
        """The parts of a command; :class:`LaunchError` for one that is not ``tune run`` in this shape."""
        env, rest = split_env(argv)
        if rest[:2] != ["tune", "run"]:
            raise LaunchError(f"the command is tune run, not {' '.join(rest[:2])}")
        rest = rest[2:]
        torchrun = []
        while len(rest) > 1 and rest[0].startswith("-"):
            torchrun.append((rest.pop(0), rest.pop(0)))
        if len(rest) < 3 or rest[1] != "--config":
            raise LaunchError("tune run needs <recipe> --config <config>")
        recipe, config, args = rest[0], rest[2], rest[3:]
        removals = tuple(arg[1:] for arg in args if arg.startswith("~"))
        overrides = []
        for arg in args:
            if not arg.startswith("~"):
                parts = arg.split("=")  # torchtune/config/_utils.py:167: exactly one "="
                if len(parts) != 2:
                    raise LaunchError(f"{arg}: an override is key=value (torchtune/config/_utils.py:167)")
                overrides.append((parts[0], parts[1]))
        return cls(recipe, config, tuple(overrides), removals, tuple(torchrun), tuple(env))


@dataclass(frozen=True, slots=True)
class TorchtuneRelease:
    """A torchtune release's fine-tuning recipes, their configs and the components those name, as extracted from
    its wheel (``tools/engine_args/extract_torchtune.py``)."""

    release: str
    torchrun_flags: frozenset[str]
    dtypes: tuple[str, ...]
    lora_attn_modules: tuple[str, ...]
    recipes: Mapping[str, Mapping[str, Any]]
    configs: Mapping[str, Mapping[str, Any]]
    components: Mapping[str, Mapping[str, Any]]
    external_kwargs: Mapping[str, tuple[str, ...]]
    source: Mapping[str, Any] = field(default_factory=dict)

    def problems(self, argv: Sequence[str]) -> list[str]:
        """What this release would refuse or silently ignore in ``argv``."""
        try:
            command = TuneCommand.parse(argv)
        except LaunchError as exc:
            return [str(exc)]
        recipe = self.recipes.get(command.recipe)
        if recipe is None:
            return [f"{command.recipe}: not a fine-tuning recipe of torchtune {self.release}"]
        found = [f"{flag}: not a torchrun flag" for flag, _ in command.torchrun if flag not in self.torchrun_flags]
        if command.torchrun and not recipe["supports_distributed"]:
            found.append(f"{command.recipe} does not run distributed (torchtune/_cli/run.py: torchrun flags refused)")
        if command.config not in recipe["configs"]:
            return [*found, f"{command.config}: not a config of {command.recipe} in torchtune {self.release}"]
        config = self.configs[command.config]
        found += [f"~{key}: not a key of {command.config} to remove" for key in command.removals
                  if key not in config["keys"] or key.endswith("_component_")]  # fmt: skip
        sections = self.sections(command)
        for key, value in command.overrides:
            if not self.known(key, command.recipe, command.config, sections):
                found.append(f"{key}: neither a key of {command.config} nor read by {command.recipe} (torchtune"
                             f" {self.release}): it would be ignored")  # fmt: skip
            found += self._value_problems(key, value, command.recipe)
        return found

    def sections(self, command: TuneCommand) -> dict[str, str | None]:
        """Each config section's component as the command leaves it (its ``<section>._component_`` or the shorthand
        ``<section>=…``, torchtune/config/_utils.py:172-175; else the config's)."""
        config = self.configs[command.config]
        found: dict[str, str | None] = dict(config["components"])
        for key, value in command.overrides:
            if key.endswith("._component_"):
                found[key.removesuffix("._component_")] = value
            elif f"{key}._component_" in config["keys"]:
                found[key] = value
        return found

    def known(self, key: str, recipe: str, config: str, sections: Mapping[str, str | None]) -> bool:
        """Whether the run reads ``key``: a key of the config, one the recipe reads, a ``_component_`` of a section the
        recipe instantiates, or a keyword argument of the section's component."""
        if key in self.configs[config]["keys"] or key in self.recipes[recipe]["reads"]:
            return True
        section, _, kwarg = key.partition(".")
        if kwarg == "_component_":
            return section in self.recipes[recipe]["reads"]
        component = sections.get(section) or ""
        if component in self.components:
            entry = self.components[component]
            return kwarg in entry["parameters"] and kwarg not in entry.get("bound", {})
        return kwarg in self.external_kwargs.get(component, ())

    def _value_problems(self, key: str, value: str, recipe: str) -> list[str]:
        if key == "dtype" and (value not in self.dtypes or (value == "fp16" and self.recipes[recipe]["refuses_fp16"])):
            allowed = [d for d in self.dtypes if d != "fp16" or not self.recipes[recipe]["refuses_fp16"]]
            return [f"dtype={value}: not one of {', '.join(allowed)} ({recipe})"]
        if key.endswith("_component_") and value.startswith("torchtune.") and value not in self.components:
            return [f"{key}={value}: no such component in torchtune {self.release}"]
        if key == "model.lora_attn_modules":
            names = [name for name in value.strip("[]").split(",") if name]
            return [f"{key}: {name} is not one of {', '.join(self.lora_attn_modules)}"
                    for name in names if name not in self.lora_attn_modules]  # fmt: skip
        return []

    def builder(self, config: str) -> Mapping[str, Any]:
        return self.components[self.configs[config]["components"]["model"]]


@cache
def torchtune_release(release: str) -> TorchtuneRelease:
    data = json.loads((FIXTURES / f"torchtune-{release}.json").read_text())
    return TorchtuneRelease(
        release=data["release"],
        torchrun_flags=frozenset(data["torchrun_flags"]),
        dtypes=tuple(data["dtypes"]),
        lora_attn_modules=tuple(data["lora_attn_modules"]),
        recipes=data["recipes"],
        configs=data["configs"],
        components=data["components"],
        external_kwargs={name: tuple(kwargs) for name, kwargs in data["external_kwargs"].items()},
        source=data["source"],
    )


def tune_recipe(method: str, plan: Plan) -> str:
    """The recipe that runs ``method`` on the plan's devices (full or LoRA/QLoRA; one device or torchrun)."""
    kind = "full" if method == "full" else "lora"
    return f"{kind}_finetune_{'single_device' if plan.devices == 1 else 'distributed'}"


def builds(builder: Mapping[str, Any], spec: ModelSpec) -> bool:
    """Whether a model builder's architecture (its constants, ``TUNE_ARCHITECTURE``; head width and tied embeddings
    where it names them, else its component builder's defaults: heads of ``embed_dim / num_heads``, untied) is the
    workload's model. A dense, gated MLP only (the decoders torchtune builds)."""
    numbers = builder.get("architecture", {})
    if spec.num_experts != 1 or spec.mlp != "gated" or not numbers:
        return False
    if any(numbers.get(name) != getattr(spec, field) for name, field in TUNE_ARCHITECTURE.items()):
        return False
    head_dim = numbers.get("head_dim", numbers["embed_dim"] // numbers["num_heads"])
    return head_dim == spec.head_dim and bool(numbers.get("tie_word_embeddings", False)) == spec.tie_word_embeddings


def _shared(a: str, b: str) -> int:
    """How many characters ``a`` and ``b`` begin with alike."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def tune_config(release: TorchtuneRelease, recipe: str, workload: Workload) -> str | None:
    """The config of ``recipe`` whose model builder builds the workload's model and covers its sequences (the
    rotary cache holds ``max_seq_len`` positions): first one of the model's own positions (Llama 3.1's 131072, not
    Llama 3's 8192 of the same numbers), then the one whose checkpoint (``tune download``) is the workload's, else the
    closest by name (Qwen2.5-0.5B's config, not Qwen2-0.5B's), then by config name."""
    assert workload.training is not None
    spec, length = workload.spec, workload.training.sequence_length
    builders = {name: release.builder(name) for name in release.recipes[recipe]["configs"]}
    fitting = [name for name, b in builders.items() if builds(b, spec) and length <= _positions(b, length)]
    repo = (workload.model.hf_repo() if workload.model is not None else None) or ""

    def distance(name: str) -> tuple[bool, int, str]:
        download = release.configs[name]["download"] or ""
        other = _positions(release.builder(name), spec.max_position_embeddings) != spec.max_position_embeddings
        return other, -_shared(download.lower(), repo.lower()) - (download == repo), name

    return min(fitting, key=distance, default=None)


def _positions(builder: Mapping[str, Any], default: int) -> int:
    """The positions a builder's rotary embedding covers (its ``max_seq_len``; ``default`` where it names none)."""
    return int(builder["architecture"].get("max_seq_len") or default)


def _shape(draft: _Draft, workload: Workload, settings: Mapping[str, Any]) -> None:
    """Device, micro batch and sequence length: the shape of the budgeted step."""
    training = workload.training
    assert training is not None
    draft.set("device", workload.runtime.device)
    draft.set("batch_size", training.micro_batch_size)
    draft.set("tokenizer.max_seq_len", training.sequence_length)
    largest = settings.get("max_micro_batch_size")
    if largest is not None and largest > training.micro_batch_size:
        draft.notes.append(f"batch_size={training.micro_batch_size} as budgeted; up to {largest} fits this plan")
    draft.notes.append("the dataset is the config's; batches are padded to their longest example, so a step holds"
                       " what the budget assumed when one reaches tokenizer.max_seq_len")  # fmt: skip


def _precision(draft: _Draft, release: TorchtuneRelease, recipe: str, workload: Workload) -> None:
    """``dtype``: torchtune trains in one dtype, "all activations, gradients and optimizer states"
    (recipes/full_finetune_distributed.py:78); QLoRA's base weights are torchao's NF4."""
    precision, training = workload.precision, workload.training
    assert training is not None and precision.compute is not None
    dtype = precision.compute
    refused = ("fp16",) if release.recipes[recipe]["refuses_fp16"] else ()
    if dtype not in release.dtypes or dtype in refused:
        allowed = ", ".join(d for d in release.dtypes if d not in refused)
        draft.refuse(f"{dtype} compute: {recipe} of torchtune {release.release} trains in {allowed} (it refuses fp16)")
        return
    draft.set("dtype", dtype)
    if training.method == "qlora":
        if precision.weights not in FOUR_BIT:
            draft.refuse(f"QLoRA with {precision.weights} weights: torchtune quantizes the base to NF4")
        draft.notes.append(f"the base weights ({precision.weights} in the budget) are torchao's NF4"
                           " (quantize_base=True, torchtune/modules/peft/lora.py to_nf4: blocks of 64, their scales"
                           " quantized per 256), " + LESS)  # fmt: skip
    elif precision.weights != dtype:
        draft.refuse(f"{precision.weights} weights with {dtype} compute: torchtune loads the weights in dtype={dtype}")
    if precision.master_weights is not None:
        draft.notes.append(f"no {precision.master_weights} master copy: torchtune keeps the parameters and optimizer"
                           f" states in {dtype}, " + LESS)  # fmt: skip
    if precision.gradients != dtype and training.method == "full":
        draft.notes.append(f"gradients in {dtype}, not {precision.gradients}: " + LESS)


def _memory(draft: _Draft, release: TorchtuneRelease, recipe: str, config: str, workload: Workload, plan: Plan) -> None:
    """Recomputation, activation offloading, the loss chunks, torch.compile and the allocator."""
    training, runtime = workload.training, workload.runtime
    assert training is not None
    recompute = plan.recompute or training.activation_checkpointing
    draft.set("enable_activation_checkpointing", RECOMPUTE[recompute])
    if recompute in ("selective", "selective_op"):
        draft.notes.append(f"activation_checkpointing {recompute}: {recipe} recomputes whole layers"
                           " (enable_activation_checkpointing), saving " + LESS)  # fmt: skip
    if training.activation_offloading and runtime.device != "cuda":
        draft.refuse("activation offloading runs on CUDA only (recipes/full_finetune_distributed.py:208)")
    draft.set("enable_activation_offloading", training.activation_offloading)
    loss = release.configs[config]["components"].get("loss")
    if "num_output_chunks" not in release.components.get(loss, {}).get("parameters", ()):
        draft.refuse(f"the config's loss {loss} takes no num_output_chunks")
    draft.set("loss.num_output_chunks", training.loss_chunks)
    draft.set("compile", runtime.compile)
    if runtime.attention == "eager":
        draft.notes.append("attention runs in SDPA (torchtune/modules/attention_utils.py:185), not eager: no score"
                           " matrix, " + LESS)  # fmt: skip


def _optimizer(
    draft: _Draft, release: TorchtuneRelease, recipe: str, config: str, workload: Workload, plan: Plan
) -> None:
    """The optimizer class, its step and, for full fine-tuning, ``optimizer_in_bwd``."""
    training = workload.training
    assert training is not None
    component, kwargs = TUNE_OPTIMIZERS[training.optimizer]
    given = release.configs[config]["components"].get("optimizer")
    keys = {key.split(".", 1)[1] for key in release.configs[config]["keys"] if key.startswith("optimizer.")}
    chosen = dict(kwargs)
    if training.optimizer == "adamw" and training.optimizer_impl in TUNE_FUSED:
        chosen["fused"] = TUNE_FUSED[training.optimizer_impl]
    elif training.optimizer == "adamw" and training.optimizer_impl == "for_loop":
        draft.refuse("the for-loop AdamW step needs foreach=False, which no torchtune config passes")
    if plan.tensor > 1 and component == "torch.optim.AdamW":
        if chosen.get("fused"):
            draft.refuse("tensor parallelism refuses a fused optimizer (recipes/full_finetune_distributed.py:161)")
        chosen["fused"] = False
    for key in chosen.keys() - keys - set(release.external_kwargs.get(component, ())):
        draft.refuse(f"{component} with {key}: no config of torchtune {release.release} passes it {key}, a key the"
                     " check cannot vouch for")  # fmt: skip
    if component != given:
        draft.set("optimizer._component_", component)
        draft.removals += [f"optimizer.{key}" for key in sorted(keys - KEPT_OPTIMIZER_KWARGS - {"_component_"})
                           if key not in chosen]  # fmt: skip
    for key, value in chosen.items():
        draft.set(f"optimizer.{key}", value)
    if training.method == "full":
        draft.set("optimizer_in_bwd", training.optimizer_in_backward)
        if training.optimizer_in_backward:  # no accumulation, no clipping (full_finetune_distributed.py:186-196)
            draft.set("gradient_accumulation_steps", 1)
            draft.set("clip_grad_norm", None)


def _lora(draft: _Draft, builder: Mapping[str, Any], workload: Workload) -> None:
    """The adapters: rank, dropout, the projections they adapt (the MLP's all or none), QLoRA's quantized base."""
    training = workload.training
    assert training is not None
    if training.method == "full":
        return
    targets = adapted_projections(list(training.lora.target_modules))
    mlp = targets & TUNE_MLP
    if mlp and mlp != TUNE_MLP:
        draft.refuse(f"LoRA on {', '.join(sorted(mlp))} alone: torchtune adapts the MLP's three projections or none")
    draft.set("model.lora_attn_modules", [TUNE_ATTENTION[name] for name in TUNE_ATTENTION if name in targets])
    draft.set("model.apply_lora_to_mlp", bool(mlp))
    draft.set("model.apply_lora_to_output", False)
    draft.set("model.lora_rank", training.lora.rank)
    draft.set("model.lora_dropout", training.lora.dropout)
    draft.set("model.quantize_base", training.method == "qlora")
    if "use_dora" in builder["parameters"]:  # plain LoRA, also under a DoRA config (llama3/8B_dora*.yaml)
        draft.set("model.use_dora", False)


def _sharding(
    draft: _Draft, release: TorchtuneRelease, recipe: str, config: str, workload: Workload, plan: Plan
) -> None:
    """FSDP2 over the data-parallel ranks, its CPU offload, and tensor parallelism with the plan the release pairs
    with the model's family.

    The recipes shard whenever there is more than one data-parallel rank (full_finetune_distributed.py:583-596), so a
    plan of ZeRO-0 to 2 runs sharded: resharding after the forward (ZeRO-3) holds the least, one layer's parameters
    gathered; without it (``fsdp_reshard_after_forward=False``) every layer's gathered parameters stay until the
    backward beside their shards, more than ZeRO-2's one copy."""
    training = workload.training
    assert training is not None
    reads = release.recipes[recipe]["reads"]
    if training.cpu_offload == "optimizer":
        draft.refuse("optimizer-only CPU offload: torchtune's fsdp_cpu_offload moves the parameters too, more host"
                     " memory than the budget's")  # fmt: skip
    if training.cpu_offload == "parameters" and plan.replicas == 1:
        draft.refuse("CPU offload runs on FSDP, which one device does not shard (full_finetune_distributed.py:583)")
    if plan.devices == 1:
        return
    draft.set("fsdp_cpu_offload", training.cpu_offload == "parameters")
    draft.set("fsdp_reshard_after_forward", True)
    if plan.zero_stage < 3 and plan.replicas > 1:
        draft.notes.append(f"ZeRO-{plan.zero_stage}: torchtune shards with FSDP2 only, here resharding after the"
                           " forward (ZeRO-3), " + LESS)  # fmt: skip
    if plan.tensor > 1:
        family = _family(release.configs[config])
        plans = {c["components"]["tensor_parallel_plan"] for c in release.configs.values()
                 if "tensor_parallel_plan" in c["components"] and _family(c) == family}  # fmt: skip
        if "tensor_parallel_dim" not in reads or len(plans) != 1:
            draft.refuse(f"tensor parallelism: {recipe} has none for {family} in torchtune {release.release}")
            return
        draft.set("tensor_parallel_dim", plan.tensor)
        draft.set("tensor_parallel_plan._component_", plans.pop())


def _family(config: Mapping[str, Any]) -> str:
    """The model package a config's builder is in (``torchtune.models.llama3_1``)."""
    return str(config["components"]["model"]).rsplit(".", 1)[0]


def _checkpoint_note(release: TorchtuneRelease, config: str, workload: Workload) -> str:
    entry = release.configs[config]
    repo = workload.model.hf_repo() if workload.model is not None else None
    text = f"first: tune download {entry['download']} (the checkpoint {config} reads, {entry['checkpoint_dir']})"
    if repo is not None and repo != entry["download"]:
        text += (f"; {repo} has its architecture: download it instead and point checkpointer.checkpoint_dir,"
                 " checkpointer.checkpoint_files and tokenizer.path at it")  # fmt: skip
    return text


def torchtune_command(
    workload: Workload, settings: Mapping[str, Any], plan: Plan
) -> tuple[TuneCommand, list[str]] | str:
    """``tune run`` for the plan and its notes, or why there is none (a reason a person reads)."""
    training = workload.training
    assert training is not None
    release = torchtune_release(TORCHTUNE_RELEASE)
    if plan.pipeline > 1:
        return f"pipeline parallelism: torchtune {release.release}'s fine-tuning recipes have none"
    recipe = tune_recipe(training.method, plan)
    config = tune_config(release, recipe, workload)
    if config is None:
        return f"no {recipe} config of torchtune {release.release} builds this model's architecture"
    draft = _Draft()
    _shape(draft, workload, settings)
    _precision(draft, release, recipe, workload)
    _memory(draft, release, recipe, config, workload, plan)
    _optimizer(draft, release, recipe, config, workload, plan)
    _lora(draft, release.builder(config), workload)
    _sharding(draft, release, recipe, config, workload, plan)
    if draft.refusal is not None:
        return draft.refusal
    env = ((ALLOCATOR, EXPANDABLE),) if workload.runtime.expandable_segments else ()
    placed = torchrun_flags(plan.devices, settings) if plan.devices > 1 else ((), [])
    if isinstance(placed, str):
        return placed
    torchrun, placement = placed
    command = TuneCommand(recipe, config, tuple(draft.overrides), tuple(draft.removals), torchrun, env)
    return command, [_checkpoint_note(release, config, workload), *placement, *draft.notes]


def torchtune_launch(workload: Workload, settings: Mapping[str, Any], plan: Plan) -> Launch | str:
    """The checked launch of ``torchtune_command``, or why there is none."""
    found = torchtune_command(workload, settings, plan)
    if isinstance(found, str):
        return found
    command, notes = found
    release = torchtune_release(TORCHTUNE_RELEASE)
    return _checked("torchtune", release.release, command.argv, notes, release.problems(command.argv))


def _read_lora(values: Mapping[str, str], training: TrainingSpec) -> LoraSpec:
    attention = {tune: name for name, tune in TUNE_ATTENTION.items()}
    targets = [attention[name] for name in values["model.lora_attn_modules"].strip("[]").split(",") if name]
    if _flag(values["model.apply_lora_to_mlp"]):
        targets += [name for name in PROJECTIONS if name in TUNE_MLP]
    return training.lora.model_copy(
        update={
            "rank": int(values["model.lora_rank"]),
            "dropout": float(values["model.lora_dropout"]),
            "target_modules": ["all-linear"] if set(targets) == set(PROJECTIONS) else targets,
        }
    )


def workload_from_torchtune(argv: Sequence[str], workload: Workload) -> tuple[Workload, Plan]:
    """The workload and plan a ``tune run`` command launches: ``workload`` (its model) with every setting the command
    sets, read from the command. What a budget of the command's run reads, read back from it."""
    release = torchtune_release(TORCHTUNE_RELEASE)
    command = TuneCommand.parse(argv)
    values = command.values
    training = workload.training
    assert training is not None
    quantized = _flag(values.get("model.quantize_base", "False"))
    method = "full" if command.recipe.startswith("full") else ("qlora" if quantized else "lora")
    component = values.get("optimizer._component_", release.configs[command.config]["components"]["optimizer"])
    momentum = "optimizer.momentum" in values
    optimizer = next(name for name, (path, kwargs) in TUNE_OPTIMIZERS.items()
                     if path == component and bool(kwargs) == momentum)  # fmt: skip
    fused = values.get("optimizer.fused")
    impl = None if fused is None else ("fused" if _flag(fused) else "foreach")
    trained = training.model_copy(
        update={
            "micro_batch_size": int(values["batch_size"]),
            "sequence_length": int(values["tokenizer.max_seq_len"]),
            "activation_checkpointing": "full" if _flag(values["enable_activation_checkpointing"]) else "none",
            "activation_offloading": _flag(values["enable_activation_offloading"]),
            "optimizer_in_backward": _flag(values.get("optimizer_in_bwd", "False")),
            "optimizer": optimizer,
            "optimizer_impl": impl if optimizer == "adamw" else training.optimizer_impl,
            "loss_chunks": int(values["loss.num_output_chunks"]),
            "method": method,
            "lora": _read_lora(values, training) if method != "full" else training.lora,
            "cpu_offload": "parameters" if _flag(values.get("fsdp_cpu_offload", "False")) else "none",
        }
    )
    dtype = values["dtype"]
    weights = dtype
    if quantized:  # the 4-bit format is not the command's: the workload's, else NF4's
        weights = workload.precision.weights if workload.precision.weights in FOUR_BIT else "nf4"
    precision = workload.precision.model_copy(
        update={"weights": weights, "compute": dtype, "kv_cache": dtype, "gradients": dtype, "master_weights": None}
    )
    env = dict(command.env)
    runtime = workload.runtime.model_copy(
        update={
            "device": values["device"],
            "compile": _flag(values["compile"]),
            "expandable_segments": env.get(ALLOCATOR) == EXPANDABLE,
            "attention": "sdpa" if workload.runtime.attention == "eager" else workload.runtime.attention,
        }
    )
    tensor = int(values.get("tensor_parallel_dim", "1"))
    data = command.processes // tensor
    zero = 0 if data == 1 else (3 if _flag(values["fsdp_reshard_after_forward"]) else 2)
    update = {"training": trained, "precision": precision, "runtime": runtime}
    return workload.model_copy(update=update), Plan(tensor, 1, data, zero)
