"""Unsloth's training launches (``recommendations.training_launch``).

An Unsloth workload's entry gets ``python train_unsloth.py`` and that script: ``FastLanguageModel.from_pretrained``,
``get_peft_model`` and TRL's ``SFTTrainer``/``SFTConfig`` with every budgeted setting, each keyword checked against
``fixtures/engines/unsloth-2024.12.json`` (``tools/engine_args/extract_unsloth.py``: unslothai/unsloth 400d995, TRL
0.12.1, transformers 4.46.3); their ``**kwargs`` would take a misspelt keyword and never read it.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from budgets.engine import Workload
from budgets.engine.components.training import PROJECTIONS, adapted_projections
from budgets.engine.frameworks import framework_profile, fused_loss

from ..launch import FIXTURES, Launch
from ..plans import Plan
from .common import ALLOCATOR, EXPANDABLE, LESS, _checked, _Draft, call_problems, split_env, value_problems

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
        known = {
            name: frozenset(k for entry in lists for k in self.keywords[entry]) for name, lists in UNSLOTH_CALLS.items()
        }
        unread = f"not a parameter in {self.label}, it would be ignored"
        found, called = call_problems(tree, known, unread, self._value_problems)
        found += [f"{name}: not called" for name in UNSLOTH_CALLS if name not in called]
        return found

    def _value_problems(self, name: str, keyword: str, value: ast.expr) -> list[str]:
        return value_problems(
            name,
            keyword,
            value,
            {
                "optim": (self.optimizers, "not one of transformers' OptimizerNames"),
                "use_gradient_checkpointing": ((True, False, "unsloth"), "True, False or 'unsloth'"),
            },
        )


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
