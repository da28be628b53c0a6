"""Extract SGLang's command-line flags from its source distribution into ``fixtures/engines/sglang-<release>.json``.

    pip download sglang==0.5.10.post1 --no-deps --no-binary :all: -d /tmp/sgl
    python tools/engine_args/extract_sglang.py /tmp/sgl/sglang-0.5.10.post1.tar.gz \
        > fixtures/engines/sglang-0.5.10.post1.json

The sdist is PyPI's (``https://pypi.org/simple/sglang/``); its sha256 goes into the fixture beside the release, so the
fixture says exactly which source it was read from. Read with ``ast``, never imported (SGLang needs torch and CUDA).
Every flag ``python -m sglang.launch_server`` parses is added in one place, ``ServerArgs.add_cli_args`` of
``sglang/srt/server_args.py`` (``prepare_server_args`` builds its parser from that alone); from each of its
``add_argument`` calls:

- every option string (``"--tensor-parallel-size", "--tp-size"``: both), and ``--no-<name>`` where the action is
  ``argparse.BooleanOptionalAction``; not the flags of a ``DeprecatedAction``, which argparse accepts and SGLang then
  ignores (a command relying on one would not set what it says);
- the model flag: the one option ``required=True`` (``--model-path``; SGLang has no positional model);
- the allowed values of every flag whose ``choices`` is a list written in the source, inline or as a module-level
  constant (``QUANTIZATION_CHOICES``); the few computed at import (``list(ReasoningParser.DetectorMap.keys())``) are
  listed under ``choices_unread``, so a command's values for those flags are not checked;
- the switches: flags that take no value (``store_true``, ``store_false``, ``BooleanOptionalAction`` and its
  ``--no-`` twin), so that a command passes ``--enable-dp-attention`` alone.
"""

from __future__ import annotations

import ast
import hashlib
import json
import sys
import tarfile
from pathlib import Path

SOURCE = "sglang/srt/server_args.py"
FUNCTION = ("ServerArgs", "add_cli_args")
#: argparse accepts these actions' flags but SGLang does nothing with the value (server_args.py ``DeprecatedAction``)
IGNORED_ACTIONS = {"DeprecatedAction"}


#: actions whose flags take no value (``--enable-dp-attention``, not ``--enable-dp-attention true``)
SWITCH_ACTIONS = frozenset(
    {'"store_true"', '"store_false"', "'store_true'", "'store_false'", "argparse.BooleanOptionalAction"}
)


def _function(tree: ast.Module, owner: str, name: str) -> ast.FunctionDef:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == owner:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == name:
                    return item
    raise SystemExit(f"{owner}.{name} not found")


def _constants(tree: ast.Module) -> dict[str, ast.expr]:
    """Module-level ``NAME = value`` assignments: where ``choices=NAME`` is written."""
    return {
        target.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }


def _values(node: ast.expr, constants: dict[str, ast.expr]) -> list[str] | None:
    """The values of a list, tuple or set of constants, written inline or as a module constant (``a + b`` and
    ``[*a, "b"]`` resolved), as a command line has them; None when they are computed."""
    if isinstance(node, ast.Name):
        return _values(constants[node.id], constants) if node.id in constants else None
    if isinstance(node, ast.Starred):
        return _values(node.value, constants)
    if isinstance(node, ast.Constant):
        return [str(node.value)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        parts = [_values(node.left, constants), _values(node.right, constants)]
    elif isinstance(node, ast.List | ast.Tuple | ast.Set):
        parts = [_values(item, constants) for item in node.elts]
    else:
        return None
    return None if any(part is None for part in parts) else [value for part in parts for value in part or ()]


def _calls(function: ast.FunctionDef) -> list[ast.Call]:
    """The ``parser.add_argument`` calls, in source order."""
    calls = [
        node
        for node in ast.walk(function)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"
    ]
    return sorted(calls, key=lambda call: call.lineno)


def read_flags(tree: ast.Module) -> dict[str, object]:
    """The flags, the model flag, the readable choices and the flags whose choices are computed."""
    constants = _constants(tree)
    flags: set[str] = set()
    model_flags: list[str] = []
    choices: dict[str, list[str]] = {}
    unread: set[str] = set()
    switches: set[str] = set()
    for call in _calls(_function(tree, *FUNCTION)):
        names = [arg.value for arg in call.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
        if len(names) != len(call.args):
            raise SystemExit(f"line {call.lineno}: a flag that is not a string literal")
        keywords = {keyword.arg: keyword.value for keyword in call.keywords if keyword.arg}
        action = ast.unparse(keywords["action"]) if "action" in keywords else ""
        if action in IGNORED_ACTIONS:
            continue
        flags.update(names)
        if action in SWITCH_ACTIONS:
            switches.update(names)
        if action == "argparse.BooleanOptionalAction":
            flags.update(f"--no-{name[2:]}" for name in names)
            switches.update(f"--no-{name[2:]}" for name in names)
        required = keywords.get("required")
        if isinstance(required, ast.Constant) and required.value is True:
            model_flags.append(names[0])
        if "choices" in keywords:
            values = _values(keywords["choices"], constants)
            for name in names:
                if values is None:
                    unread.add(name)
                else:
                    choices[name] = values
    if len(model_flags) != 1:
        raise SystemExit(f"expected one required flag (the model), found {model_flags}")
    return {
        "model_flag": model_flags[0],
        "flags": sorted(flags),
        "choices": dict(sorted(choices.items())),
        "choices_unread": sorted(unread),
        "switches": sorted(switches),
    }


def extract(sdist: Path) -> dict[str, object]:
    with tarfile.open(sdist) as archive:
        root = archive.getnames()[0].split("/")[0]  # sglang-0.5.10.post1
        member = archive.extractfile(f"{root}/{SOURCE}")
        assert member is not None
        read = read_flags(ast.parse(member.read()))
    return {
        "engine": "sglang",
        "release": root.removeprefix("sglang-"),
        "source": {
            "sdist": sdist.name,
            "sha256": hashlib.sha256(sdist.read_bytes()).hexdigest(),
            "index": "https://pypi.org/simple/sglang/",
            "files": [SOURCE],
            "function": ".".join(FUNCTION),
            "extracted_by": "tools/engine_args/extract_sglang.py",
        },
        "command": ["python", "-m", "sglang.launch_server"],
        "positional": [],
        **read,
    }


if __name__ == "__main__":
    json.dump(extract(Path(sys.argv[1])), sys.stdout, indent=1)
    sys.stdout.write("\n")
