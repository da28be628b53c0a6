"""Launch commands for training recommendations: what to run for a training entry's plan, checked against the
framework's own definitions at the pinned release. Pure.

A torchtune workload's ``fits`` or ``tight`` entry gets ``tune run [--nproc_per_node N] <recipe> --config <config>
key=value …`` (torchtune 0.6.1, the release ``budgets.engine.frameworks`` profiles): the recipe by method and device
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

A torchtitan workload's entry gets ``torchrun --nproc_per_node N -m torchtitan.train --job.config_file <a train config
of the release> --section.field value …`` (torchtitan 0.2.0, the profile's; JobConfig's fields are tyro flags): the
flavor whose architecture is the workload's (Llama 3 8B/70B/405B, Qwen3's dense ones), micro batch and sequence
length (under a pipeline one micro-batch per stage), the parallel degrees (ZeRO-0 of one-device replicas as DDP,
ZeRO-2 and 3 as FSDP2 keeping or resharding the gathered layers), the dtype and FSDP's mixed-precision policy, the
recomputation mode, torch.compile, AdamW's step and CPU offload. Checked against
``fixtures/engines/torchtitan-0.2.0.json`` (``tools/engine_args/extract_torchtitan.py``, from PyPI's sdist and the
v0.2.0 tag's train configs; tyro refuses an unknown flag, the check refuses it first, and a value outside a field's
``Literal``); ``workload_from_torchtitan`` reads a command back.

A transformers workload's (the default framework's) entry gets ``accelerate launch --config_file
accelerate_config.json --num_processes N -m trl.scripts.sft --field value …`` and that config file
(``Launch.files``): TRL's SFT script with SFTConfig, TrainingArguments and ModelConfig fields for every budgeted
setting (dtype, micro batch, ``max_length`` rows packed whole, activation checkpointing, optimizer, precision flags,
LoRA through PEFT, QLoRA's NF4), and the accelerate config TRL ships for the distribution (one process, DDP, FSDP2,
DeepSpeed ZeRO-0 to 3 with ZeRO-Offload) with the budget's settings. The releases are pinned in ``HF_RELEASES``
(transformers 5.24.0, TRL 1.16.0, PEFT 0.21.2, accelerate 1.15.0) and checked against their fixtures
(``tools/engine_args/extract_trl.py``, from PyPI's wheels): TRL's parser ignores an unknown flag, accelerate sets an
unknown nested config key and never reads it, so the check refuses both. ``workload_from_transformers`` reads a
command and its config back.

A lit-gpt workload's entry gets ``python launch_litgpt.py --checkpoint_dir checkpoints/<repo> --data_dir data/alpaca
--precision <p>-true [--quantize bnb.nf4]`` and that wrapper (``Launch.files``): at commit 8641822 (the profile's)
``jsonargparse.CLI(setup)`` takes ``setup``'s parameters only, and the devices, micro batch and LoRA settings are
module constants of ``finetune/full.py`` and ``finetune/lora.py``, which the wrapper sets before handing ``setup`` to
the CLI; the sequence length is the longest example ``scripts/prepare_alpaca.py --max_seq_length`` keeps (a note).
Checked against ``fixtures/engines/litgpt-8641822.json`` (``tools/engine_args/extract_litgpt.py``, the commit's files
by blob id): a constant the script does not have would be set and never read, so the check refuses it, as it does a
flag ``setup`` lacks, a ``--quantize`` outside its ``Literal`` and a model ``lit_gpt/config.py`` has no config of.

An Unsloth workload's entry gets ``python train_unsloth.py`` and that script: ``FastLanguageModel.from_pretrained``,
``get_peft_model`` and TRL's ``SFTTrainer``/``SFTConfig`` with every budgeted setting, each keyword checked against
``fixtures/engines/unsloth-2024.12.json`` (``tools/engine_args/extract_unsloth.py``: unslothai/unsloth 400d995, TRL
0.12.1, transformers 4.46.3); their ``**kwargs`` would take a misspelt keyword and never read it.

Frameworks without a launch yet, and why: ``UNLAUNCHED_FRAMEWORKS``.
"""

from __future__ import annotations

import ast
import json
import math
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from budgets.engine import Workload
from budgets.engine.components.training import PROJECTIONS, adapted_projections, default_optimizer_impl
from budgets.engine.frameworks import framework_profile, fused_loss
from budgets.engine.models.spec import ModelSpec
from budgets.engine.profiles.transformers import DEFAULT_TRANSFORMERS_VERSION
from budgets.engine.schema import LoraSpec, PrecisionSpec, TrainingSpec

from .launch import FIXTURES, Launch, LaunchError
from .plans import Plan

#: The torchtune release whose recipes and configs commands are checked against: the framework profile's.
TORCHTUNE_RELEASE = framework_profile("torchtune").release or ""

#: Training frameworks that have no launch yet, and why (their recommendations carry none).
UNLAUNCHED_FRAMEWORKS: dict[str, str] = {}

# ---------------------------------------------------------------------------------------------------------- torchtune

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
#: The workload's 4-bit weight formats a torchtune QLoRA run replaces with torchao's NF4 (``quantize_base``:
#: torchtune/modules/peft/lora.py ``to_nf4``).
FOUR_BIT = ("nf4", "int4")
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
#: How a note ends that names a setting the command replaces by one holding less memory than the budget assumed.
LESS = "less than the budget's"
ALLOCATOR = "PYTORCH_CUDA_ALLOC_CONF"
EXPANDABLE = "expandable_segments:True"


