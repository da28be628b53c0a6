"""Extract what lit-gpt's fine-tuning scripts accept at one commit into ``fixtures/engines/litgpt-<commit>.json``.

    python tools/engine_args/extract_litgpt.py /path/to/Lightning-AI/litgpt.git 8641822 \
        > fixtures/engines/litgpt-8641822.json

lit-gpt had no release on PyPI then: the source is the commit of ``Lightning-AI/litgpt`` (its full id and every file's
git blob id recorded), read with ``git show`` and ``ast``, never imported (it needs torch and lightning). For each
``finetune/*.py`` script:

- the parameters of ``setup``, which ``jsonargparse.CLI(setup)`` (the scripts' ``__main__``) turns into
  ``--<name>`` flags, with annotation, default and ``Literal`` choices: the only command-line flags the script has;
- its module-level names (``devices``, ``micro_batch_size``, ``lora_r``, …): at this commit the hyperparameters are
  module constants, read by the functions when they run, not flags;
- the precisions ``setup`` maps to a dtype for bitsandbytes' quantization (its ``{"16-true": …}`` dict).

Also the parameters of ``scripts/prepare_alpaca.py``'s ``prepare`` (its ``max_seq_length``), ``scripts/download.py``'s
``download_from_hub`` and ``scripts/convert_hf_checkpoint.py``'s ``convert_hf_checkpoint``, and the models
``lit_gpt/config.py`` builds (``Config.from_name`` reads ``checkpoint_dir.name``): each ``org/name`` and block size,
from the module's list-building statements run on their own (dict and list literals, loops, no imports).
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import subprocess
import sys
from typing import Any

REPOSITORY = "Lightning-AI/litgpt"
SCRIPTS = ("finetune/full.py", "finetune/lora.py", "finetune/adapter.py", "finetune/adapter_v2.py")
HELPERS = {
    "scripts/prepare_alpaca.py": "prepare",
    "scripts/download.py": "download_from_hub",
    "scripts/convert_hf_checkpoint.py": "convert_hf_checkpoint",
}
CONFIG = "lit_gpt/config.py"


def _git(repo: str, *args: str) -> bytes:
    return subprocess.run(["git", "--git-dir", repo, *args], check=True, capture_output=True).stdout


def _blob(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def _literal(node: ast.AST | None) -> Any:
    if node is None:
        return None
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return ast.unparse(node)
    return list(value) if isinstance(value, tuple) else value


def _parameters(function: ast.FunctionDef) -> dict[str, dict[str, Any]]:
    """Each parameter: annotation, default, the ``Literal`` choices, line."""
    args = [*function.args.args, *function.args.kwonlyargs]
    defaults: list[ast.expr | None] = [None] * (len(function.args.args) - len(function.args.defaults))
    defaults += [*function.args.defaults, *function.args.kw_defaults]
    found = {}
    for arg, default in zip(args, defaults, strict=True):
        annotation = ast.unparse(arg.annotation) if arg.annotation is not None else ""
        literal = re.search(r"Literal\[([^\]]*)\]", annotation)
        choices = None if literal is None else [ast.literal_eval(i.strip()) for i in literal.group(1).split(",")]
        found[arg.arg] = {"annotation": annotation, "default": _literal(default), "choices": choices,
                          "line": arg.lineno}  # fmt: skip
    return found


def _function(tree: ast.Module, name: str) -> ast.FunctionDef:
    return next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)


def _globals(tree: ast.Module) -> dict[str, int]:
    """The module-level names a script assigns, by line."""
    found = {}
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        for target in targets:
            if isinstance(target, ast.Name):
                found.setdefault(target.id, node.lineno)
    return found


def _quantize_dtypes(setup: ast.FunctionDef) -> list[str]:
    """The keys of the precision-to-dtype dict ``setup`` indexes for bitsandbytes (``{"16-true": torch.float16}``)."""
    for node in ast.walk(setup):
        if (
            isinstance(node, ast.Dict)
            and node.keys
            and all(isinstance(k, ast.Constant) for k in node.keys)
            and all(ast.unparse(v).startswith("torch.") for v in node.values)
        ):
            return [k.value for k in node.keys if isinstance(k, ast.Constant)]
    return []


def _script(source: bytes) -> dict[str, Any]:
    tree = ast.parse(source)
    setup = _function(tree, "setup")
    main = [n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)]
    return {
        "setup": _parameters(setup),
        "globals": _globals(tree),
        "quantize_dtypes": _quantize_dtypes(setup),
        "cli": "CLI(setup)" in ast.unparse(main[0]) if main else False,
    }


def _configs(source: bytes) -> dict[str, dict[str, Any]]:
    """``org/name`` of every model config, and its ``block_size`` (the dataclass default where not given)."""
    tree = ast.parse(source)
    config = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Config")
    default_block = next(
        _literal(n.value) for n in config.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.target.id == "block_size"
    )  # fmt: skip
    kept = [n for n in tree.body if isinstance(n, ast.Assign | ast.For)
            or (isinstance(n, ast.Expr) and not isinstance(n.value, ast.Constant))]  # fmt: skip
    kept = [n for n in kept if "name_to_config" not in ast.unparse(n)]
    namespace: dict[str, Any] = {"__builtins__": {"dict": dict}}
    exec(compile(ast.Module(body=kept, type_ignores=[]), CONFIG, "exec"), namespace)  # data statements only
    return {f"{c['org']}/{c['name']}": {"block_size": c.get("block_size", default_block)} for c in namespace["configs"]}


def extract(repo: str, commit: str) -> dict[str, Any]:
    full = _git(repo, "rev-parse", f"{commit}^{{commit}}").decode().strip()
    files: dict[str, str] = {}

    def read(path: str) -> bytes:
        content = _git(repo, "show", f"{full}:{path}")
        files[path] = _blob(content)
        return content

    scripts = {path: _script(read(path)) for path in SCRIPTS}
    helpers = {path: _parameters(_function(ast.parse(read(path)), name)) for path, name in HELPERS.items()}
    configs = _configs(read(CONFIG))
    return {
        "release": commit,
        "source": {"repository": REPOSITORY, "commit": full, "files": files},
        "scripts": scripts,
        "helpers": {path: {"function": HELPERS[path], "parameters": params} for path, params in helpers.items()},
        "configs": configs,
    }


if __name__ == "__main__":
    json.dump(extract(sys.argv[1], sys.argv[2]), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
