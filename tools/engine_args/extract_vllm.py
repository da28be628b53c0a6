"""Extract vLLM's command-line flags from a vLLM source distribution into ``fixtures/engines/vllm-<release>.json``.

    python tools/engine_args/extract_vllm.py vllm-0.11.0.tar.gz > fixtures/engines/vllm-0.11.0.json

The sdist is PyPI's (``https://pypi.org/simple/vllm/``); its sha256 goes into the fixture beside the release, so the
fixture says exactly which source it was read from. Read with ``ast``, never imported (vLLM needs torch and CUDA):

- every string flag of every ``add_argument`` call in ``vllm/engine/arg_utils.py`` (the engine's flags) and
  ``vllm/entrypoints/openai/cli_args.py`` (the server's own), and the ``FrontendArgs`` fields, which that file adds
  as ``--<field-name>`` in a loop;
- a ``--no-<name>`` flag for each flag argparse's ``BooleanOptionalAction`` gives one (a ``bool`` field of the config
  dataclasses; read from ``EngineArgs``'s annotations);
- the allowed values of the flags whose values vramplan's launch commands set from a closed set (``CHOICES``): the
  ``Literal`` aliases ``EngineArgs`` annotates them with.
"""

from __future__ import annotations

import ast
import hashlib
import json
import sys
import tarfile
from pathlib import Path

#: flag → (file, Literal alias): EngineArgs annotates ``dtype: ModelDType``, ``kv_cache_dtype: CacheDType``,
#: ``block_size: BlockSize | None`` and ``quantization: QuantizationMethods | None``.
CHOICES = {
    "--dtype": ("vllm/config/model.py", "ModelDType"),
    "--kv-cache-dtype": ("vllm/config/cache.py", "CacheDType"),
    "--block-size": ("vllm/config/cache.py", "BlockSize"),
    "--quantization": ("vllm/model_executor/layers/quantization/__init__.py", "QuantizationMethods"),
}
SOURCES = ("vllm/engine/arg_utils.py", "vllm/entrypoints/openai/cli_args.py")


def _flags(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("-"):
                    found.add(arg.value)
    return found


def _dataclass_fields(tree: ast.AST, name: str) -> dict[str, str]:
    """The annotated fields of class ``name``: field → annotation source."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return {
                item.target.id: ast.unparse(item.annotation)
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            }
    raise SystemExit(f"class {name} not found")


def _literal(tree: ast.AST, alias: str) -> list[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == alias for t in node.targets):
            values = node.value.slice  # Literal[...]
            items = values.elts if isinstance(values, ast.Tuple) else [values]
            return [str(item.value) for item in items if isinstance(item, ast.Constant)]  # as a command line has them
    raise SystemExit(f"{alias} not found")


def extract(sdist: Path) -> dict[str, object]:
    with tarfile.open(sdist) as archive:
        root = archive.getnames()[0].split("/")[0]  # vllm-0.11.0

        def tree(path: str) -> ast.AST:
            member = archive.extractfile(f"{root}/{path}")
            assert member is not None
            return ast.parse(member.read())

        arg_utils, cli_args = tree(SOURCES[0]), tree(SOURCES[1])
        flags = _flags(arg_utils) | _flags(cli_args)
        flags |= {f"--{name.replace('_', '-')}" for name in _dataclass_fields(cli_args, "FrontendArgs")}
        engine_fields = _dataclass_fields(arg_utils, "EngineArgs")
        booleans = {f"--{name.replace('_', '-')}" for name, annotation in engine_fields.items()
                    if annotation in ("bool", "bool | None", "Optional[bool]")}  # fmt: skip
        flags |= {f"--no-{flag[2:]}" for flag in booleans & flags}
        choices = {flag: _literal(tree(path), alias) for flag, (path, alias) in CHOICES.items()}
    return {
        "engine": "vllm",
        "release": root.removeprefix("vllm-"),
        "source": {
            "sdist": sdist.name,
            "sha256": hashlib.sha256(sdist.read_bytes()).hexdigest(),
            "index": "https://pypi.org/simple/vllm/",
            "files": [*SOURCES, *sorted({path for path, _ in CHOICES.values()})],
            "extracted_by": "tools/engine_args/extract_vllm.py",
        },
        "command": ["vllm", "serve"],
        "positional": ["model_tag"],
        "flags": sorted(flags),
        "choices": choices,
    }


if __name__ == "__main__":
    json.dump(extract(Path(sys.argv[1])), sys.stdout, indent=1)
    sys.stdout.write("\n")
