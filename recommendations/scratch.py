"""The model a launch runs when the workload names no checkpoint: the workload's own numbers as a config.json. Pure.

A workload that gives its model as an ``architecture`` (or as a ``hf_config`` with no repository in
``_name_or_path``) has nothing for ``from_pretrained`` or a server to download. Its launch builds the model instead:

- ``model/config.json`` (``Launch.files``): for an ``architecture``, the Hugging Face model type whose layers are
  exactly the architecture's (every parameter vramplan counts, no more, no fewer; the HF adapter writes it,
  ``budgets.engine.models.hf_config.hf_config_of_architecture``, as model types are named only there); for a
  ``hf_config``, that config itself;
- a server loads it with random weights (vLLM's and SGLang's ``--load-format dummy``) and a tokenizer whose ids all
  fall inside the vocabulary (``SCRATCH_TOKENIZERS``), since none comes with an architecture; transformers' generate
  and the HF Trainer load the random weights ``init_model.py`` writes into ``model/`` first
  (``AutoModelForCausalLM.from_config``, then ``save_pretrained``; for training, that tokenizer beside them);
- the config names no quantization method, so quantized weights launch only where the run quantizes as it loads
  (``Scratch.unquantized``);
- where the built model's budget differs from the workload's (a declared ``parameter_count``; a model type whose own
  layers keep more, as GPT-NeoX's fused qkv output), a transformers launch says by how much on its plan
  (``gap_note``).

Which model type builds which architecture (``budgets.engine.schema.Architecture``; the engine counts q/k/v/o biases
with ``attention_bias`` and, for a standard MLP, its two biases too, ``budgets/engine/models/spec.py``
``from_architecture``):

- a gated MLP with RMSNorm, dense: ``llama`` (``attention_bias`` on q/k/v/o, ``mlp_bias`` off, ``head_dim``, GQA);
- a gated MLP with RMSNorm, routed experts on every layer, no biases: ``mixtral`` (``num_local_experts``,
  ``num_experts_per_tok``; the expert width as ``intermediate_size``);
- a standard MLP with LayerNorm, biases everywhere, one KV head per query head: ``gpt_neox`` with sequential residuals
  (``use_parallel_residual`` off) and rotary embedding over the whole head (``rotary_pct`` 1.0), the ZeRO and
  Megatron papers' GPT layout;
- anything else has no model type that builds it exactly, and no launch (``hf_config_of_architecture`` says why).

The mapping is checked twice (``tests/recommendations/test_scratch.py``): the engine's own reading of each written
config.json (``budgets.engine.models.hf_config``) budgets the same bytes as the architecture, and, where the bench
extra installs transformers, the model transformers builds from it has the parameters vramplan counts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from budgets.engine import Workload, estimate, parameter_count
from budgets.engine.models.hf_config import hf_config_of_architecture
from budgets.engine.schema import FLOAT_PRECISIONS

from .plans import Plan, plan_workload

#: The directory the launch's files create and the command loads.
SCRATCH_DIR = "model"
#: The script that writes random weights (and a tokenizer) into ``SCRATCH_DIR``: the generate and training launches.
INIT_SCRIPT = "init_model.py"
#: Tokenizers with no gated download, by the number of ids they produce (``len(tokenizer)``): the largest one that the
#: vocabulary holds is the launch's. GPT-2's BPE: 50,257 ids (openai-community/gpt2 tokenizer.json, the vocabulary
#: the ZeRO and Megatron papers pad to 50,304); ByT5's bytes: 256 + 3 special + 125 extra ids = 384
#: (transformers tokenization_byt5.py; ``len(ByT5Tokenizer())`` is 384 in transformers 5.24.0).
SCRATCH_TOKENIZERS: tuple[tuple[int, str], ...] = ((50_257, "openai-community/gpt2"), (384, "google/byt5-small"))
#: A plain-text dataset for a model built from scratch (TRL's chat example needs the chat template no scratch
#: tokenizer has): WikiText-103, its ``text`` field (TRL's ``dataset_text_field`` default).
SCRATCH_DATASET = ("Salesforce/wikitext", "wikitext-103-raw-v1")

#: ``init_model.py``: the random-weight checkpoint of ``SCRATCH_DIR/config.json`` and, where one is named, a tokenizer.
INIT_SCRIPT_TEXT = '''"""Random weights for the model in DIRECTORY/config.json, written beside it (vramplan's launch
for a workload that names no checkpoint).

    python init_model.py DIRECTORY DTYPE [TOKENIZER]

