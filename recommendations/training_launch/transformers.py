"""The transformers (TRL, PEFT, accelerate) training launches (``recommendations.training_launch``).

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
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from budgets.engine import Workload
from budgets.engine.components.training import default_optimizer_impl
from budgets.engine.frameworks import fused_loss
from budgets.engine.profiles.transformers import DEFAULT_TRANSFORMERS_VERSION
from budgets.engine.schema import LoraSpec, PrecisionSpec, TrainingSpec

from ..launch import FIXTURES, HEAD_NODE, Launch, LaunchError
from ..plans import Plan
from ..scratch import SCRATCH_DATASET, SCRATCH_DIR, scratch_model
from .common import ALLOCATOR, EXPANDABLE, FOUR_BIT, LESS, RENDEZVOUS_PORT, _checked, _flag, nodes_for, split_env

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
    files: list[tuple[str, str]] = field(default_factory=list)  # beside the accelerate config
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


#: Why LoRA on a 16-bit base gets no launch but on one process or DDP with an fp32 master copy (PEFT's fp32 adapters,
#: as the budget holds them: ``budgets.engine.training_stage.peft_fp32_adapters``) or under DeepSpeed ZeRO-3.
PEFT_FP32_ADAPTERS = (
    "TRL {trl} leaves PEFT's autocast_adapter_dtype on outside DeepSpeed ZeRO-3 (trl/trainer/sft_trainer.py:846-870):"
    " fp32 adapters on the {weights} base, which copy every adapted projection's input to fp32"
    " (peft/tuners/tuners_utils.py:2220-2235), and DeepSpeed keeps an fp32 master copy: neither is this budget's."
    " The budget holds that PEFT run with precision.master_weights fp32 on one device or DDP (no ZeRO)"
)
PEFT_ADAPTERS_NOTE = (
    "PEFT keeps the adapters in fp32 on the {weights} base (get_peft_model's autocast_adapter_dtype, left on by TRL"
    " outside DeepSpeed ZeRO-3: trl/trainer/sft_trainer.py:846-870) and copies each adapted projection's input to fp32:"
    " the budget's fp32 master copy; --bf16 False keeps autocast off"
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
    16-bit weight copies the budget does not hold. LoRA on a 16-bit base has PEFT's fp32 adapters except under
    DeepSpeed ZeRO-3: with an fp32 master copy on one process or DDP that is the budget's run (plain PEFT, no
    DeepSpeed: ``PEFT_ADAPTERS_NOTE``); otherwise refused (``PEFT_FP32_ADAPTERS``)."""
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
    if training.method == "lora" and weights != "fp32" and mixed and plan.zero_stage == 0:
        return HfPrecision(HF_DTYPES[weights], notes=(PEFT_ADAPTERS_NOTE.format(weights=weights),))
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


def _hf_step(
    draft: _HfDraft, workload: Workload, settings: Mapping[str, Any], plan: Plan, mixed: str, scratch: bool
) -> None:
    """The step's shape and memory: the dataset (a plain-text one for a model built from scratch, whose tokenizer
    has no chat template), micro batch, sequence rows (TRL's wrapped packing: every row ``max_length`` tokens,
    sft_config.py:222-247), recomputation, compile, the optimizer, precision flags, the device."""
    training, runtime = workload.training, workload.runtime
    assert training is not None
    if scratch:
        draft.set("dataset_name", SCRATCH_DATASET[0])
        draft.set("dataset_config", SCRATCH_DATASET[1])
    else:
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


def _hf_notes(stack: HfStack, kind: str, zero_stage: int, scratch: bool) -> list[str]:
    pins = " ".join(f"{name}=={release}" for name, release in stack.releases.items())
    dataset = f"{SCRATCH_DATASET[0]} ({SCRATCH_DATASET[1]}, plain text)" if scratch else f"TRL's example ({HF_DATASET})"
    notes = [f"pip install {pins}" + (" deepspeed" if kind == "DEEPSPEED" else ""),
             f"write the accelerate config (the launch's file) to {ACCELERATE_CONFIG}: TRL's"
             f" {hf_base_config(kind, zero_stage)}.yaml with the budget's settings",
             f"the dataset is {dataset}, packed into rows of max_length tokens (wrapped), so every step holds what"
             " the budget assumed; replace it with yours"]  # fmt: skip
    return notes


def _hf_scratch(draft: _HfDraft, workload: Workload, dtype: str, plan: Plan) -> str | None:
    """For a workload that names no checkpoint, the model built from its numbers (``recommendations.scratch``):
    its config.json and ``init_model.py`` as files, the step that writes the random weights first, and the
    directory to load; or why none can be built."""
    assert workload.training is not None
    # QLoRA's base is quantized as it loads (--load_in_4bit), from the random bf16 weights init_model.py writes
    found = scratch_model(workload, workload.training.sequence_length, FOUR_BIT)
    if isinstance(found, str):
        draft.refuse(f"the workload names no checkpoint for trl sft to load, and vramplan cannot build one: {found}")
        return None
    draft.files += found.init_files
    draft.notes += found.init_notes(workload, plan, dtype, tokenizer=True)
    return SCRATCH_DIR


