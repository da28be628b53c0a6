"""Extract what ``torchrun -m torchtitan.train`` accepts from a torchtitan sdist into
``fixtures/engines/torchtitan-<release>.json``.

    python tools/engine_args/extract_torchtitan.py torchtitan-0.2.0.tar.gz /path/to/pytorch/torchtitan.git v0.2.0 \
        .venv/lib/python3.11/site-packages/torch/distributed/run.py > fixtures/engines/torchtitan-0.2.0.json

The sdist is PyPI's (``https://pypi.org/simple/torchtitan/``); its sha256 goes into the fixture beside the release.
The train configs (``torchtitan/models/*/train_configs/*.toml``) are not in the sdist: they are read from the release's
git tag (its commit and each file's blob id recorded), and every Python file read from the sdist is checked to be the
tag's own blob, so the fixture describes one source. Read with ``ast`` and ``tomllib``, never imported (torchtitan
needs torch and CUDA):

- every field of ``JobConfig``'s sections (``torchtitan/config/job_config.py``), which ``ConfigManager.parse_args``
  hands to ``tyro.cli`` (``torchtitan/config/manager.py:46-62``) as ``--<section>.<field>`` (nested dataclasses as
  ``--quantize.linear.float8.<field>``), a ``bool`` field as a flag without a value and its ``--<section>.no_<field>``
  negation (tyro's pairs; ``job_config.py:481`` names ``--checkpoint.no_initial_load_model_only``), with its
  annotation, default, ``Literal`` choices and line;
- the models ``get_train_spec`` builds (``torchtitan/models/__init__.py`` ``_supported_models``), whether each has a
  ``pipelining_fn``, and each flavor of its ``<model>_args`` dict: the arguments given, and for a dense flavor the
  architecture the model builds (the args dataclass's defaults for the rest; the SwiGLU width of
  ``models/llama3/model/model.py:286-290`` where the args have ``multiple_of`` and no ``hidden_dim``);
- the optimizer classes ``build_optimizers`` knows (``torchtitan/components/optimizer.py`` ``optimizer_classes``);
- every train config's TOML, flattened to ``section.key`` values;
- the torchrun flags, from the ``run.py`` of the torch given as the last argument (its own sha256 recorded).
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import subprocess
import sys
import tarfile
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

JOB_CONFIG = "torchtitan/config/job_config.py"
MODELS = "torchtitan/models/__init__.py"
OPTIMIZER = "torchtitan/components/optimizer.py"
#: The SwiGLU width llama3's FeedForward computes from ``hidden_dim=4 * dim`` (models/llama3/model/model.py:286-290,
#: called at :332).
FEED_FORWARD = "torchtitan/models/llama3/model/model.py"
REPOSITORY = "pytorch/torchtitan"


def _blob(content: bytes) -> str:
    """The git blob id of ``content`` (what ``git ls-tree`` lists)."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def _literal(node: ast.AST | None) -> Any:
    """A default as JSON: a constant, a list/tuple of constants, a ``lambda: [...]`` factory's list; else its source."""
    if node is None:
        return None
    if isinstance(node, ast.Lambda):
        return _literal(node.body)
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return ast.unparse(node)
    return list(value) if isinstance(value, tuple) else value


def _choices(annotation: str) -> list[str] | None:
    """The values of the ``Literal[...]`` in an annotation (``Literal["a", "b"] | None``, ``list[Literal[...]]``)."""
    found = re.search(r"Literal\[([^\]]*)\]", annotation)
    return None if found is None else [ast.literal_eval(item.strip()) for item in found.group(1).split(",")]


def _field(statement: ast.AnnAssign) -> dict[str, Any]:
    """One dataclass field: annotation, default (``field(default=…)``, ``field(default_factory=…)``, a value), line."""
    value = statement.value
    default: Any = _literal(value)
    factory = None
    if isinstance(value, ast.Call) and ast.unparse(value.func) == "field":
        keywords = {kw.arg: kw.value for kw in value.keywords}
        if "default" in keywords:
            default = _literal(keywords["default"])
        elif isinstance(keywords.get("default_factory"), ast.Name):
            factory = ast.unparse(keywords["default_factory"])
            default = {"list": [], "dict": {}}.get(factory)  # a builtin's empty value; a section's: its fields
        else:
            default = _literal(keywords.get("default_factory"))
    return {"type": ast.unparse(statement.annotation), "default": default, "line": statement.lineno,
            "factory": factory}  # fmt: skip