DTYPE is a torch dtype name (bfloat16, float16, float32); TOKENIZER a Hugging Face tokenizer to save beside the
weights. Prints the number of parameters built. Needs host memory for the whole model in DTYPE.
"""

import sys

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer


def main(directory: str, dtype: str, tokenizer: str | None = None) -> None:
    config = AutoConfig.from_pretrained(directory)
    model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    model.save_pretrained(directory)
    if tokenizer is not None:
        AutoTokenizer.from_pretrained(tokenizer).save_pretrained(directory)
    print(sum(p.numel() for p in model.parameters()))


if __name__ == "__main__":
    main(*sys.argv[1:4])
'''


@dataclass(frozen=True, slots=True)
class Scratch:
    """A model built from the workload's numbers: its config.json, a tokenizer, and what to know."""

    config: dict[str, Any]
    tokenizer: str
    vocab_size: int
    parameters: int  # what the config builds (vramplan's count of it)
    declared: int | None  # the workload's parameter_count, which its budget holds

    @property
    def config_file(self) -> tuple[str, str]:
        return f"{SCRATCH_DIR}/config.json", json.dumps(self.config, indent=2) + "\n"

    @property
    def init_files(self) -> tuple[tuple[str, str], ...]:
        """What a run that loads the weights from ``SCRATCH_DIR`` writes first: the config and ``init_model.py``."""
        return self.config_file, (INIT_SCRIPT, INIT_SCRIPT_TEXT)

    def unquantized(self, workload: Workload, quantizes: tuple[str, ...] = (), dummy: bool = False) -> str | None:
        """Why the run is not the workload's quantized one, or None when it is: ``quantizes``, the weight precisions
        the run quantizes to as it loads; ``dummy``, a server whose dummy loader builds random weights of a given
        config's ``quantization_config`` (``init_model.py`` builds float weights only)."""
        weights = workload.precision.weights
        quantized = "quantization_config" in self.config
        if quantized and not dummy:
            return ("the config.json names a quantization_config: init_model.py builds float weights, not a quantized"
                    " checkpoint's; serve it (vLLM, SGLang) or give the checkpoint's repository")  # fmt: skip
        if weights in FLOAT_PRECISIONS or weights in quantizes or quantized:
            return None
        return (
            f"{weights} weights: the config.json built from the workload's numbers names no quantization method,"
            " so its random weights would load in the compute dtype; give the quantized checkpoint's config.json"
            " (model.hf_config, with its quantization_config)"
        )

    def notes(self, tokenizer: bool) -> list[str]:
        """What the model is (``tokenizer``: and the tokenizer the command reads), and the parameters it builds where
        the workload declares another count."""
        notes = [f"the workload names no checkpoint: {SCRATCH_DIR}/config.json (the launch's file) builds its"
                 f" {self.config['model_type']} model from its numbers, {self.parameters:,} parameters, with random"
                 " weights" + (f"; tokenizer {self.tokenizer}, whose ids all fall inside the {self.vocab_size:,}-token"
                               " vocabulary" if tokenizer else "")]  # fmt: skip
        declared = self.declared
        if declared is not None and declared != self.parameters:
            more = "more" if self.parameters > declared else "fewer"
            notes.append(f"the workload declares {declared:,} parameters and the budget holds those; the model built"
                         f" from its numbers has {abs(self.parameters - declared) / declared:.1%} {more}")  # fmt: skip
        return notes

    def init_notes(self, workload: Workload, plan: Plan, dtype: str, tokenizer: bool) -> list[str]:
        """The notes of a run that loads the random weights ``init_model.py`` writes (``dtype``: torch's name), and
        where the built model's budget on ``plan`` is another than the workload's, by how much."""
        saved, what = (f" {self.tokenizer}", " and the tokenizer") if tokenizer else ("", "")
        init = (f"before the command, write the random weights{what} into {SCRATCH_DIR}/ (host memory for the whole"
                f" model): python {INIT_SCRIPT} {SCRATCH_DIR} {dtype}{saved}")  # fmt: skip
        gap = gap_note(workload, self, plan)
        return [init, *self.notes(tokenizer), *([gap] if gap is not None else [])]


