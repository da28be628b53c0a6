"""Extract what ``tune run`` accepts from a torchtune wheel into ``fixtures/engines/torchtune-<release>.json``.

    python tools/engine_args/extract_torchtune.py torchtune-0.6.1-py3-none-any.whl \
        .venv/lib/python3.11/site-packages/torch/distributed/run.py > fixtures/engines/torchtune-0.6.1.json

The wheel is PyPI's (``https://pypi.org/simple/torchtune/``; torchtune publishes no sdist); its sha256 goes into the
fixture beside the release. Read with ``ast`` and ``yaml``, never imported (torchtune needs torch, torchao, CUDA):

- the fine-tuning recipes and the configs registered for each (``torchtune/_recipe_registry.py``'s ``_ALL_RECIPES``),
  and whether the recipe runs under torchrun (``supports_distributed``);
- the config keys each recipe reads, with ``cfg.get("key")``, ``cfg.key`` or ``cfg["key"]`` (``recipes/<recipe>.py``;
  ``cfg.optimizer.get("fused")`` reads ``optimizer`` and ``optimizer.fused``): ``tune run`` merges any ``key=value``
  into the config (``torchtune/config/_utils.py:112-193``, ``OmegaConf.merge``), so a key that neither the config nor
  the recipe has is silently ignored, and the check must know both; and whether the recipe refuses fp16
  (``if self._dtype == torch.float16: raise``);
- every key path of every registered config's YAML (``recipes/configs/**.yaml``), the component of each section
  (``model``, ``tokenizer``, ``optimizer``, ``loss``, …), and the ``tune download`` repository its header names (the
  checkpoint it reads);
- the parameters of the ``torchtune.*`` components those configs name for their ``model``, ``tokenizer`` and ``loss``
  (the sections a launch sets keyword arguments of) and of every tensor-parallel plan; the architecture numbers a
  model builder passes to its component builder as constants; the keyword arguments the configs pass to optimizers
  outside torchtune (``torch.optim.AdamW``, ``bitsandbytes``);
- the attention projections LoRA applies to (``torchtune/modules/peft/_utils.py``'s ``LORA_ATTN_MODULES``);
- the dtypes ``training.get_dtype`` knows (``torchtune/training/precision.py``'s ``PRECISION_STR_TO_DTYPE``);
- the torchrun flags ``tune run`` adds to its parser (``torchtune/_cli/run.py``: every action of torch's
  ``torch.distributed.run.get_args_parser``), read from the ``run.py`` of the torch given as the second argument,
  recorded with its own sha256.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

#: The fine-tuning recipes vramplan launches (a training workload's methods, single device and distributed).
RECIPES = ("full_finetune_single_device", "full_finetune_distributed", "lora_finetune_single_device",
           "lora_finetune_distributed")  # fmt: skip
REGISTRY = "torchtune/_recipe_registry.py"
PRECISION = "torchtune/training/precision.py"
PEFT = "torchtune/modules/peft/_utils.py"
#: The config sections whose components' parameters are recorded (those a launch sets keyword arguments of).
SECTIONS = ("model", "tokenizer", "loss")
DOWNLOAD = re.compile(r"tune download (\S+)")


def _flatten(tree: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every leaf of a YAML mapping as (dotted path, value)."""
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            yield from _flatten(value, f"{path}.")
        else:
            yield path, value


def _registry(tree: ast.AST) -> dict[str, dict[str, Any]]:
    """``_ALL_RECIPES``: recipe name → its file, whether it runs distributed, and its configs (name → YAML path)."""
    recipes = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Recipe":
            fields = {kw.arg: kw.value for kw in node.keywords}
            configs = {}
            assert isinstance(fields["configs"], ast.List)
            for config in fields["configs"].elts:
                assert isinstance(config, ast.Call)
                kw = {k.arg: ast.literal_eval(k.value) for k in config.keywords}
                configs[kw["name"]] = kw["file_path"]
            recipes[ast.literal_eval(fields["name"])] = {
                "file": f"recipes/{ast.literal_eval(fields['file_path'])}",
                "supports_distributed": ast.literal_eval(fields["supports_distributed"]),
                "configs": configs,
            }
    return recipes


def _cfg_path(node: ast.AST) -> str | None:
    """The dotted key an expression reads from the recipe's ``cfg`` (``cfg.a``, ``cfg.a.get("b")``, ``cfg["a"]``)."""
    if isinstance(node, ast.Name):
        return "" if node.id == "cfg" else None
    if isinstance(node, ast.Attribute) and node.attr != "get":
        parent = _cfg_path(node.value)
        return None if parent is None else f"{parent}{node.attr}."
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        parent = _cfg_path(node.value)
        return None if parent is None else f"{parent}{node.slice.value}."
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
        key = node.args[0]
        parent = _cfg_path(node.func.value)
        if parent is not None and isinstance(key, ast.Constant) and isinstance(key.value, str):
            return f"{parent}{key.value}."
    return None


