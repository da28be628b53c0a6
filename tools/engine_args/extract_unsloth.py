"""Extract the keywords an Unsloth 2024.12 training script may pass into ``fixtures/engines/unsloth-2024.12.json``.

    python tools/engine_args/extract_unsloth.py /path/to/unslothai/unsloth.git 400d995 \
        trl-0.12.1-py3-none-any.whl transformers-4.46.3-py3-none-any.whl > fixtures/engines/unsloth-2024.12.json

Unsloth has no command line: a run is a Python script. Its functions take ``**kwargs``, so a misspelt keyword is
passed on and never read; the fixture lists the keywords each one names, read with ``ast`` (nothing imported):

- from the unsloth commit (its full id and each file's git blob id recorded): the parameters of
  ``FastLanguageModel.from_pretrained`` (``unsloth/models/loader.py``), the ``model_type`` values it dispatches (any
  other raises ``NotImplementedError``), and the parameters of ``FastLlamaModel.get_peft_model``
  (``unsloth/models/llama.py``, which ``FastLanguageModel`` extends);
- from TRL's wheel (PyPI, its sha256 recorded): ``SFTConfig``'s own fields (``trl/trainer/sft_config.py``) and
  ``SFTTrainer.__init__``'s parameters (``trl/trainer/sft_trainer.py``);
- from transformers' wheel (PyPI, its sha256 recorded): ``TrainingArguments``' fields, ``SFTConfig``'s base, and the
  ``OptimizerNames`` its ``optim`` takes (``transformers/training_args.py``).

TRL 0.12.1 and transformers 4.46.3 are releases of November 2024 that the commit's requirements admit
(``trl>=0.7.9``, ``transformers>=4.46.1``, pyproject.toml).
"""

from __future__ import annotations

import ast
import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

REPOSITORY = "unslothai/unsloth"
LOADER = "unsloth/models/loader.py"
LLAMA = "unsloth/models/llama.py"
SFT_CONFIG = "trl/trainer/sft_config.py"
SFT_TRAINER = "trl/trainer/sft_trainer.py"
TRAINING_ARGS = "transformers/training_args.py"


def _git(repo: str, *args: str) -> bytes:
    return subprocess.run(["git", "--git-dir", repo, *args], check=True, capture_output=True).stdout


def _blob(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)


def _method(node: ast.ClassDef, name: str) -> ast.FunctionDef:
    return next(n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == name)


def _parameters(function: ast.FunctionDef) -> list[str]:
    """The named parameters, without ``self``/``model`` positional receivers' ``*args``/``**kwargs``."""
    return [arg.arg for arg in (*function.args.args, *function.args.kwonlyargs) if arg.arg != "self"]


def _fields(node: ast.ClassDef) -> list[str]:
    return [n.target.id for n in node.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]


def _model_types(function: ast.FunctionDef) -> list[str]:
    """The strings ``model_type`` is compared with (``if model_type == "llama": …``)."""
    found = []
    for node in ast.walk(function):
        if isinstance(node, ast.Compare) and ast.unparse(node.left) == "model_type":
            found += [c.value for c in node.comparators if isinstance(c, ast.Constant) and isinstance(c.value, str)]
    return sorted(set(found))


def _wheel(path: Path, names: list[str]) -> tuple[dict[str, Any], dict[str, bytes]]:
    with zipfile.ZipFile(path) as archive:
        files = {name: archive.read(name) for name in names}
    return {"wheel": path.name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "files": names}, files


def extract(repo: str, commit: str, trl_wheel: Path, transformers_wheel: Path) -> dict[str, Any]:
    full = _git(repo, "rev-parse", f"{commit}^{{commit}}").decode().strip()
    loader_source, llama_source = (_git(repo, "show", f"{full}:{path}") for path in (LOADER, LLAMA))
    loader = _method(_class(ast.parse(loader_source), "FastLanguageModel"), "from_pretrained")
    llama = _class(ast.parse(llama_source), "FastLlamaModel")
    trl_source, trl = _wheel(trl_wheel, [SFT_CONFIG, SFT_TRAINER])
    transformers_source, transformers = _wheel(transformers_wheel, [TRAINING_ARGS])
    training_args = ast.parse(transformers[TRAINING_ARGS])
    optimizers = _class(training_args, "OptimizerNames")
    return {
        "release": "2024.12",
        "source": {
            "unsloth": {
                "repository": REPOSITORY,
                "commit": full,
                "files": {LOADER: _blob(loader_source), LLAMA: _blob(llama_source)},
            },
            "trl": trl_source,
            "transformers": transformers_source,
        },
        "from_pretrained": _parameters(loader),
        "model_types": _model_types(loader),
        "get_peft_model": _parameters(_method(llama, "get_peft_model")),
        "sft_config": _fields(_class(ast.parse(trl[SFT_CONFIG]), "SFTConfig")),
        "sft_trainer": _parameters(_method(_class(ast.parse(trl[SFT_TRAINER]), "SFTTrainer"), "__init__")),
        "training_arguments": _fields(_class(training_args, "TrainingArguments")),
        "optimizers": [
            n.value.value for n in optimizers.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
        ],
    }


if __name__ == "__main__":
    data = extract(sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]))
    json.dump(data, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