def _dataclasses(tree: ast.Module) -> dict[str, dict[str, dict[str, Any]]]:
    """Each top-level class's annotated fields, by class name."""
    classes = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            fields = [s for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
            classes[node.name] = {s.target.id: _field(s) for s in fields if isinstance(s.target, ast.Name)}
    return classes


def _flags(classes: dict[str, dict[str, dict[str, Any]]], name: str, prefix: str) -> Iterator[tuple[str, Any]]:
    """``--<prefix><field>`` for every leaf field of class ``name``, nested dataclasses by their dotted path; a
    ``bool`` field also as ``--<prefix>no_<field>``."""
    for field_name, entry in classes[name].items():
        if entry["factory"] in classes:
            yield from _flags(classes, entry["factory"], f"{prefix}{field_name}.")
            continue
        kind = "bool" if entry["type"] == "bool" else ("list" if entry["type"].startswith("list[") else "value")
        flag = {"class": name, "field": field_name, "type": entry["type"], "kind": kind, "default": entry["default"],
                "line": entry["line"], "choices": _choices(entry["type"])}  # fmt: skip
        yield f"--{prefix}{field_name}", flag
        if kind == "bool":
            yield f"--{prefix}no_{field_name}", {**flag, "negates": f"--{prefix}{field_name}"}


def _job_config(source: bytes) -> dict[str, Any]:
    classes = _dataclasses(ast.parse(source))
    sections = {name: entry["factory"] for name, entry in classes["JobConfig"].items()}
    return {"sections": sections, "flags": dict(_flags(classes, "JobConfig", ""))}


def _supported_models(source: bytes) -> list[str]:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "_supported_models":
            assert isinstance(node.value, ast.Call)
            return sorted(ast.literal_eval(node.value.args[0]))
    raise SystemExit("_supported_models not found")


def _feed_forward(dim: int, multiple_of: int, multiplier: float | None) -> int:
    """llama3's FeedForward width (models/llama3/model/model.py:286-290 with ``hidden_dim=4 * dim``, :332)."""
    hidden = int(2 * (4 * dim) / 3)
    if multiplier is not None:
        hidden = int(multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def _architecture(args: dict[str, Any], fields: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """What a dense flavor builds, in the names of ``recommendations.training_launch.torchtitan.TITAN_ARCHITECTURE``;
    None for a mixture of experts (args with ``moe_args`` and no ``moe_enabled``, or ``moe_enabled`` true)."""
    if args.get("moe_enabled", "moe_args" in fields):
        return None
    heads = args["n_heads"]
    width = args["hidden_dim"] if "hidden_dim" in fields else None
    if width is None:
        width = _feed_forward(args["dim"], args["multiple_of"], args.get("ffn_dim_multiplier"))
    return {
        "embed_dim": args["dim"],
        "num_layers": args["n_layers"],
        "num_heads": heads,
        "num_kv_heads": args.get("n_kv_heads") or heads,
        "head_dim": args.get("head_dim") or args["dim"] // heads,
        "intermediate_dim": width,
        "vocab_size": args["vocab_size"],
        "tie_word_embeddings": bool(args.get("enable_weight_tying", False)),
        "qk_norm": bool(args.get("qk_norm", False)),
    }


def _flavors(package: ast.Module, args_fields: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """The ``<model>_args = {flavor: ArgsClass(...)}`` dict of a model package's ``__init__.py``."""
    for node in package.body:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)):
            continue
        flavors = {}
        for key, call in zip(node.value.keys, node.value.values, strict=True):
            if not (isinstance(key, ast.Constant) and isinstance(call, ast.Call)):
                break
            fields = args_fields[ast.unparse(call.func)]
            given = {kw.arg: _literal(kw.value) for kw in call.keywords if kw.arg is not None}
            merged = {name: entry["default"] for name, entry in fields.items()} | given
            flavors[key.value] = {"line": call.lineno, "given": given, "architecture": _architecture(merged, fields)}
        else:
            return {"dict": ast.unparse(node.targets[0]), "line": node.lineno, "flavors": flavors}
    return {}


def _train_spec(package: ast.Module) -> dict[str, Any]:
    """``get_train_spec``'s ``TrainSpec(...)`` keywords: whether it pipelines (``pipelining_fn`` not None)."""
    for node in ast.walk(package):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "TrainSpec":
            keywords = {kw.arg: ast.unparse(kw.value) for kw in node.keywords}
            return {"line": node.lineno, "pipelining": keywords.get("pipelining_fn", "None") != "None"}
    raise SystemExit("TrainSpec(...) not found")


def _models(files: dict[str, bytes]) -> dict[str, Any]:
    models = {}
    for name in _supported_models(files[MODELS]):
        init = f"torchtitan/models/{name}/__init__.py"
        args_file = f"torchtitan/models/{name}/model/args.py"
        package = ast.parse(files[init])
        args_fields = _dataclasses(ast.parse(files[args_file])) if args_file in files else {}
        flavors = _flavors(package, args_fields)
        if flavors:  # llama3_ft imports llama3's flavors: not a model of its own here
            models[name] = {"file": init, "args_file": args_file, **_train_spec(package), **flavors}
    return models


def _optimizers(source: bytes) -> list[str]:
    """The keys of ``build_optimizers``'s ``optimizer_classes`` (components/optimizer.py:305-308)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "optimizer_classes":
            assert isinstance(node.value, ast.Dict)
            return [ast.literal_eval(key) for key in node.value.keys if key is not None]
    raise SystemExit("optimizer_classes not found")


def _flatten(tree: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _git(repository: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repository), *args], check=True, capture_output=True).stdout


def _tree(repository: Path, tag: str) -> dict[str, str]:
    """Path → blob id of every file of the tag."""
    listing = _git(repository, "ls-tree", "-r", tag).decode()
    return {line.split("\t")[1]: line.split()[2] for line in listing.splitlines()}


def _train_configs(repository: Path, tag: str, tree: dict[str, str]) -> dict[str, Any]:
    configs = {}
    for path in sorted(tree):
        if path.startswith("torchtitan/models/") and "/train_configs/" in path and path.endswith(".toml"):
            values = dict(_flatten(tomllib.loads(_git(repository, "show", f"{tag}:{path}").decode())))
            configs[path] = {"blob": tree[path], "values": values}
    return configs


def _torchrun(torchrun: Path) -> dict[str, Any]:
    tree = ast.parse(torchrun.read_bytes())
    flags = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            flags |= {a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("--")}
    version = re.search(r"__version__ = '([^']+)'", (torchrun.parents[1] / "version.py").read_text())
    assert version is not None
    return {"file": "torch/distributed/run.py", "torch": version.group(1),
            "sha256": hashlib.sha256(torchrun.read_bytes()).hexdigest(), "flags": sorted(flags)}  # fmt: skip


def extract(sdist: Path, repository: Path, tag: str, torchrun: Path) -> dict[str, object]:
    with tarfile.open(sdist) as archive:
        root = archive.getnames()[0].split("/")[0]
        files = {}
        for member in archive.getmembers():
            name = member.name.removeprefix(f"{root}/")
            if name.startswith("torchtitan/") and name.endswith(".py"):
                handle = archive.extractfile(member)
                assert handle is not None
                files[name] = handle.read()
        version = archive.extractfile(f"{root}/assets/version.txt")  # pyproject.toml's dynamic version
        assert version is not None
        release = version.read().decode().strip()
    tree = _tree(repository, tag)
    read = [JOB_CONFIG, MODELS, OPTIMIZER, FEED_FORWARD]
    models = _models(files)
    read += [path for m in models.values() for path in (m["file"], m["args_file"])]
    differing = [path for path in read if tree.get(path) != _blob(files[path])]
    if differing:
        raise SystemExit(f"the sdist's {differing} are not the tag's")
    torch = _torchrun(torchrun)
    return {
        "engine": "torchtitan",
        "release": release,
        "source": {
            "sdist": sdist.name,
            "sha256": hashlib.sha256(sdist.read_bytes()).hexdigest(),
            "index": "https://pypi.org/simple/torchtitan/",
            "git": {
                "repository": REPOSITORY,
                "tag": tag,
                "commit": _git(repository, "rev-parse", f"{tag}^{{commit}}").decode().strip(),
                "note": "train configs read from the tag; the Python files read from the sdist are the tag's blobs",
            },
            "files": sorted(set(read)),
            "torchrun": {key: value for key, value in torch.items() if key != "flags"},
            "extracted_by": "tools/engine_args/extract_torchtitan.py",
        },
        "module": "torchtitan.train",
        "torchrun_flags": torch["flags"],
        "job_config": _job_config(files[JOB_CONFIG]),
        "models": models,
        "optimizers": _optimizers(files[OPTIMIZER]),
        "train_configs": _train_configs(repository, tag, tree),
    }


if __name__ == "__main__":
    sdist_path, repository_path, release_tag, torchrun_path = sys.argv[1:5]
    json.dump(extract(Path(sdist_path), Path(repository_path), release_tag, Path(torchrun_path)), sys.stdout, indent=1)
    sys.stdout.write("\n")