def _recipe_reads(tree: ast.AST) -> list[str]:
    """The config keys a recipe reads, as dotted paths (``cfg.a.get("b")`` reads ``a`` and ``a.b``)."""
    return sorted({path.rstrip(".") for node in ast.walk(tree) if (path := _cfg_path(node))})


def _refuses_fp16(tree: ast.AST) -> bool:
    """Whether the recipe raises on ``self._dtype == torch.float16`` (recipes/full_finetune_distributed.py:131)."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.If) or "torch.float16" not in ast.unparse(node.test):
            continue
        if any(isinstance(item, ast.Raise) for item in node.body):
            return True
    return False


def _parameters(node: ast.FunctionDef | ast.ClassDef) -> list[str]:
    if isinstance(node, ast.ClassDef):
        init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        return [] if init is None else _parameters(init)[1:]  # without self
    args = node.args
    return [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]


def _defaults(node: ast.FunctionDef) -> dict[str, Any]:
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    pairs = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
    return {a.arg: d.value for a, d in pairs if isinstance(d, ast.Constant)}


def _architecture(node: ast.FunctionDef) -> dict[str, Any]:
    """The constants a model builder passes to its component builder (``return llama3_1(vocab_size=128_256, …)``),
    a parameter passed through by its default (``tie_word_embeddings=tie_word_embeddings``)."""
    defaults = _defaults(node)
    for item in ast.walk(node):
        if isinstance(item, ast.Return) and isinstance(item.value, ast.Call):
            found = {}
            for kw in item.value.keywords:
                if isinstance(kw.value, ast.Constant) and kw.arg is not None:
                    found[kw.arg] = kw.value.value
                elif isinstance(kw.value, ast.Name) and kw.value.id in defaults and kw.arg is not None:
                    found[kw.arg] = defaults[kw.value.id]
            return found
    return {}


def _module_definitions(path: str, tree: ast.Module, found: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """One module's top-level functions, classes, ``name = partial(f, …)`` and ``name = imported`` (an alias of an
    earlier module's definition, ``found``: torchtune/models/llama3_3/_model_builders.py:17)."""
    imported: dict[str, str] = {}
    local: dict[str, dict[str, Any]] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported |= {alias.asname or alias.name: f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            entry = {"file": path, "line": node.lineno, "parameters": _parameters(node)}
            architecture = _architecture(node) if isinstance(node, ast.FunctionDef) else {}
            if "num_layers" in architecture:  # a model builder (not a tokenizer builder beside it)
                entry["architecture"] = architecture
            local[node.name] = entry
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
            if isinstance(value, ast.Call) and ast.unparse(value.func) == "partial":
                bound = {kw.arg: ast.literal_eval(kw.value) for kw in value.keywords}
                local[target] = {**local[ast.unparse(value.args[0])], "line": node.lineno, "bound": bound}
            elif isinstance(value, ast.Name) and imported.get(value.id) in found:
                source = imported[value.id]
                local[target] = {**found[source], "file": path, "line": node.lineno, "alias_of": source}
    return local


def _definitions(files: dict[str, bytes]) -> dict[str, dict[str, Any]]:
    """Every top-level definition of the ``torchtune`` package (``_module_definitions``), by the dotted name its
    package exports it as (``torchtune.models.llama3_1.lora_llama3_1_8b``) and by its module's. Modules are read in
    path order, so an alias's source (``llama3_1``) is read before it (``llama3_3``)."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(files):
        if not path.startswith("torchtune/") or not path.endswith(".py"):
            continue
        module = path.removesuffix(".py").replace("/", ".")
        package = module.rsplit(".", 1)[0]
        for name, entry in _module_definitions(path, ast.parse(files[path]), found).items():
            found.setdefault(f"{package}.{name}", entry)
            found[f"{module}.{name}"] = entry
    return found


def _precisions(tree: ast.AST) -> list[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and ast.unparse(node.target) == "PRECISION_STR_TO_DTYPE":
            assert isinstance(node.value, ast.Dict)
            return [ast.literal_eval(key) for key in node.value.keys if key is not None]
    raise SystemExit("PRECISION_STR_TO_DTYPE not found")


def _literal(tree: ast.AST, alias: str) -> list[str]:
    """The values of ``alias = Literal[...]`` (torchtune/modules/peft/_utils.py:14 ``LORA_ATTN_MODULES``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == alias for t in node.targets):
            assert isinstance(node.value, ast.Subscript) and isinstance(node.value.slice, ast.Tuple)
            return [ast.literal_eval(item) for item in node.value.slice.elts]
    raise SystemExit(f"{alias} not found")


def _torchrun_flags(tree: ast.AST) -> list[str]:
    flags = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            flags |= {a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("--")}
    return sorted(flags)


def _torch_version(torchrun: Path) -> str:
    """The release of the torch whose ``run.py`` is read (its ``torch/version.py``)."""
    found = re.search(r"__version__ = '([^']+)'", (torchrun.parents[1] / "version.py").read_text())
    assert found is not None
    return found.group(1)


def _config(text: str) -> dict[str, Any]:
    tree = yaml.safe_load(text)
    leaves = dict(_flatten(tree))
    download = DOWNLOAD.search(text)
    return {
        "keys": sorted(leaves),
        "components": {
            key.split(".")[0]: value
            for key, value in leaves.items()
            if key.count(".") == 1 and key.endswith("._component_")
        },
        "checkpoint_dir": leaves.get("checkpointer.checkpoint_dir"),
        "download": download.group(1) if download else None,
    }


def _external_kwargs(configs: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """The keyword arguments the release's configs pass to each optimizer outside torchtune, by its class."""
    found: dict[str, set[str]] = {}
    for config in configs.values():
        optimizer = config["components"].get("optimizer")
        if optimizer and not optimizer.startswith("torchtune."):
            kwargs = {k.split(".", 1)[1] for k in config["keys"] if k.startswith("optimizer.")} - {"_component_"}
            found.setdefault(optimizer, set()).update(kwargs)
    return {name: sorted(kwargs) for name, kwargs in sorted(found.items())}


def extract(wheel: Path, torchrun: Path) -> dict[str, object]:
    with zipfile.ZipFile(wheel) as archive:
        files = {name: archive.read(name) for name in archive.namelist() if name.endswith((".py", ".yaml", "METADATA"))}
    registry = _registry(ast.parse(files[REGISTRY]))
    recipes, configs = {}, {}
    for name in RECIPES:
        recipe = registry[name]
        tree = ast.parse(files[recipe["file"]])
        recipes[name] = {"file": recipe["file"], "supports_distributed": recipe["supports_distributed"],
                         "reads": _recipe_reads(tree), "refuses_fp16": _refuses_fp16(tree),
                         "configs": sorted(recipe["configs"])}  # fmt: skip
        for config, path in recipe["configs"].items():
            configs[config] = {"file": f"recipes/configs/{path}", **_config(files[f"recipes/configs/{path}"].decode())}
    definitions = _definitions(files)
    named = {c["components"][section] for c in configs.values() for section in SECTIONS if section in c["components"]}
    named |= {name for name in definitions if name.endswith("_tp_plan") and name.count(".") == 3}
    components = {name: definitions[name] for name in sorted(named) if name.startswith("torchtune.")}
    metadata = next(text for name, text in files.items() if name.endswith(".dist-info/METADATA"))
    release = re.search(r"^Version: (\S+)$", metadata.decode(), re.MULTILINE)  # the wheel's, not __version__'s "+cpu"
    assert release is not None
    yaml_files = sorted(c["file"] for c in configs.values())
    return {
        "engine": "torchtune",
        "release": release.group(1),
        "source": {
            "wheel": wheel.name,
            "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
            "index": "https://pypi.org/simple/torchtune/",
            "files": [
                REGISTRY,
                PRECISION,
                PEFT,
                *(r["file"] for r in recipes.values()),
                *sorted({c["file"] for c in components.values()}),
                *yaml_files,
            ],
            "torchrun": {
                "file": "torch/distributed/run.py",
                "torch": _torch_version(torchrun),
                "sha256": hashlib.sha256(torchrun.read_bytes()).hexdigest(),
            },
            "extracted_by": "tools/engine_args/extract_torchtune.py",
        },
        "command": ["tune", "run"],
        "torchrun_flags": _torchrun_flags(ast.parse(torchrun.read_bytes())),
        "dtypes": _precisions(ast.parse(files[PRECISION])),
        "lora_attn_modules": _literal(ast.parse(files[PEFT]), "LORA_ATTN_MODULES"),
        "recipes": recipes,
        "configs": configs,
        "components": components,
        "external_kwargs": _external_kwargs(configs),
    }


if __name__ == "__main__":
    json.dump(extract(Path(sys.argv[1]), Path(sys.argv[2])), sys.stdout, indent=1)
    sys.stdout.write("\n")