def split_env(argv: Sequence[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """A command's ``env NAME=VALUE …`` prefix (the variables, in order) and the command after it."""
    rest = list(argv)
    env: list[tuple[str, str]] = []
    if rest[:1] == ["env"]:
        rest.pop(0)
        while rest and "=" in rest[0] and not rest[0].startswith("-"):
            name, _, value = rest.pop(0).partition("=")
            env.append((name, value))
    return env, rest


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
    def nproc_per_node(self) -> int:
        return int(dict(self.torchrun).get("--nproc_per_node", 1))

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


def _value(value: object) -> str:
    """A value as an OmegaConf dotlist reads it (``True``, ``None``, ``[q_proj,v_proj]``)."""
    if isinstance(value, list | tuple):
        return "[" + ",".join(map(str, value)) + "]"
    return str(value)


@dataclass
class _Draft:
    """A command being built: overrides in order, removals, notes, and why it cannot be (``refusal``)."""

    overrides: list[tuple[str, str]] = field(default_factory=list)
    removals: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    refusal: str | None = None

    def set(self, key: str, value: object) -> None:
        self.overrides.append((key, _value(value)))

    def refuse(self, reason: str) -> None:
        self.refusal = self.refusal or reason


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
    torchrun = (("--nproc_per_node", str(plan.devices)),) if plan.devices > 1 else ()
    command = TuneCommand(recipe, config, tuple(draft.overrides), tuple(draft.removals), torchrun, env)
    return command, [_checkpoint_note(release, config, workload), *draft.notes]


def torchtune_launch(workload: Workload, settings: Mapping[str, Any], plan: Plan) -> Launch | str:
    """The checked launch of ``torchtune_command``, or why there is none."""
    found = torchtune_command(workload, settings, plan)
    if isinstance(found, str):
        return found
    command, notes = found
    release = torchtune_release(TORCHTUNE_RELEASE)
    return _checked("torchtune", release.release, command.argv, notes, release.problems(command.argv))


# --------------------------------------------------------------------------------------------------------- torchtitan

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
    def nproc_per_node(self) -> int:
        return int(dict(self.torchrun).get("--nproc_per_node", 1))

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
        if config["model.converters"]:
            found.append(f"model.converters {config['model.converters']}: the config converts the model (float8),"
                         " which the command cannot clear")  # fmt: skip
        degrees = ("data_parallel_replicate_degree", "data_parallel_shard_degree", "tensor_parallel_degree",
                   "pipeline_parallel_degree", "context_parallel_degree")  # fmt: skip
        product = math.prod(int(config[f"parallelism.{name}"]) for name in degrees)
        if int(config["parallelism.data_parallel_shard_degree"]) > 0 and product != command.nproc_per_node:
            found.append(f"the parallel degrees cover {product} devices, torchrun starts {command.nproc_per_node}"
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
    if training.sequence_length % (2 * plan.tensor):  # parallel_dims.py:252-259 seq_len_divisor = tp * (cp * 2)
        draft.refuse(f"sequence length {training.sequence_length}: torchtitan needs a multiple of 2 × the tensor"
                     f" degree, {2 * plan.tensor} (models/llama3/infra/parallelize.py:62-66)")  # fmt: skip
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
    fsdp = plan.replicas > 1 and not ddp
    draft.set("--parallelism.data_parallel_replicate_degree", plan.replicas if ddp else 1)
    draft.set("--parallelism.data_parallel_shard_degree", plan.replicas if fsdp else 1)
    draft.set("--parallelism.tensor_parallel_degree", plan.tensor)
    draft.set("--parallelism.pipeline_parallel_degree", plan.pipeline)
    draft.set("--parallelism.context_parallel_degree", 1)
    if plan.pipeline > 1:
        draft.set("--parallelism.pipeline_parallel_schedule", "1F1B")
        draft.set("--parallelism.pipeline_parallel_first_stage_less_layers", 0)
        draft.set("--parallelism.pipeline_parallel_last_stage_less_layers", 0)
    if fsdp:
        draft.set("--parallelism.fsdp_reshard_after_forward", "never" if plan.zero_stage == 2 else "always")
        if plan.zero_stage < 2:
            draft.notes.append(f"ZeRO-{plan.zero_stage}: torchtitan shards with FSDP2, resharding after every forward"
                               " (ZeRO-3), " + LESS)  # fmt: skip
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
    command = TitanCommand(release.module, tuple(draft.args), (("--nproc_per_node", str(plan.devices)),), env)
    return command, [*_titan_notes(release, workload), *draft.notes]


def torchtitan_launch(workload: Workload, settings: Mapping[str, Any], plan: Plan) -> Launch | str:
    """The checked launch of ``torchtitan_command``, or why there is none."""
    found = torchtitan_command(workload, settings, plan)
    if isinstance(found, str):
        return found
    command, notes = found
    release = torchtitan_release(TORCHTITAN_RELEASE)
    return _checked("torchtitan", release.release, command.argv, notes, release.problems(command.argv))


# ------------------------------------------------------------------------------- transformers (TRL, PEFT, accelerate)

#: The releases a transformers workload's launch is checked against. ``budgets.engine.frameworks`` profiles
#: transformers' layers with the layer profile's release (``budgets/engine/profiles/transformers.py``, 5.24.0) and has
#: no place for the trainer stack around them, so it is pinned here: TRL 1.16.0 (``trl.scripts.sft``: SFTConfig,
#: ModelConfig), PEFT 0.21.2 (its LoraConfig) and accelerate 1.15.0 (``accelerate launch`` and its config file), the
#: newest releases of each that take transformers 5.24.0 (TRL 1.16.0 needs transformers>=4.56.2, accelerate>=1.10.1).
HF_RELEASES = {"transformers": DEFAULT_TRANSFORMERS_VERSION, "trl": "1.16.0", "peft": "0.21.2", "accelerate": "1.15.0"}
#: The file ``--config_file`` names: accelerate reads a ``.json`` config as it reads a YAML one
#: (accelerate/commands/config/config_args.py:43-72, ``from_json_file`` refuses unknown keys as ``from_yaml_file``).
ACCELERATE_CONFIG = "accelerate_config.json"
#: ModelConfig's ``--dtype`` (trl/trainer/model_config.py:89-95) by the workload's floating precision.
HF_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
#: ModelConfig's ``--attn_implementation`` by the workload's attention (transformers' AttentionInterface names).
HF_ATTENTION = {"eager": "eager", "sdpa": "sdpa", "flash": "flash_attention_2"}
#: TrainingArguments' ``--optim`` (and ``--optim_args``) by the workload's optimizer (transformers/trainer_optimizer.py
#: ``_OPTIMIZER_HANDLERS``: adamw_torch is torch's AdamW with its defaults, :203-209; sgd takes ``momentum`` from
#: ``optim_args``, :317-326; the bitsandbytes AdamW variants by name, :246-291).
HF_OPTIMIZERS: dict[str, tuple[str, str | None]] = {
    "adamw": ("adamw_torch", None),
    "adamw_8bit": ("adamw_bnb_8bit", None),
    "paged_adamw_8bit": ("paged_adamw_8bit", None),
    "sgd": ("sgd", None),
    "sgd_momentum": ("sgd", "momentum=0.9"),
}
#: Why the other optimizers get no launch.
HF_REFUSED_OPTIMIZERS = {
    "adafactor": "transformers' Adafactor upcasts each 16-bit gradient and parameter to fp32 in its step"
    " (transformers/optimization.py:1221, 1254), temporaries the budget does not hold",
    "lion": "transformers runs bitsandbytes' Lion (trainer_optimizer.py:261-265), whose 32-bit states and step the"
    " budget's Lion is not read from",
}
#: The example dataset TRL's own docs train ``trl sft`` on (trl/scripts/sft.py:27-40): a stand-in for the user's.
HF_DATASET = "trl-lib/Capybara"
#: The accelerate configs TRL ships (trl/accelerate_configs/), by the distribution the launch runs.
HF_BASE_CONFIGS = {"NO": "single_gpu", "MULTI_GPU": "multi_gpu", "FSDP": "fsdp2"}


def hf_base_config(kind: str, zero_stage: int) -> str:
    """The accelerate config TRL ships (trl/accelerate_configs/) that a run of ``kind`` starts from: DeepSpeed's of
    the plan's stage (ZeRO-0's: zero1.yaml, its stage set to 0)."""
    return f"zero{max(zero_stage, 1)}" if kind == "DEEPSPEED" else HF_BASE_CONFIGS[kind]


@dataclass(frozen=True, slots=True)
class HfCommand:
    """``[env VAR=value …] accelerate launch [--flag value …] -m <module> [--field value …]``: each TRL field takes the
    values up to the next flag (a list field several)."""

    module: str
    args: tuple[tuple[str, tuple[str, ...]], ...]
    launcher: tuple[tuple[str, str], ...] = ()
    env: tuple[tuple[str, str], ...] = ()

    @property
    def argv(self) -> tuple[str, ...]:
        env = ("env", *(f"{name}={value}" for name, value in self.env)) if self.env else ()
        launcher = tuple(item for pair in self.launcher for item in pair)
        args = tuple(item for flag, values in self.args for item in (flag, *values))
        return (*env, "accelerate", "launch", *launcher, "-m", self.module, *args)

    @property
    def values(self) -> dict[str, tuple[str, ...]]:
        return {flag.removeprefix("--"): values for flag, values in self.args}

    def value(self, name: str, default: str | None = None) -> str | None:
        values = self.values.get(name)
        return values[0] if values else default

    @classmethod
    def parse(cls, argv: Sequence[str]) -> HfCommand:
        """The parts of a command; :class:`LaunchError` for one that is not ``accelerate launch … -m <module> …``."""
        env, rest = split_env(argv)
        if rest[:2] != ["accelerate", "launch"] or "-m" not in rest:
            raise LaunchError("the command is accelerate launch … -m <module> …")
        split = rest.index("-m")
        launcher = rest[2:split]
        if len(launcher) % 2 or len(rest) < split + 2:
            raise LaunchError("accelerate launch takes --flag value pairs here, then -m <module>")
        args: list[tuple[str, tuple[str, ...]]] = []
        for item in rest[split + 2 :]:
            if item.startswith("--"):
                args.append((item, ()))
            elif not args:
                raise LaunchError(f"{item}: a value without a flag")
            else:
                args[-1] = (args[-1][0], (*args[-1][1], item))
        pairs = tuple(zip(launcher[::2], launcher[1::2], strict=True))
        return cls(rest[split + 1], tuple(args), pairs, tuple(env))


def _merged_fields(dataclasses: Mapping[str, Mapping[str, Any]], name: str) -> dict[str, Mapping[str, Any]]:
    """A dataclass's fields with its bases' (a base's first, a subclass's redefinition replacing it)."""
    entry = dataclasses[name]
    fields: dict[str, Mapping[str, Any]] = {}
    for base in entry["bases"]:
        if base in dataclasses:
            fields |= _merged_fields(dataclasses, base)
    return fields | dict(entry["fields"])


@dataclass(frozen=True, slots=True)
class HfStack:
    """The pinned transformers training stack, as extracted from the four wheels (``tools/engine_args/extract_trl.py``):
    the fields ``trl sft`` parses, ``accelerate launch``'s flags and config keys, PEFT's LoraConfig."""

    releases: Mapping[str, str]
    module: str
    fields: Mapping[str, Mapping[str, Any]]  # "--name" (and "--no_name" for a bool defaulting to True) → the field
    optimizers: tuple[str, ...]
    attention: tuple[str, ...]
    launcher: Mapping[str, Any]  # accelerate's fixture
    base_configs: Mapping[str, Mapping[str, Any]]
    lora_fields: frozenset[str]
    lora_keywords: tuple[str, ...]
    all_linear: str
    sources: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return ", ".join(f"{name} {release}" for name, release in self.releases.items())

    def problems(self, argv: Sequence[str], config: Mapping[str, Any] | None) -> list[str]:
        """What these releases would refuse in ``argv`` and its accelerate ``config``, or set and never read."""
        try:
            command = HfCommand.parse(argv)
        except LaunchError as exc:
            return [str(exc)]
        found = self._launcher_problems(command)
        if command.module != self.module:
            found.append(f"-m {command.module}: TRL {self.releases['trl']}'s SFT script is -m {self.module}")
        names = [self.fields.get(flag, {}).get("name", flag) for flag, _ in command.args]
        found += [f"--{name}: given twice" for name in sorted(set(names)) if names.count(name) > 1]
        for flag, values in command.args:
            found += self._field_problems(flag, values)
        if command.value("dataset_name") is None:
            found.append("no --dataset_name: trl/scripts/sft.py:87-100 needs a dataset")
        if config is not None:
            found += self.config_problems(config, command)
        return found

    def _launcher_problems(self, command: HfCommand) -> list[str]:
        flags = self.launcher["launch_flags"]
        found = [f"{flag}: not a flag of accelerate launch {self.releases['accelerate']}" for flag, _ in
                 command.launcher if flag not in flags or flags[flag]["action"] is not None]  # fmt: skip
        given = dict(command.launcher)
        if given.get("--config_file") not in (None, ACCELERATE_CONFIG):
            found.append(f"--config_file {given['--config_file']}: the launch's file is {ACCELERATE_CONFIG}")
        return found

    def _field_problems(self, flag: str, values: tuple[str, ...]) -> list[str]:
        """One ``--field values…`` as TRL's HfArgumentParser reads it (trl/scripts/_hf_argparser.py:167-275); it
        ignores an unknown flag (trl/scripts/sft.py:144 ``fail_with_unknown_args=False``), so it is refused here."""
        entry = self.fields.get(flag)
        if entry is None:
            return [f"{flag}: not a field of trl sft (TRL {self.releases['trl']}, transformers"
                    f" {self.releases['transformers']}): it would be ignored"]  # fmt: skip
        if entry.get("negates"):
            return [] if not values else [f"{flag}: takes no value"]
        if entry["kind"] == "bool":
            if len(values) != 1 or values[0].lower() not in BOOL_STRINGS:
                return [
                    f"{flag} {' '.join(values)}: one of true/false (trl/scripts/_hf_argparser.py:40-50 string_to_bool)"
                ]
            return []
        if not values or (entry["kind"] == "value" and len(values) > 1):
            return [f"{flag}: {'no value' if not values else 'one value'}"]
        choices = entry["choices"]
        found = [f"{flag} {value}: not one of {', '.join(map(str, choices))}" for value in values
                 if choices and value not in choices]  # fmt: skip
        if entry["type"] in ("int", "int | None") and not all(value.isdigit() for value in values):
            found.append(f"{flag} {' '.join(values)}: not an int")
        if flag == "--attn_implementation" and values[0] not in self.attention:
            found.append(f"{flag} {values[0]}: transformers registers {', '.join(self.attention)}")
        return found

    def config_problems(self, config: Mapping[str, Any], command: HfCommand) -> list[str]:
        """The accelerate config file: its keys (``ClusterConfig`` refuses others), its enums, and each nested key
        a launch argument reads (``_validate_launch_command`` sets any key and reads only its arguments)."""
        launcher = self.launcher
        found = [f"{key}: not a key of accelerate {self.releases['accelerate']}'s config file" for key in config
                 if key not in launcher["config_keys"]]  # fmt: skip
        enums = launcher["enums"]
        for key, enum in (("distributed_type", "DistributedType"), ("mixed_precision", "PrecisionType"),
                          ("compute_environment", "ComputeEnvironment")):  # fmt: skip
            if config.get(key) not in enums[enum]:
                found.append(f"{key} {config.get(key)}: not one of {', '.join(enums[enum])}")
        for section, prefix in (("deepspeed_config", ""), *launcher["nested_prefixes"].items()):
            for key, value in (config.get(section) or {}).items():
                found += self._nested_problems(section, key if key.startswith(prefix) else prefix + key, value)
        launched = dict(command.launcher).get("--num_processes")
        if launched is not None and str(config.get("num_processes")) != launched:
            found.append(f"num_processes {config.get('num_processes')}: the command starts {launched}")
        return found

    def _nested_problems(self, section: str, name: str, value: object) -> list[str]:
        flag = self.launcher["launch_flags"].get(f"--{name}")
        if flag is None:
            return [f"{section}.{name}: no argument of accelerate launch reads it"]
        choices = flag["choices"] or self.launcher["deepspeed_choices"].get(name)
        if choices and str(value) not in choices:
            return [f"{section}.{name} {value}: not one of {', '.join(choices)}"]
        if name == "zero_stage" and value not in (0, 1, 2, 3):
            return [f"{section}.zero_stage {value}: DeepSpeed's stages are 0 to 3"]
        return []


#: The strings ``string_to_bool`` reads (trl/scripts/_hf_argparser.py:40-50).
BOOL_STRINGS = frozenset({"yes", "true", "t", "y", "1", "no", "false", "f", "n", "0"})


def _hf_flags(fields: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``--name`` and ``--name-with-hyphens`` for each field, ``--no_name`` beside a bool defaulting to True
    (trl/scripts/_hf_argparser.py:172-174, 263-275)."""
    flags = {}
    for name, entry in fields.items():
        for flag in {f"--{name}", f"--{name.replace('_', '-')}", *entry.get("aliases", [])}:
            flags[flag] = {**entry, "name": name}
        if entry["kind"] == "bool" and entry["default"] is True:
            flags[f"--no_{name}"] = {**entry, "name": name, "negates": True}
    return flags


def _fixture(engine: str, release: str) -> dict[str, Any]:
    return dict(json.loads((FIXTURES / f"{engine}-{release}.json").read_text()))


@cache
def hf_stack() -> HfStack:
    trl, transformers = _fixture("trl", HF_RELEASES["trl"]), _fixture("transformers", HF_RELEASES["transformers"])
    accelerate, peft = _fixture("accelerate", HF_RELEASES["accelerate"]), _fixture("peft", HF_RELEASES["peft"])
    dataclasses = {**transformers["dataclasses"], **trl["dataclasses"]}
    fields: dict[str, Mapping[str, Any]] = {}
    for name in trl["parser_dataclasses"]:
        fields |= _merged_fields(dataclasses, name)
    return HfStack(
        releases=HF_RELEASES,
        module=trl["module"],
        fields=_hf_flags(fields),
        optimizers=tuple(transformers["enums"]["OptimizerNames"]),
        attention=tuple(transformers["attention_implementations"]),
        launcher=accelerate,
        base_configs=trl["accelerate_configs"],
        lora_fields=frozenset(_merged_fields(peft["dataclasses"], "LoraConfig")),
        lora_keywords=tuple(trl["lora_config_keywords"]),
        all_linear=peft["all_linear"],
        sources={f["engine"]: f["source"] for f in (trl, transformers, accelerate, peft)},
    )


@dataclass
class _HfDraft:
    """A transformers launch being built: TRL's fields in order, the accelerate config, notes, why it cannot be."""

    args: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    refusal: str | None = None

    def set(self, name: str, *values: object) -> None:
        self.args.append((f"--{name}", tuple(str(value) for value in values)))

    def refuse(self, reason: str) -> None:
        self.refusal = self.refusal or reason


@dataclass(frozen=True, slots=True)
class HfPrecision:
    """How a run holds the workload's precision: the model's ``--dtype``, accelerate's ``mixed_precision`` (``no``:
    no autocast, no master copy), whether DeepSpeed must run it (its fp32 master copy), 4-bit flags, notes."""

    dtype: str
    mixed: str = "no"
    deepspeed: bool = False
    four_bit: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()


#: Why LoRA on a 16-bit base gets no launch outside DeepSpeed ZeRO-3 with an fp32 master copy.
PEFT_FP32_ADAPTERS = (
    "TRL {trl} leaves PEFT's autocast_adapter_dtype on outside DeepSpeed ZeRO-3 (trl/trainer/sft_trainer.py:846-870):"
    " fp32 adapters on the {weights} base, which copy every adapted projection's input to fp32"
    " (peft/tuners/tuners_utils.py:2220-2235), and DeepSpeed keeps an fp32 master copy: neither is the budget's"
)


def _qlora_precision(precision: PrecisionSpec) -> HfPrecision | str:
    """bitsandbytes' NF4 (``--load_in_4bit``, trl/trainer/utils.py:261-269) in bf16 compute: without double
    quantization for the budget's NF4 (the transformers profile's); with it for int4 (its 8-bit absmax: 0.516 B per
    weight, under int4's 0.531). TRL casts the adapters to bf16 (sft_trainer.py:902-910)."""
    weights, compute = precision.weights, precision.compute or "bf16"
    if compute != "bf16" or weights not in FOUR_BIT:
        return f"QLoRA with {weights} weights, {compute} compute: TRL trains a 4-bit NF4 base in bf16"
    nested = weights == "int4"
    notes = []
    if nested:
        notes.append("int4 weights as bitsandbytes NF4 with double quantization (0.516 B per weight): " + LESS)
    if precision.master_weights is not None:
        notes.append("TRL keeps the adapters in bf16 (sft_trainer.py:902-910), no fp32 master copy of them: " + LESS)
    flags = (("load_in_4bit", "True"), ("bnb_4bit_quant_type", "nf4"), ("use_bnb_nested_quant", str(nested)))
    return HfPrecision("bfloat16", four_bit=flags, notes=tuple(notes))


def hf_precision(precision: PrecisionSpec, training: TrainingSpec, plan: Plan) -> HfPrecision | str:
    """The run that holds the workload's precision, or why none does: one dtype throughout, no master copy, is the
    model loaded in it (``--dtype``) without autocast (``--bf16 False``: TRL's SFTConfig turns bf16 on otherwise,
    trl/trainer/base_config.py:68-75); 16-bit weights with an fp32 master copy are DeepSpeed's mixed precision, whose
    ZeRO optimizer keeps the fp32 master copy and states of each partition (the ZeRO convention the budget follows);
    QLoRA is ``_qlora_precision``'s. fp32 weights with 16-bit compute would run under ``torch.autocast``, whose
    16-bit weight copies the budget does not hold, and LoRA on a 16-bit base has fp32 adapters except under
    DeepSpeed ZeRO-3 (``PEFT_FP32_ADAPTERS``): refused."""
    if training.method == "qlora":
        return _qlora_precision(precision)
    weights, compute, master = precision.weights, precision.compute or "bf16", precision.master_weights
    gradients = precision.gradients or weights
    if weights not in HF_DTYPES or compute != weights:
        return (f"{weights} weights with {compute} compute: the HF Trainer would run it under torch.autocast, whose"
                " 16-bit copies of the weights the budget does not hold")  # fmt: skip
    pure = master is None and gradients == weights
    mixed = master == "fp32" and weights in ("bf16", "fp16")
    if not (pure or mixed):
        return f"{weights} weights, {gradients} gradients, {master or 'no'} master copy: no HF Trainer run holds them"
    if training.method == "lora" and weights != "fp32" and not (mixed and plan.zero_stage == 3):
        return f"LoRA on a {weights} base: " + PEFT_FP32_ADAPTERS.format(trl=HF_RELEASES["trl"], weights=weights)
    if pure:
        return HfPrecision(HF_DTYPES[weights])
    note = (f"DeepSpeed's {weights} mixed precision: {weights} weights, an fp32 master copy and fp32 states of each"
            " ZeRO partition (the ZeRO convention the budget follows)")  # fmt: skip
    if training.method == "lora":
        note = (
            "under ZeRO-3 TRL keeps the adapters in the base's dtype (autocast_adapter_dtype=False,"
            f" sft_trainer.py:855-857): {weights} adapters beside DeepSpeed's fp32 master copy, " + LESS
        )
    return HfPrecision(HF_DTYPES[weights], mixed=weights, deepspeed=True, notes=(note,))


def _hf_distribution(draft: _HfDraft, stack: HfStack, workload: Workload, plan: Plan, deepspeed: bool) -> str:
    """The accelerate config (TRL's shipped one for the distribution, its settings replaced): one process, DDP,
    FSDP2 or DeepSpeed ZeRO; the distributed type. Pure precision shards with FSDP2 (no master copy): ZeRO-3
    resharding after every forward, ZeRO-2 not (``fsdp_reshard_after_forward``, accelerate's SHARD_GRAD_OP), ZeRO-1
    as ZeRO-3 (sharded further, holding less); a master copy runs under DeepSpeed at the plan's stage, ZeRO-Offload
    for ``cpu_offload``."""
    training = workload.training
    assert training is not None
    offload = training.cpu_offload
    if deepspeed:
        kind = "DEEPSPEED"
    elif plan.replicas == 1 and offload == "none":
        kind = "NO"
    elif plan.zero_stage == 0 and offload == "none":
        kind = "MULTI_GPU"
    else:
        kind = "FSDP"
    config = json.loads(json.dumps(stack.base_configs[hf_base_config(kind, plan.zero_stage)]))  # a copy
    config |= {"num_processes": plan.devices, "use_cpu": workload.runtime.device == "cpu"}
    if kind == "DEEPSPEED":
        devices = {"none": ("none", "none"), "optimizer": ("cpu", "none"), "parameters": ("cpu", "cpu")}[offload]
        config["deepspeed_config"] |= {
            "zero_stage": plan.zero_stage,
            "offload_optimizer_device": devices[0],
            "offload_param_device": devices[1],
            "zero3_init_flag": plan.zero_stage == 3,
        }
    elif kind == "FSDP":
        if offload == "optimizer":
            draft.refuse("optimizer-only CPU offload of a pure-precision run: FSDP offloads the parameters too and"
                         " DeepSpeed's ZeRO-Offload adds an fp32 master copy, neither the budget's")  # fmt: skip
        if plan.replicas == 1:
            draft.refuse("CPU offload runs on FSDP, which one device does not shard")
        reshard = plan.zero_stage != 2  # ZeRO-2: FSDP2 keeping the gathered parameters (SHARD_GRAD_OP)
        config["fsdp_config"] |= {"fsdp_offload_params": offload == "parameters", "fsdp_reshard_after_forward": reshard,
                                  "fsdp_activation_checkpointing": False}  # fmt: skip
        if plan.zero_stage < 2:
            draft.notes.append(f"ZeRO-{plan.zero_stage}: a pure-precision run shards with FSDP2, resharding after"
                               " every forward (ZeRO-3), " + LESS)  # fmt: skip
    draft.config = config
    return kind


def _hf_model(draft: _HfDraft, stack: HfStack, workload: Workload, repo: str, precision: HfPrecision) -> None:
    """The checkpoint, its dtype and attention, and for LoRA the adapters (PEFT through ModelConfig)."""
    training = workload.training
    assert training is not None
    draft.set("model_name_or_path", repo)
    draft.set("dtype", precision.dtype)
    draft.set("attn_implementation", HF_ATTENTION[workload.runtime.attention])
    if workload.runtime.attention == "flash":
        draft.notes.append("attn_implementation flash_attention_2: pip install flash-attn")
    if training.method == "full":
        return
    targets = list(training.lora.target_modules)
    draft.set("use_peft", True)
    draft.set("lora_r", training.lora.rank)
    draft.set("lora_dropout", training.lora.dropout)
    draft.set("lora_target_modules", *(targets if targets != ["all-linear"] else [stack.all_linear]))
    for name, value in precision.four_bit:
        draft.set(name, value)


def _hf_step(draft: _HfDraft, workload: Workload, settings: Mapping[str, Any], plan: Plan, mixed: str) -> None:
    """The step's shape and memory: micro batch, sequence rows (TRL's wrapped packing: every row ``max_length``
    tokens, sft_config.py:222-247), recomputation, compile, the optimizer, precision flags, the device."""
    training, runtime = workload.training, workload.runtime
    assert training is not None
    draft.set("dataset_name", HF_DATASET)
    draft.set("per_device_train_batch_size", training.micro_batch_size)
    draft.set("max_length", training.sequence_length)
    draft.set("packing", True)
    draft.set("packing_strategy", "wrapped")
    draft.set("padding_free", False)
    recompute = plan.recompute or training.activation_checkpointing
    draft.set("activation_checkpointing", recompute != "none")
    if recompute != "none" and training.method == "lora" and mixed != "no" and plan.zero_stage == 3:
        draft.notes.append("PEFT under DeepSpeed ZeRO-3: TRL checkpoints reentrantly (sft_trainer.py:872-895)")
    if recompute in ("selective", "selective_op"):
        draft.notes.append(f"activation_checkpointing {recompute}: the HF Trainer recomputes whole decoder layers"
                           " (--activation_checkpointing, modeling_utils.py:3152-3171), " + LESS)  # fmt: skip
    draft.set("torch_compile", runtime.compile)
    _hf_optimizer(draft, workload)
    draft.set("bf16", mixed == "bf16")
    draft.set("fp16", mixed == "fp16")
    draft.set("use_cpu", runtime.device == "cpu")
    largest = settings.get("max_micro_batch_size")
    if largest is not None and largest > training.micro_batch_size:
        draft.notes.append(f"per_device_train_batch_size={training.micro_batch_size} as budgeted; up to {largest} fits")


def _hf_optimizer(draft: _HfDraft, workload: Workload) -> None:
    training, device = workload.training, workload.runtime.device
    assert training is not None
    if training.optimizer in HF_REFUSED_OPTIMIZERS:
        draft.refuse(f"optimizer {training.optimizer}: {HF_REFUSED_OPTIMIZERS[training.optimizer]}")
        return
    optim, optim_args = HF_OPTIMIZERS[training.optimizer]
    impl = training.optimizer_impl
    if training.optimizer == "adamw" and impl == "fused":
        optim = "adamw_torch_fused"
    elif impl is not None and impl != default_optimizer_impl(device):
        draft.refuse(
            f"optimizer_impl {impl}: transformers' {optim} leaves torch its {device} default"
            f" ({default_optimizer_impl(device)}) and passes no foreach (trainer_optimizer.py:203-209)"
        )
    draft.set("optim", optim)
    if optim_args is not None:
        draft.set("optim_args", optim_args)


def _hf_notes(stack: HfStack, kind: str, zero_stage: int) -> list[str]:
    pins = " ".join(f"{name}=={release}" for name, release in stack.releases.items())
    notes = [f"pip install {pins}" + (" deepspeed" if kind == "DEEPSPEED" else ""),
             f"write the accelerate config (the launch's file) to {ACCELERATE_CONFIG}: TRL's"
             f" {hf_base_config(kind, zero_stage)}.yaml with the budget's settings",
             f"the dataset is TRL's example ({HF_DATASET}), packed into rows of max_length tokens (wrapped), so every"
             " step holds what the budget assumed; replace it with yours"]  # fmt: skip
    return notes


def transformers_command(
    workload: Workload, settings: Mapping[str, Any], plan: Plan
) -> tuple[HfCommand, dict[str, Any], list[str]] | str:
    """``accelerate launch … -m trl.scripts.sft …``, its accelerate config and notes, or why there is none."""
    training = workload.training
    assert training is not None
    stack = hf_stack()
    if plan.tensor > 1 or plan.pipeline > 1:
        return ("tensor or pipeline parallelism: this launch runs the HF Trainer's data parallelism (DDP, FSDP2,"
                " DeepSpeed ZeRO) only")  # fmt: skip
    repo = workload.model.hf_repo() if workload.model is not None else None
    if repo is None:
        return "the workload names no checkpoint for trl sft to load (a given architecture)"
    if fused_loss(training.framework, training.fused_loss):
        return (
            "fused_loss: Liger's kernels (use_liger_kernel) replace more than the loss, and no Liger release is pinned"
        )
    if training.loss_chunks > 1:
        return f"loss_chunks {training.loss_chunks}: transformers' ForCausalLMLoss takes the whole logits"
    precision = hf_precision(workload.precision, training, plan)
    if isinstance(precision, str):
        return precision
    if training.method == "qlora" and (plan.zero_stage > 0 or training.cpu_offload != "none"):
        return (f"QLoRA with ZeRO-{plan.zero_stage}: launched on one device or DDP only; sharding a 4-bit base needs"
                " bnb_4bit_quant_storage, which the budget does not model")  # fmt: skip
    draft = _HfDraft()
    kind = _hf_distribution(draft, stack, workload, plan, precision.deepspeed)
    _hf_model(draft, stack, workload, repo, precision)
    _hf_step(draft, workload, settings, plan, precision.mixed)
    draft.set("output_dir", f"{repo.rsplit('/', 1)[-1]}-sft")
    if draft.refusal is not None:
        return draft.refusal
    draft.config["mixed_precision"] = precision.mixed
    env = ((ALLOCATOR, EXPANDABLE),) if workload.runtime.expandable_segments else ()
    launcher = (("--config_file", ACCELERATE_CONFIG), ("--num_processes", str(plan.devices)))
    command = HfCommand(stack.module, tuple(draft.args), launcher, env)
    notes = [*_hf_notes(stack, kind, plan.zero_stage), *precision.notes, *draft.notes]
    return command, draft.config, notes


def transformers_launch(workload: Workload, settings: Mapping[str, Any], plan: Plan) -> Launch | str:
    """The checked launch of ``transformers_command``, its accelerate config as a file, or why there is none."""
    found = transformers_command(workload, settings, plan)
    if isinstance(found, str):
        return found
    command, config, notes = found
    stack = hf_stack()
    files = ((ACCELERATE_CONFIG, json.dumps(config, indent=2) + "\n"),)
    return _checked("transformers", None, command.argv, notes, stack.problems(command.argv, config), stack.label, files)


# ------------------------------------------------------------------------------------------------------------ lit-gpt

#: The lit-gpt commit whose fine-tuning scripts commands are checked against: the profile's.
LITGPT_RELEASE = framework_profile("litgpt").release or ""
#: The script that runs a lit-gpt finetune script with the budget's settings (``Launch.files``): at 8641822 the
#: hyperparameters (``devices``, ``micro_batch_size``, ``lora_r``, …) are module constants, not flags.
LIT_WRAPPER = "launch_litgpt.py"
#: The finetune script by the workload's method (``finetune/lora.py`` runs QLoRA with ``--quantize``).
LIT_SCRIPTS = {"full": "finetune/full.py", "lora": "finetune/lora.py", "qlora": "finetune/lora.py"}
#: Fabric's ``precision`` for each compute dtype: one dtype throughout (``<p>-true``), what the scripts pass
#: ``L.Fabric(precision=…)`` and, quantized, ``BitsandbytesPrecision(mode, dtype)`` (finetune/lora.py:74).
LIT_PRECISIONS = {"bf16": "bf16-true", "fp16": "16-true", "fp32": "32-true"}
#: The bitsandbytes mode ``--quantize`` names for QLoRA's NF4 base weights (single quantization: the profile's
#: ``nf4_double_quant`` is off).
LIT_QUANTIZE = "bnb.nf4"
#: lit-gpt's LoRA switches (module constants of finetune/lora.py) by the workload's projections: q, k and v are
#: one fused linear with per-part switches (lit_gpt/lora.py LoRAQKVLinear), ``lora_mlp`` adapts the MLP's three
#: linears (lit_gpt/lora.py:586-636), ``lora_projection`` the attention output.
LIT_LORA = {"q_proj": "lora_query", "k_proj": "lora_key", "v_proj": "lora_value", "o_proj": "lora_projection"}


@dataclass(frozen=True, slots=True)
class LitCommand:
    """``[env VAR=value …] python launch_litgpt.py --flag value …`` and the wrapper it runs: the finetune script
    (``finetune/lora.py``) and the module constants set before its ``setup`` runs, in order."""

    script: str
    constants: tuple[tuple[str, object], ...]
    flags: tuple[tuple[str, str], ...]
    env: tuple[tuple[str, str], ...] = ()

    @property
    def argv(self) -> tuple[str, ...]:
        env = ("env", *(f"{name}={value}" for name, value in self.env)) if self.env else ()
        return (*env, "python", LIT_WRAPPER, *(item for pair in self.flags for item in pair))

    @property
    def wrapper(self) -> str:
        module = self.script.removesuffix(".py").replace("/", ".")
        lines = [
            f'"""Runs lit-gpt {LITGPT_RELEASE}\'s {self.script} with the budget\'s settings: its hyperparameters are'
            " module\nconstants, not flags (jsonargparse's CLI(setup) takes setup's parameters only), so they are set"
            ' here before setup runs.\nRun from the root of a lit-gpt checkout at that commit."""',
            "",
            "import sys",
            "from pathlib import Path",
            "",
            "sys.path.insert(0, str(Path(__file__).resolve().parent))",
            "",
            "import torch",
            "from jsonargparse import CLI",
            "",
            f"import {module} as script",
            "",
            *(f"script.{name} = {value!r}" for name, value in self.constants),
            "script.gradient_accumulation_iters = max(1, int(script.batch_size // script.micro_batch_size))",
            "script.hparams.update({name: getattr(script, name) for name in script.hparams})",
            "",
            'if __name__ == "__main__":',
            '    torch.set_float32_matmul_precision("high")  # as the script\'s own __main__',
            "    CLI(script.setup)",
            "",
        ]
        return "\n".join(lines)

    @property
    def files(self) -> tuple[tuple[str, str], ...]:
        return ((LIT_WRAPPER, self.wrapper),)


@dataclass(frozen=True, slots=True)
class LitgptRelease:
    """lit-gpt's fine-tuning scripts at one commit (``setup``'s parameters, the module constants), its helper scripts'
    parameters and its model configs, as extracted by ``tools/engine_args/extract_litgpt.py``."""

    release: str
    scripts: Mapping[str, Mapping[str, Any]]
    helpers: Mapping[str, Mapping[str, Any]]
    configs: Mapping[str, Mapping[str, Any]]
    source: Mapping[str, Any] = field(default_factory=dict)

    def problems(self, argv: Sequence[str], files: Sequence[tuple[str, str]]) -> list[str]:
        """What lit-gpt at this commit would refuse in ``argv`` and its wrapper, or silently not read: a constant the
        script does not have, a flag ``setup`` does not take, a value it refuses, a model it has no config of."""
        _, rest = split_env(argv)
        if rest[:2] != ["python", LIT_WRAPPER] or LIT_WRAPPER not in dict(files):
            return [f"the command is python {LIT_WRAPPER} with that file beside it"]
        try:
            script, constants = self.read_wrapper(dict(files)[LIT_WRAPPER])
        except (LaunchError, SyntaxError) as exc:
            return [f"{LIT_WRAPPER}: {exc}"]
        entry = self.scripts[script]
        found = [f"{script}: has no module constant {name} at lit-gpt {self.release}, it would be ignored"
                 for name in constants if name not in entry["globals"]]  # fmt: skip
        items = rest[2:]
        if len(items) % 2:
            return [*found, "flags take one value each"]
        flags = dict(zip(items[::2], items[1::2], strict=True))
        found += self.flag_problems(script, "setup", entry["setup"], flags)
        quantize, precision = flags.get("--quantize"), flags.get("--precision", "")
        if quantize is not None and precision not in entry["quantize_dtypes"]:
            found.append(f"--quantize with --precision {precision}: {script} quantizes with one of"
                         f" {', '.join(entry['quantize_dtypes'])}")  # fmt: skip
        if quantize is not None and constants.get("devices", 1) != 1:
            found.append(f"--quantize on {constants['devices']} devices: {script} refuses it (NotImplementedError)")
        model = flags.get("--checkpoint_dir", "").removeprefix("checkpoints/")
        if model not in self.configs:
            found.append(
                f"--checkpoint_dir checkpoints/{model}: no config of lit-gpt {self.release} (lit_gpt/config.py)"
            )
        return found

    def flag_problems(
        self, script: str, function: str, parameters: Mapping[str, Any], flags: Mapping[str, str]
    ) -> list[str]:
        found = []
        for flag, value in flags.items():
            entry = parameters.get(flag.removeprefix("--")) if flag.startswith("--") else None
            if entry is None:
                found.append(f"{flag}: not a parameter of {script}'s {function} at lit-gpt {self.release}")
            elif entry["choices"] and value not in entry["choices"]:
                found.append(f"{flag} {value}: not one of {', '.join(entry['choices'])}")
            elif not entry["choices"] and re.search(r"\bint\b", entry["annotation"]) and not value.isdigit():
                found.append(f"{flag} {value}: not an int")
        return found

    def helper_problems(self, argv: Sequence[str]) -> list[str]:
        """What a helper script (``python scripts/prepare_alpaca.py --flag value …``) would refuse."""
        if list(argv[:1]) != ["python"] or argv[1] not in self.helpers or len(argv) % 2:
            return [f"{' '.join(argv[:2])}: not a helper script of lit-gpt {self.release}"]
        helper = self.helpers[argv[1]]
        flags = dict(zip(argv[2::2], argv[3::2], strict=True))
        return self.flag_problems(argv[1], helper["function"], helper["parameters"], flags)

    def read_wrapper(self, text: str) -> tuple[str, dict[str, Any]]:
        """The finetune script a wrapper imports and the constants it sets (``script.<name> = <literal>``); a
        wrapper that does not end by handing ``script.setup`` to jsonargparse's CLI is refused."""
        tree = ast.parse(text)
        imports = [alias.name for node in tree.body if isinstance(node, ast.Import) for alias in node.names
                   if alias.asname == "script"]  # fmt: skip
        script = f"{imports[0].replace('.', '/')}.py" if len(imports) == 1 else ""
        if script not in self.scripts:
            raise LaunchError(f"imports no finetune script of lit-gpt {self.release} as script")
        constants: dict[str, Any] = {}
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                if isinstance(target, ast.Attribute) and ast.unparse(target.value) == "script":
                    try:
                        constants[target.attr] = ast.literal_eval(node.value)
                    except ValueError:
                        constants[target.attr] = ast.unparse(node.value)
        main = [node for node in tree.body if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)]
        if not main or "CLI(script.setup)" not in ast.unparse(main[0]):
            raise LaunchError("does not run CLI(script.setup) under __main__")
        return script, constants


@cache
def litgpt_release(release: str) -> LitgptRelease:
    data = json.loads((FIXTURES / f"litgpt-{release}.json").read_text())
    return LitgptRelease(data["release"], data["scripts"], data["helpers"], data["configs"], data["source"])


def _lit_precision(draft: _Draft, workload: Workload) -> str | None:
    """Fabric's ``--precision``: one dtype throughout (finetune/*.py pass it to ``L.Fabric``), QLoRA's base in
    bitsandbytes' NF4 under it."""
    precision, training = workload.precision, workload.training
    assert training is not None and precision.compute is not None
    dtype = precision.compute
    if dtype not in LIT_PRECISIONS:
        draft.refuse(f"{dtype} compute: lit-gpt trains in {', '.join(LIT_PRECISIONS)} (Fabric's <dtype>-true)")
        return None
    if training.method == "qlora":
        if precision.weights != "nf4":
            draft.refuse(f"QLoRA with {precision.weights} weights: lit-gpt {LITGPT_RELEASE} quantizes with"
                         " bitsandbytes (bnb.nf4, bnb.fp4, bnb.int8-training), not that format")  # fmt: skip
    elif precision.weights != dtype:
        draft.refuse(f"{precision.weights} weights with {dtype} compute: lit-gpt holds the weights in the precision"
                     f" it computes in ({LIT_PRECISIONS[dtype]}), mixed precision keeps them in fp32")  # fmt: skip
    if precision.master_weights is not None:
        draft.notes.append(f"no {precision.master_weights} master copy: {LIT_PRECISIONS[dtype]} keeps the parameters"
                           f" and optimizer states in {dtype}, " + LESS)  # fmt: skip
    if precision.gradients != dtype and training.method == "full":
        draft.notes.append(f"gradients in {dtype}, not {precision.gradients}: " + LESS)
    return LIT_PRECISIONS[dtype]


def _lit_refusals(draft: _Draft, workload: Workload, plan: Plan, script: str) -> None:
    """What the scripts cannot run as budgeted: they build AdamW (bitsandbytes' PagedAdamW quantized) with its
    default step, no offloading, no compile; FSDP, with every Block recomputed, only on more than one device."""
    training, runtime = workload.training, workload.runtime
    assert training is not None
    if training.optimizer != "adamw":
        draft.refuse(f"the {training.optimizer} optimizer: {script} builds AdamW")
    elif training.optimizer_impl in ("fused", "for_loop"):
        draft.refuse(f"AdamW's {training.optimizer_impl} step: {script} builds torch.optim.AdamW with its default step")
    if training.method == "qlora":
        draft.notes.append("the optimizer is bitsandbytes' PagedAdamW (finetune/lora.py:141): 32-bit states as"
                           " AdamW's, paged to host memory under pressure")  # fmt: skip
    if training.cpu_offload != "none":
        draft.refuse(f"{training.cpu_offload} CPU offload: lit-gpt's FSDPStrategy has cpu_offload=False")
    if training.activation_offloading:
        draft.refuse("activation offloading: lit-gpt has none")
    if training.optimizer_in_backward:
        draft.refuse("an optimizer step in the backward: lit-gpt steps after the accumulation")
    if runtime.compile:
        draft.refuse(f"torch.compile: {script} does not compile the model")
    recompute = plan.recompute or training.activation_checkpointing
    if plan.devices == 1 and recompute != "none":
        draft.refuse(f"activation_checkpointing {recompute} on one device: {script} recomputes only under FSDP"
                     " on more than one (activation_checkpointing_policy={Block}, finetune/lora.py:85,"
                     " full.py:64)")  # fmt: skip
    if plan.devices > 1:
        if training.method == "qlora":
            draft.refuse("QLoRA on more than one device: finetune/lora.py refuses quantization there")
        if recompute != "full":
            draft.notes.append(f"activation_checkpointing {recompute}: under FSDP every Block is recomputed"
                               " (activation_checkpointing_policy={Block}), " + LESS)  # fmt: skip
        if plan.zero_stage < 3:
            draft.notes.append(f"ZeRO-{plan.zero_stage}: lit-gpt's FSDPStrategy shards fully (FULL_SHARD, ZeRO-3), "
                               + LESS)  # fmt: skip
    if runtime.attention == "eager":
        draft.notes.append("attention runs in SDPA (lit_gpt/model.py), not eager: no score matrix, " + LESS)


def _lit_lora(draft: _Draft, workload: Workload) -> list[tuple[str, object]]:
    training = workload.training
    assert training is not None
    if training.method == "full":
        return []
    targets = adapted_projections(list(training.lora.target_modules))
    mlp = targets - set(LIT_LORA)
    if mlp and len(mlp) != len(set(PROJECTIONS) - set(LIT_LORA)):
        draft.refuse(f"LoRA on {', '.join(sorted(mlp))} alone: lit-gpt's lora_mlp adapts the MLP's linears together")
    switches: list[tuple[str, object]] = [(switch, name in targets) for name, switch in LIT_LORA.items()]
    return [("lora_r", training.lora.rank), ("lora_dropout", training.lora.dropout), *switches,
            ("lora_mlp", bool(mlp)), ("lora_head", False)]  # fmt: skip


def litgpt_command(workload: Workload, settings: Mapping[str, Any], plan: Plan) -> tuple[LitCommand, list[str]] | str:
    """The lit-gpt command for the plan and its notes, or why there is none."""
    training = workload.training
    assert training is not None
    release = litgpt_release(LITGPT_RELEASE)
    repo = workload.model.hf_repo() if workload.model is not None else None
    if repo is None or repo not in release.configs:
        return (f"lit-gpt {release.release} has no config of {repo or 'this model'} (lit_gpt/config.py;"
                " Config.from_name reads checkpoint_dir's name)")  # fmt: skip
    if plan.tensor > 1 or plan.pipeline > 1:
        return f"tensor or pipeline parallelism: lit-gpt {release.release}'s finetune scripts shard with FSDP only"
    if workload.runtime.device != "cuda":
        return f"the {workload.runtime.device}: lit-gpt's scripts leave the accelerator to Fabric, the command cannot"
    block = release.configs[repo]["block_size"]
    if training.sequence_length > block:
        return f"sequence_length {training.sequence_length}: {repo}'s lit-gpt config has block_size {block}"
    script = LIT_SCRIPTS[training.method]
    draft = _Draft()
    precision = _lit_precision(draft, workload)
    _lit_refusals(draft, workload, plan, script)
    lora = _lit_lora(draft, workload)
    if draft.refusal is not None or precision is None:
        return draft.refusal or "no precision"
    constants = (("devices", plan.devices), ("micro_batch_size", training.micro_batch_size), *lora)
    flags = [("--checkpoint_dir", f"checkpoints/{repo}"), ("--data_dir", "data/alpaca"), ("--precision", precision)]
    if training.method == "qlora":
        flags.append(("--quantize", LIT_QUANTIZE))
    env = ((ALLOCATOR, EXPANDABLE),) if workload.runtime.expandable_segments else ()
    command = LitCommand(script, constants, tuple(flags), env)
    first = " && ".join(shlex.join(argv) for argv in lit_preparation(repo, training.sequence_length))
    notes = [f"first, in a lit-gpt checkout at {release.source['commit']}: {first}; the longest prepared example"
             f" sets the run's sequence length (finetune/{Path(script).name} get_longest_seq_length), at most"
             f" {training.sequence_length}", *draft.notes]  # fmt: skip
    largest = settings.get("max_micro_batch_size")
    if largest is not None and largest > training.micro_batch_size:
        notes.append(f"micro_batch_size={training.micro_batch_size} as budgeted; up to {largest} fits this plan")
    return command, notes


def lit_preparation(repo: str, sequence_length: int) -> tuple[tuple[str, ...], ...]:
    """Download and convert the checkpoint, then tokenize Alpaca cut to ``sequence_length`` tokens."""
    checkpoint = f"checkpoints/{repo}"
    return (
        ("python", "scripts/download.py", "--repo_id", repo),
        ("python", "scripts/convert_hf_checkpoint.py", "--checkpoint_dir", checkpoint),
        ("python", "scripts/prepare_alpaca.py", "--checkpoint_dir", checkpoint,
         "--max_seq_length", str(sequence_length)),
    )  # fmt: skip


def litgpt_launch(workload: Workload, settings: Mapping[str, Any], plan: Plan) -> Launch | str:
    """The checked launch of ``litgpt_command``, or why there is none."""
    found = litgpt_command(workload, settings, plan)
    if isinstance(found, str):
        return found
    command, notes = found
    release = litgpt_release(LITGPT_RELEASE)
    repo = command.flags[0][1].removeprefix("checkpoints/")
    length = workload.training.sequence_length if workload.training is not None else 0
    problems = release.problems(command.argv, command.files)
    problems += [p for argv in lit_preparation(repo, length) for p in release.helper_problems(argv)]
    return _checked(
        "litgpt", release.release, command.argv, notes, problems, f"lit-gpt {release.release}", command.files
    )


# ------------------------------------------------------------------------------------------------------------ Unsloth

#: The Unsloth release whose functions a training script is checked against: the profile's (unslothai/unsloth
#: 400d995), with the TRL and transformers releases the fixture read (``tools/engine_args/extract_unsloth.py``).
UNSLOTH_RELEASE = framework_profile("unsloth").release or ""
#: The script a run is (Unsloth has no command line): ``python train_unsloth.py``.
UNSLOTH_SCRIPT = "train_unsloth.py"
#: ``dtype=`` for from_pretrained and the TrainingArguments flag that sets autocast, by the compute precision
#: (unsloth/models/llama.py:1577 asserts float16, bfloat16 or float32).
UNSLOTH_DTYPES = {
    "bf16": ("torch.bfloat16", "bf16"),
    "fp16": ("torch.float16", "fp16"),
    "fp32": ("torch.float32", None),
}
#: TrainingArguments' ``optim`` by the workload's optimizer (``OptimizerNames`` of the fixture's transformers);
#: AdamW's step by ``optimizer_impl`` (None and foreach: ``adamw_torch``, torch's default step on CUDA).
UNSLOTH_OPTIMIZERS = {
    "adamw": "adamw_torch",
    "adamw_8bit": "adamw_8bit",
    "paged_adamw_8bit": "paged_adamw_8bit",
    "sgd": "sgd",
    "adafactor": "adafactor",
    "lion": "lion_32bit",
}
#: The functions a script calls and the fixture's keyword lists each is checked against.
UNSLOTH_CALLS = {
    "FastLanguageModel.from_pretrained": ("from_pretrained",),
    "FastLanguageModel.get_peft_model": ("get_peft_model",),
    "SFTConfig": ("sft_config", "training_arguments"),
    "SFTTrainer": ("sft_trainer",),
}


@dataclass(frozen=True, slots=True)
class UnslothRelease:
    """Unsloth 2024.12's ``FastLanguageModel`` and the TRL and transformers keywords its script passes, as extracted
    (``tools/engine_args/extract_unsloth.py``): their functions take ``**kwargs``, so a misspelt keyword would be
    passed on and never read; the check refuses it."""

    release: str
    keywords: Mapping[str, tuple[str, ...]]
    model_types: tuple[str, ...]
    optimizers: tuple[str, ...]
    source: Mapping[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        trl, transformers = self.source["trl"]["wheel"], self.source["transformers"]["wheel"]
        versions = [name.split("-")[1] for name in (trl, transformers)]
        return f"unsloth {self.release} (TRL {versions[0]}, transformers {versions[1]})"

    def problems(self, argv: Sequence[str], files: Sequence[tuple[str, str]]) -> list[str]:
        """What the script would pass on unread or refuse: a keyword none of the called function's lists names, an
        ``optim`` or ``use_gradient_checkpointing`` value the release does not take, a call missing."""
        _, rest = split_env(argv)
        if rest != ["python", UNSLOTH_SCRIPT] or UNSLOTH_SCRIPT not in dict(files):
            return [f"the command is python {UNSLOTH_SCRIPT} with that file beside it"]
        try:
            tree = ast.parse(dict(files)[UNSLOTH_SCRIPT])
        except SyntaxError as exc:
            return [f"{UNSLOTH_SCRIPT}: {exc}"]
        found: list[str] = []
        called: set[str] = set()
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or ast.unparse(node.func) not in UNSLOTH_CALLS:
                continue
            name = ast.unparse(node.func)
            called.add(name)
            known = {key for entry in UNSLOTH_CALLS[name] for key in self.keywords[entry]}
            for keyword in node.keywords:
                if keyword.arg is None or keyword.arg not in known:
                    found.append(f"{name}({keyword.arg}=…): not a parameter in {self.label}, it would be ignored")
                    continue
                found += self._value_problems(name, keyword.arg, keyword.value)
        found += [f"{name}: not called" for name in UNSLOTH_CALLS if name not in called]
        return found

    def _value_problems(self, name: str, keyword: str, value: ast.expr) -> list[str]:
        try:
            literal = ast.literal_eval(value)
        except ValueError:
            return []
        if keyword == "optim" and literal not in self.optimizers:
            return [f"{name}(optim={literal!r}): not one of transformers' OptimizerNames"]
        if keyword == "use_gradient_checkpointing" and literal not in (True, False, "unsloth"):
            return [f"{name}(use_gradient_checkpointing={literal!r}): True, False or 'unsloth'"]
        return []


@cache
def unsloth_release(release: str) -> UnslothRelease:
    data = json.loads((FIXTURES / f"unsloth-{release}.json").read_text())
    names = ("from_pretrained", "get_peft_model", "sft_config", "sft_trainer", "training_arguments")
    keywords = {name: tuple(data[name]) for name in names}
    return UnslothRelease(
        data["release"], keywords, tuple(data["model_types"]), tuple(data["optimizers"]), data["source"]
    )


def _unsloth_checkpointing(draft: _Draft, workload: Workload, plan: Plan) -> object:
    """``use_gradient_checkpointing``: "unsloth" recomputes each layer from its input offloaded to host memory
    (unsloth_zoo gradient_checkpointing.py:145-175), True recomputes each layer from its input on the device."""
    training = workload.training
    assert training is not None
    recompute = plan.recompute or training.activation_checkpointing
    if recompute == "none":
        if training.activation_offloading:
            draft.refuse("activation offloading without recomputation: Unsloth offloads the checkpointed layer inputs")
        return False
    if recompute != "full":
        draft.notes.append(f"activation_checkpointing {recompute}: Unsloth recomputes whole layers, saving " + LESS)
    return "unsloth" if training.activation_offloading else True


def _unsloth_refusals(draft: _Draft, workload: Workload, plan: Plan, release: UnslothRelease) -> None:
    training, runtime, precision = workload.training, workload.runtime, workload.precision
    assert training is not None
    if training.method == "full":
        draft.refuse("full fine-tuning: the Unsloth launch trains LoRA adapters (FastLanguageModel.get_peft_model)")
    if training.method == "qlora" and precision.weights != "nf4":
        draft.refuse(f"QLoRA with {precision.weights} weights: Unsloth's load_in_4bit loads bitsandbytes' NF4")
    if training.method == "lora" and precision.weights != precision.compute:
        draft.refuse(f"{precision.weights} weights with {precision.compute} compute: Unsloth loads the weights in"
                     " the dtype it computes in")  # fmt: skip
    if precision.compute not in UNSLOTH_DTYPES:
        draft.refuse(f"{precision.compute} compute: Unsloth computes in float16, bfloat16 or float32 (llama.py:1577)")
    optim = UNSLOTH_OPTIMIZERS.get(training.optimizer)
    if optim is None or optim not in release.optimizers:
        draft.refuse(
            f"the {training.optimizer} optimizer: no optim of transformers' OptimizerNames runs it as budgeted"
        )
    if training.optimizer == "adamw" and training.optimizer_impl == "for_loop":
        draft.refuse("the for-loop AdamW step: TrainingArguments' optim has none")
    if training.cpu_offload != "none":
        draft.refuse(f"{training.cpu_offload} CPU offload: the script runs one process without DeepSpeed or FSDP")
    if training.optimizer_in_backward:
        draft.refuse("an optimizer step in the backward: the Trainer steps after the accumulation")
    if runtime.compile:
        draft.refuse("torch.compile: the Unsloth launch does not compile")
    if runtime.attention == "eager":
        draft.notes.append("attention runs in Unsloth's kernels (xformers or flash-attention), not eager: no score"
                           " matrix, " + LESS)  # fmt: skip


def _unsloth_script(workload: Workload, repo: str, checkpointing: object) -> str:
    training, precision = workload.training, workload.precision
    assert training is not None and precision.compute is not None
    dtype, flag = UNSLOTH_DTYPES[precision.compute]
    targets = sorted(adapted_projections(list(training.lora.target_modules)), key=list(PROJECTIONS).index)
    optim = UNSLOTH_OPTIMIZERS[training.optimizer]
    if training.optimizer == "adamw" and training.optimizer_impl == "fused":
        optim = "adamw_torch_fused"
    length = training.sequence_length
    lines = [
        f'"""Unsloth {UNSLOTH_RELEASE} (unslothai/unsloth 400d995): LoRA fine-tuning of {repo} as budgeted.',
        "The dataset is an example (stanfordnlp/imdb's text column): replace it with yours, cut to",
        f'{length} tokens (max_seq_length)."""',
        "",
        "from unsloth import FastLanguageModel  # first: Unsloth patches transformers and TRL when imported",
        "",
        "import torch",
        "from datasets import load_dataset",
        "from trl import SFTConfig, SFTTrainer",
        "",
        "model, tokenizer = FastLanguageModel.from_pretrained(",
        f"    model_name={repo!r},",
        f"    max_seq_length={length},",
        f"    dtype={dtype},",
        f"    load_in_4bit={training.method == 'qlora'},",
        f"    use_gradient_checkpointing={checkpointing!r},",
        ")",
        "model = FastLanguageModel.get_peft_model(",
        "    model,",
        f"    r={training.lora.rank},",
        f"    target_modules={targets!r},",
        f"    lora_alpha={training.lora.rank},",
        f"    lora_dropout={training.lora.dropout},",
        f"    use_gradient_checkpointing={checkpointing!r},",
        ")",
        'dataset = load_dataset("stanfordnlp/imdb", split="train")',
        "trainer = SFTTrainer(",
        "    model=model,",
        "    processing_class=tokenizer,",
        "    train_dataset=dataset,",
        "    args=SFTConfig(",
        '        output_dir="outputs",',
        '        dataset_text_field="text",',
        f"        max_seq_length={length},",
        "        packing=False,",
        f"        per_device_train_batch_size={training.micro_batch_size},",
        f"        optim={optim!r},",
        f"        bf16={flag == 'bf16'},",
        f"        fp16={flag == 'fp16'},",
        "    ),",
        ")",
        "trainer.train()",
        "",
    ]
    return "\n".join(lines)


def unsloth_launch(workload: Workload, settings: Mapping[str, Any], plan: Plan) -> Launch | str:
    """``python train_unsloth.py`` and that script (``Launch.files``), checked against the release's keywords; or
    why there is none."""
    training = workload.training
    assert training is not None
    release = unsloth_release(UNSLOTH_RELEASE)
    repo = workload.model.hf_repo() if workload.model is not None else None
    if plan.devices > 1:
        return f"{plan.devices} devices: the Unsloth {release.release} script runs one process on one GPU"
    if workload.runtime.device != "cuda":
        return f"the {workload.runtime.device}: Unsloth {release.release} runs on CUDA GPUs only"
    if repo is None or workload.spec.model_type not in release.model_types:
        return (f"model_type {workload.spec.model_type}: FastLanguageModel.from_pretrained of Unsloth"
                f" {release.release} loads {', '.join(release.model_types)} (unsloth/models/loader.py)")  # fmt: skip
    draft = _Draft()
    _unsloth_refusals(draft, workload, plan, release)
    checkpointing = _unsloth_checkpointing(draft, workload, plan)
    if draft.refusal is not None:
        return draft.refusal
    env = []
    if workload.runtime.expandable_segments:
        env.append((ALLOCATOR, EXPANDABLE))
    if fused_loss("unsloth", training.fused_loss):
        draft.notes.append("the loss is cut cross-entropy, no logits, when the cut_cross_entropy package is"
                           " installed (unsloth/models/llama.py:983-1000): install it, or the logits are"
                           " materialized")  # fmt: skip
    else:
        env.append(("UNSLOTH_RETURN_LOGITS", "1"))  # llama.py:983: the logits, not the fused loss
    largest = settings.get("max_micro_batch_size")
    if largest is not None and largest > training.micro_batch_size:
        draft.notes.append(f"per_device_train_batch_size={training.micro_batch_size} as budgeted; up to {largest}"
                           " fits this plan")  # fmt: skip
    prefix = ("env", *(f"{name}={value}" for name, value in env)) if env else ()
    argv = (*prefix, "python", UNSLOTH_SCRIPT)
    files = ((UNSLOTH_SCRIPT, _unsloth_script(workload, repo, checkpointing)),)
    return _checked("unsloth", release.release, argv, draft.notes, release.problems(argv, files), release.label, files)


def _checked(
    engine: str,
    release: str | None,
    argv: tuple[str, ...],
    notes: Sequence[str],
    problems: Sequence[str],
    checked_against: str | None = None,
    files: tuple[tuple[str, str], ...] = (),
) -> Launch:
    """The launch of a command its release's check found no ``problems`` in (``checked_against``: what passed it, by
    default "<engine> <release>"); a problem is a bug in this module, never the user's input, and raises."""
    if problems:
        raise LaunchError("; ".join(problems))
    return Launch(engine, checked_against or f"{engine} {release}", argv, tuple(notes), files)


LAUNCHERS: dict[str, Callable[[Workload, Mapping[str, Any], Plan], Launch | str]] = {
    "transformers": transformers_launch,
    "torchtune": torchtune_launch,
    "torchtitan": torchtitan_launch,
    "litgpt": litgpt_launch,
    "unsloth": unsloth_launch,
}


def _launch(workload: Workload, settings: Mapping[str, Any], plan: Plan) -> Launch | str:
    training = workload.training
    if workload.task != "training" or training is None:
        return "not a training workload"
    launcher = LAUNCHERS.get(training.framework)
    return UNLAUNCHED_FRAMEWORKS[training.framework] if launcher is None else launcher(workload, settings, plan)


def training_launch(workload: Workload, settings: Mapping[str, Any], plan: Plan) -> Launch | None:
    """The command that runs a training workload's ``plan`` (``settings``: the entry's suggested settings), checked
    against the framework's pinned release; None for another task, a framework without a launch
    (``UNLAUNCHED_FRAMEWORKS``) or a plan the framework cannot run as budgeted (``no_training_launch`` says why)."""
    found = _launch(workload, settings, plan)
    return found if isinstance(found, Launch) else None


def no_training_launch(workload: Workload, settings: Mapping[str, Any], plan: Plan) -> str | None:
    """Why ``training_launch`` gives no command for this plan; None when it gives one."""
    found = _launch(workload, settings, plan)
    return found if isinstance(found, str) else None


def _flag(value: str) -> bool:
    return value == "True"


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
    data = command.nproc_per_node // tensor
    zero = 0 if data == 1 else (3 if _flag(values["fsdp_reshard_after_forward"]) else 2)
    update = {"training": trained, "precision": precision, "runtime": runtime}
    return workload.model_copy(update=update), Plan(tensor, 1, data, zero)


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
    fsdp = shard > 1
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
    zero = (2 if config["parallelism.fsdp_reshard_after_forward"] == "never" else 3) if fsdp else 0
    return workload.model_copy(update=update), Plan(tensor, pipeline, replicate * shard, zero)


def _hf_read_precision(workload: Workload, command: HfCommand, config: Mapping[str, Any], plan: Plan) -> PrecisionSpec:
    """The precision a command runs: the workload's where it runs as these flags, else what the flags say."""
    assert workload.training is not None
    method = _hf_method(command)
    own = hf_precision(workload.precision, workload.training.model_copy(update={"method": method}), plan)
    dtype = {value: name for name, value in HF_DTYPES.items()}[command.value("dtype", "float32") or ""]
    four_bit = _flag(command.value("load_in_4bit", "False") or "")
    if (
        not isinstance(own, str)
        and (own.dtype, own.mixed, bool(own.four_bit)) == (command.value("dtype"), config["mixed_precision"], four_bit)
        and all(command.value(name) == value for name, value in own.four_bit)
    ):
        return workload.precision
    weights = "nf4" if method == "qlora" else dtype
    master = "fp32" if config["mixed_precision"] != "no" else None
    update = {"weights": weights, "compute": dtype, "kv_cache": dtype, "gradients": dtype, "master_weights": master}
    return workload.precision.model_copy(update=update)


def _hf_method(command: HfCommand) -> str:
    if not _flag(command.value("use_peft", "False") or ""):
        return "full"
    return "qlora" if _flag(command.value("load_in_4bit", "False") or "") else "lora"


def _hf_read_lora(command: HfCommand, training: TrainingSpec) -> LoraSpec:
    targets = list(command.values["lora_target_modules"])
    return training.lora.model_copy(
        update={
            "rank": int(command.value("lora_r") or 0),
            "dropout": float(command.value("lora_dropout") or 0),
            "target_modules": ["all-linear"] if targets == [hf_stack().all_linear] else targets,
        }
    )


def _hf_read_offload(config: Mapping[str, Any]) -> str:
    if config["distributed_type"] == "DEEPSPEED":
        deepspeed = config["deepspeed_config"]
        if deepspeed["offload_param_device"] == "cpu":
            return "parameters"
        return "optimizer" if deepspeed["offload_optimizer_device"] == "cpu" else "none"
    if config["distributed_type"] == "FSDP" and config["fsdp_config"]["fsdp_offload_params"]:
        return "parameters"
    return "none"


def _hf_read_optimizer(command: HfCommand, training: TrainingSpec, device: str) -> tuple[str, str | None]:
    """The workload's optimizer and ``optimizer_impl`` (its own where ``--optim`` runs it as the device default)."""
    optim, args = command.value("optim"), command.value("optim_args")
    if optim == "adamw_torch_fused":
        return "adamw", "fused"
    name = next(key for key, value in HF_OPTIMIZERS.items() if value == (optim, args))
    impl = training.optimizer_impl if training.optimizer_impl in (None, default_optimizer_impl(device)) else None
    return name, impl


def workload_from_transformers(
    argv: Sequence[str], files: Sequence[tuple[str, str]], workload: Workload
) -> tuple[Workload, Plan]:
    """The workload and plan an ``accelerate launch … -m trl.scripts.sft`` command and its accelerate config run:
    ``workload`` (its model) with every setting they set. What a budget of the run reads, read back."""
    command = HfCommand.parse(argv)
    config = json.loads(dict(files)[ACCELERATE_CONFIG])
    training = workload.training
    assert training is not None
    kind = config["distributed_type"]
    zero = config["deepspeed_config"]["zero_stage"] if kind == "DEEPSPEED" else 0
    if kind == "FSDP":
        zero = 3 if config["fsdp_config"]["fsdp_reshard_after_forward"] else 2
    plan = Plan(1, 1, int(config["num_processes"]), zero)
    device = "cpu" if _flag(command.value("use_cpu", "False") or "") else "cuda"
    optimizer, impl = _hf_read_optimizer(command, training, device)
    method = _hf_method(command)
    trained = training.model_copy(
        update={
            "method": method,
            "lora": _hf_read_lora(command, training) if method != "full" else training.lora,
            "micro_batch_size": int(command.value("per_device_train_batch_size") or 0),
            "sequence_length": int(command.value("max_length") or 0),
            "activation_checkpointing": "full" if _flag(command.value("activation_checkpointing") or "") else "none",
            "optimizer": optimizer,
            "optimizer_impl": impl,
            "cpu_offload": _hf_read_offload(config),
        }
    )
    attention = {value: name for name, value in HF_ATTENTION.items()}[command.value("attn_implementation") or ""]
    runtime = workload.runtime.model_copy(
        update={
            "device": device,
            "compile": _flag(command.value("torch_compile") or ""),
            "attention": attention,
            "expandable_segments": dict(command.env).get(ALLOCATOR) == EXPANDABLE,
        }
    )
    precision = _hf_read_precision(workload, command, config, plan)
    update = {"training": trained, "precision": precision, "runtime": runtime}
    return workload.model_copy(update=update), plan
