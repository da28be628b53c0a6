"""lit-gpt's training launches (``recommendations.training_launch``).

A lit-gpt workload's entry gets ``python launch_litgpt.py --checkpoint_dir checkpoints/<repo> --data_dir data/alpaca
--precision <p>-true [--quantize bnb.nf4]`` and that wrapper (``Launch.files``): at commit 8641822 (the profile's)
``jsonargparse.CLI(setup)`` takes ``setup``'s parameters only, and the devices, micro batch and LoRA settings are
module constants of ``finetune/full.py`` and ``finetune/lora.py``, which the wrapper sets before handing ``setup`` to
the CLI; the sequence length is the longest example ``scripts/prepare_alpaca.py --max_seq_length`` keeps (a note).
Checked against ``fixtures/engines/litgpt-8641822.json`` (``tools/engine_args/extract_litgpt.py``, the commit's files
by blob id): a constant the script does not have would be set and never read, so the check refuses it, as it does a
flag ``setup`` lacks, a ``--quantize`` outside its ``Literal`` and a model ``lit_gpt/config.py`` has no config of.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from budgets.engine import Workload
from budgets.engine.components.training import PROJECTIONS, adapted_projections
from budgets.engine.frameworks import framework_profile

from ..launch import FIXTURES, Launch, LaunchError
from ..plans import Plan
from .common import ALLOCATOR, EXPANDABLE, LESS, _checked, _Draft, split_env

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
    per = settings.get("devices_per_node")
    if isinstance(per, int) and plan.devices > per:
        return (f"{plan.devices} devices over nodes of {per}: lit-gpt {release.release}'s finetune scripts build"
                " L.Fabric(devices=…) without num_nodes (finetune/lora.py:94, full.py:73), one node")  # fmt: skip
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