def transformers_command(
    workload: Workload, settings: Mapping[str, Any], plan: Plan
) -> tuple[HfCommand, dict[str, Any], list[str], tuple[tuple[str, str], ...]] | str:
    """``accelerate launch … -m trl.scripts.sft …``, its accelerate config, notes and other files (a model built
    from the workload's numbers: ``_hf_scratch``), or why there is none."""
    training = workload.training
    assert training is not None
    stack = hf_stack()
    if plan.tensor > 1 or plan.pipeline > 1:
        return ("tensor or pipeline parallelism: this launch runs the HF Trainer's data parallelism (DDP, FSDP2,"
                " DeepSpeed ZeRO) only")  # fmt: skip
    repo = workload.model.hf_repo() if workload.model is not None else None
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
        return (f"QLoRA with ZeRO-{plan.zero_stage}: launched on one device or DDP only. A sharded 4-bit base runs"
                " under FSDP1 with --bnb_4bit_quant_storage bfloat16 (accelerate's FSDP2 has no QLoRA:"
                " huggingface/accelerate#3874), where bitsandbytes keeps every layer's quantization state whole on"
                " each rank (nn/modules.py fix_4bit_weight_quant_state_from_module); the budget shards it, and runs"
                " 37 % under PEFT's published FSDP-QLoRA peak (benchmarks/gpu_published hold-out"
                " peft-fsdp-qlora-2x24gb-llama-2-70b-offload)")  # fmt: skip
    draft = _HfDraft()
    scratch = repo is None
    if repo is None:
        repo = _hf_scratch(draft, workload, precision.dtype, plan)
        if repo is None:
            assert draft.refusal is not None
            return draft.refusal
    kind = _hf_distribution(draft, stack, workload, plan, precision.deepspeed)
    _hf_model(draft, stack, workload, repo, precision)
    _hf_step(draft, workload, settings, plan, precision.mixed, scratch)
    draft.set("output_dir", f"{repo.rsplit('/', 1)[-1]}-sft")
    if draft.refusal is not None:
        return draft.refusal
    draft.config["mixed_precision"] = precision.mixed
    placement = _hf_nodes(draft, plan, settings)
    if isinstance(placement, str):
        return placement
    env = ((ALLOCATOR, EXPANDABLE),) if workload.runtime.expandable_segments else ()
    launcher = (("--config_file", ACCELERATE_CONFIG), ("--num_processes", str(plan.devices)))
    command = HfCommand(stack.module, tuple(draft.args), launcher, env)
    notes = [*_hf_notes(stack, kind, plan.zero_stage, scratch), *placement, *precision.notes, *draft.notes]
    return command, draft.config, notes, tuple(draft.files)


def _hf_nodes(draft: _HfDraft, plan: Plan, settings: Mapping[str, Any]) -> list[str] | str:
    """A plan over several nodes: accelerate's ``num_machines``, ``machine_rank`` 0 and the first node's address in
    the config (``--num_processes`` counts every node's: accelerate 1.15.0's utils/launch.py:216-222 and, for
    DeepSpeed's standard launcher, :488-490 divide it by ``num_machines`` for torchrun's ``--nproc_per_node``, the
    first node's address and port its master's), and the note that says what each node runs."""
    placed = nodes_for(plan.devices, settings)
    if isinstance(placed, str):
        return placed
    nodes, per = placed
    if nodes == 1:
        return []
    draft.config |= {"num_machines": nodes, "machine_rank": 0, "main_process_ip": HEAD_NODE,
                     "main_process_port": RENDEZVOUS_PORT}  # fmt: skip
    return [
        f"{nodes} nodes of {per} processes: run this command on each node with --machine_rank k added (k = 0"
        f" on the first, whose address {HEAD_NODE} is; its main process listens on port {RENDEZVOUS_PORT})"
    ]


def transformers_launch(workload: Workload, settings: Mapping[str, Any], plan: Plan) -> Launch | str:
    """The checked launch of ``transformers_command``, its accelerate config as a file, or why there is none."""
    found = transformers_command(workload, settings, plan)
    if isinstance(found, str):
        return found
    command, config, notes, scratch_files = found
    stack = hf_stack()
    files = ((ACCELERATE_CONFIG, json.dumps(config, indent=2) + "\n"), *scratch_files)
    return _checked("transformers", None, command.argv, notes, stack.problems(command.argv, config), stack.label, files)


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
    # PEFT's fp32 adapters on a 16-bit base, one process or DDP (PEFT_ADAPTERS_NOTE): the budget's fp32 master copy
    peft_fp32 = method == "lora" and dtype in ("bf16", "fp16") and config["distributed_type"] in ("NO", "MULTI_GPU")
    master = "fp32" if config["mixed_precision"] != "no" or peft_fp32 else None
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