def scratch_model(
    workload: Workload, positions: int, quantizes: tuple[str, ...] = (), dummy: bool = False
) -> Scratch | str:
    """The model a launch builds for a workload that names no checkpoint, room for ``positions`` tokens; or why it
    cannot (``give the checkpoint …``), the workload's quantized weights included (``Scratch.unquantized``: what the
    run quantizes as it loads, ``quantizes``; a server's ``dummy`` loader)."""
    model = workload.model
    if model is None:
        return "the workload names no model"
    if model.architecture is not None:
        config = hf_config_of_architecture(workload.spec, positions)
        if isinstance(config, str):
            return f"{config}; give the checkpoint's repository (a preset) or its config.json (model.hf_config)"
    elif model.hf_config is not None:
        if not model.hf_config.get("architectures"):
            return "the config.json names no architectures: the model class is read from it"
        config = {key: value for key, value in model.hf_config.items() if key != "_name_or_path"}
    else:
        return "the preset names no repository"
    spec = workload.spec
    tokenizer = next((name for size, name in SCRATCH_TOKENIZERS if size <= spec.vocab_size), None)
    if tokenizer is None:
        return f"vocab_size {spec.vocab_size}: no tokenizer vramplan knows fits in it (the smallest has 384 ids)"
    scratch = Scratch(config, tokenizer, spec.vocab_size, parameter_count(spec).total, model.parameter_count)
    return scratch.unquantized(workload, quantizes, dummy) or scratch


def built_budget_gap(workload: Workload, scratch: Scratch, plan: Plan) -> int:
    """Bytes per device the budget of the model built (the engine's reading of its config.json, which names the
    model type's own layers: GPT-NeoX's fused qkv output, Mixtral's fp32 router; and the parameters it builds where
    the workload declares another count) holds above the workload's on ``plan``; negative where it holds less."""
    return _gap(plan_workload(workload, plan).model_dump_json(), json.dumps(scratch.config, sort_keys=True))


@lru_cache(maxsize=1024)
def _gap(workload_json: str, config_json: str) -> int:
    workload = Workload.model_validate_json(workload_json)
    raw = json.loads(workload_json) | {"model": {"hf_config": json.loads(config_json)}}
    return estimate(Workload.model_validate(raw)).per_device.total_bytes - estimate(workload).per_device.total_bytes


def gap_note(workload: Workload, scratch: Scratch, plan: Plan) -> str | None:
    """The note a launch that runs the built model in transformers carries where its budget on ``plan`` is another
    than the workload's."""
    gap = built_budget_gap(workload, scratch, plan)
    if round(abs(gap) / 2**30, 2) == 0:  # nothing at the note's precision
        return None
    return (
        f"the {scratch.config['model_type']} model transformers builds budgets {abs(gap) / 2**30:.2f} GiB per device"
        f" {'more' if gap > 0 else 'less'} on this plan than the workload's own numbers: estimate the workload with"
        f" {SCRATCH_DIR}/config.json as model.hf_config for the budget of the run this command starts"
    )
