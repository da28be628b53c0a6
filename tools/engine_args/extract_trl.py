"""Extract what ``accelerate launch … -m trl.scripts.sft …`` accepts from the wheels of the transformers training stack
into ``fixtures/engines/<package>-<release>.json``, one package at a time.

    python tools/engine_args/extract_trl.py trl trl-1.16.0-py3-none-any.whl > fixtures/engines/trl-1.16.0.json
    python tools/engine_args/extract_trl.py transformers transformers-5.24.0-py3-none-any.whl > …
    python tools/engine_args/extract_trl.py accelerate accelerate-1.15.0-py3-none-any.whl > …/accelerate-1.15.0.json
    python tools/engine_args/extract_trl.py peft peft-0.21.2-py3-none-any.whl > fixtures/engines/peft-0.21.2.json

The wheels are PyPI's (``https://pypi.org/simple/<package>/``, pure Python); each
fixture records its wheel's sha256. Read with ``ast`` and ``yaml``, never imported (they need torch):

- **trl**: the dataclasses ``trl sft`` parses (``trl/scripts/sft.py`` ``make_parser``: ``ScriptArguments``,
  ``SFTConfig``, ``ModelConfig``, ``DatasetMixtureConfig``) and the bases they extend (``_BaseConfig``, whose base
  is transformers' ``TrainingArguments``): every field's annotation, default, choices and line; the accelerate configs
  TRL ships (``trl/accelerate_configs/*.yaml``); the ``LoraConfig`` keywords ``get_peft_config`` passes.
  TRL's copy of ``HfArgumentParser`` (trl/scripts/_hf_argparser.py:167-275, transformers' own with a ``none``
  sentinel) makes each field ``--<field>``: a ``Literal``, an
  ``Enum`` or ``metadata["choices"]`` its choices, a ``bool`` a value parsed by ``string_to_bool`` (``--no_<field>``
  beside a field whose default is True), a ``list`` one or more values;
- **transformers**: ``TrainingArguments`` (``transformers/training_args.py``) likewise, the ``OptimizerNames`` its
  ``optim`` takes, and the attention implementations ``AttentionInterface`` registers (modeling_utils.py, + eager);
  for a ``generate`` script (``recommendations/launch_transformers.py``): the keywords
  ``AutoModelForCausalLM.from_pretrained`` reads (``PreTrainedModel.from_pretrained``'s signature and its
  ``kwargs.pop("name", …)`` calls, modeling_utils.py; the auto class's own, models/auto/auto_factory.py), the
  attributes ``GenerationConfig.__init__`` pops (generation/configuration_utils.py: it sets any other keyword as an
  attribute that ``generate`` never reads), the ``cache_implementation`` values ``GenerationConfig.validate`` allows
  (``ALL_CACHE_IMPLEMENTATIONS`` + ``"paged"``), ``DistributedConfig``'s fields (distributed/configuration_utils.py)
  and the model types whose configuration class (``models/*/configuration_*.py``, or a base class it extends) names a
  ``base_model_tp_plan`` or ``base_model_pp_plan``. Each such key records the file and line it was read from;
- **accelerate**: every flag of ``accelerate launch`` (``accelerate/commands/launch.py`` ``add_argument``: its dest,
  type, choices), the keys a config file may have (``BaseConfig`` and ``ClusterConfig`` fields,
  ``commands/config/config_args.py``: ``from_yaml_file`` refuses others), how a nested section's keys become launch
  arguments (``_validate_launch_command``: ``fsdp_config``'s ``x`` is ``fsdp_x``; a key that is no launch argument is
  set and never read), the ``DistributedType``, ``PrecisionType`` and ``ComputeEnvironment`` values, and the offload
  devices ``DeepSpeedPlugin`` names;
- **peft**: ``LoraConfig``'s fields (and its bases', ``peft/config.py``), the ``all-linear`` shorthand and
  ``get_peft_model``'s ``autocast_adapter_dtype`` default.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import sys
import zipfile
from pathlib import Path
from typing import Any

import yaml

SFT = "trl/scripts/sft.py"
TRL_FILES = {
    "ScriptArguments": "trl/scripts/utils.py",
    "DatasetMixtureConfig": "trl/scripts/utils.py",
    "ModelConfig": "trl/trainer/model_config.py",
    "_BaseConfig": "trl/trainer/base_config.py",
    "SFTConfig": "trl/trainer/sft_config.py",
}
TRL_UTILS = "trl/trainer/utils.py"
TRAINING_ARGS = "transformers/training_args.py"
MODELING = "transformers/modeling_utils.py"
GENERATION_CONFIG = "transformers/generation/configuration_utils.py"
AUTO_FACTORY = "transformers/models/auto/auto_factory.py"
DISTRIBUTED_CONFIG = "transformers/distributed/configuration_utils.py"
LAUNCH = "accelerate/commands/launch.py"
CONFIG_ARGS = "accelerate/commands/config/config_args.py"
ACCELERATE_DATACLASSES = "accelerate/utils/dataclasses.py"
LORA_CONFIG = "peft/tuners/lora/config.py"
PEFT_CONSTANTS = "peft/utils/constants.py"
PEFT_CONFIG = "peft/config.py"
PEFT_MAPPING = "peft/mapping_func.py"


def _literal(node: ast.AST | None) -> Any:
    """A value as JSON: a constant or a container of constants; else its source."""
    if node is None:
        return None
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return ast.unparse(node)
    return list(value) if isinstance(value, tuple | set | frozenset) else value


def _classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    return {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}


def _enum(node: ast.ClassDef) -> list[str]:
    """An Enum's values (``NAME = "value"``)."""
    return [s.value.value for s in node.body if isinstance(s, ast.Assign) and isinstance(s.value, ast.Constant)]


def _kind(annotation: str) -> str:
    """How ``HfArgumentParser`` reads the field (trl/scripts/_hf_argparser.py:225-255): a bool, values, one value."""
    if annotation in ("bool", "bool | None", "Optional[bool]"):
        return "bool"
    return "list" if annotation.startswith(("list[", "List[")) else "value"


def _choices(annotation: str, metadata: dict[str, Any], enums: dict[str, list[str]]) -> list[Any] | None:
    """``metadata["choices"]``, else a ``Literal``'s values, else an ``Enum``'s (``OptimizerNames | str``)."""
    if "choices" in metadata:
        return list(metadata["choices"])
    for node in ast.walk(ast.parse(annotation, mode="eval")):
        if isinstance(node, ast.Subscript) and ast.unparse(node.value) in ("Literal", "typing.Literal"):
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return [ast.literal_eval(item) for item in items]
    named = [part.strip() for part in annotation.split("|")]
    return next((enums[name] for name in named if name in enums), None)


def _field(statement: ast.AnnAssign, enums: dict[str, list[str]]) -> dict[str, Any]:
    annotation = ast.unparse(statement.annotation)
    default: Any = _literal(statement.value)
    metadata: dict[str, Any] = {}
    value = statement.value
    if isinstance(value, ast.Call) and ast.unparse(value.func) == "field":
        keywords = {kw.arg: kw.value for kw in value.keywords}
        default = _literal(keywords.get("default"))
        if "default_factory" in keywords:
            default = {"list": [], "dict": {}}.get(ast.unparse(keywords["default_factory"]))
        if isinstance(keywords.get("metadata"), ast.Dict):
            meta = keywords["metadata"]
            assert isinstance(meta, ast.Dict)
            metadata = {ast.literal_eval(k): _literal(v) for k, v in zip(meta.keys, meta.values, strict=True) if k}
    entry = {"type": annotation, "kind": _kind(annotation), "default": default, "line": statement.lineno,
             "choices": _choices(annotation, metadata, enums)}  # fmt: skip
    if "aliases" in metadata:
        entry["aliases"] = metadata["aliases"]
    return entry


def _dataclass(node: ast.ClassDef, path: str, enums: dict[str, list[str]]) -> dict[str, Any]:
    fields = {s.target.id: _field(s, enums) for s in node.body
              if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}  # fmt: skip
    return {"file": path, "line": node.lineno, "bases": [ast.unparse(b) for b in node.bases], "fields": fields}


def _source(wheel: Path, files: list[str]) -> dict[str, Any]:
    return {"wheel": wheel.name, "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
            "index": f"https://pypi.org/simple/{wheel.name.split('-')[0]}/", "files": sorted(set(files)),
            "extracted_by": "tools/engine_args/extract_trl.py"}  # fmt: skip


def _release(files: dict[str, bytes]) -> str:
    metadata = next(text for name, text in files.items() if name.endswith(".dist-info/METADATA"))
    found = re.search(r"^Version: (\S+)$", metadata.decode(), re.MULTILINE)
    assert found is not None
    return found.group(1)


def _parser_dataclasses(sft: ast.Module) -> list[str]:
    """``make_parser``'s ``dataclass_types`` tuple (trl/scripts/sft.py)."""
    for node in ast.walk(sft):
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "dataclass_types":
            assert isinstance(node.value, ast.Tuple)
            return [ast.unparse(item) for item in node.value.elts]
    raise SystemExit("dataclass_types not found")


def _call_keywords(tree: ast.Module, function: str, callee: str) -> list[str]:
    """The keywords ``function`` passes to ``callee(...)`` (``get_peft_config``'s ``LoraConfig``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == function:
            for call in ast.walk(node):
                if isinstance(call, ast.Call) and ast.unparse(call.func) == callee:
                    return [kw.arg for kw in call.keywords if kw.arg is not None]
    raise SystemExit(f"{function}'s {callee}(...) not found")


def extract_trl(files: dict[str, bytes]) -> dict[str, Any]:
    dataclasses = {}
    for name, path in TRL_FILES.items():
        dataclasses[name] = _dataclass(_classes(ast.parse(files[path]))[name], path, {})
    configs = {Path(name).stem: yaml.safe_load(text) for name, text in sorted(files.items())
               if name.startswith("trl/accelerate_configs/") and name.endswith(".yaml")}  # fmt: skip
    return {
        "module": "trl.scripts.sft",
        "parser_dataclasses": _parser_dataclasses(ast.parse(files[SFT])),
        "dataclasses": dataclasses,
        "accelerate_configs": configs,
        "lora_config_keywords": _call_keywords(ast.parse(files[TRL_UTILS]), "get_peft_config", "LoraConfig"),
        "files": [
            SFT,
            TRL_UTILS,
            "trl/scripts/_hf_argparser.py",
            *TRL_FILES.values(),
            *(f"trl/accelerate_configs/{n}.yaml" for n in configs),
        ],
    }


def _attention_implementations(tree: ast.Module) -> list[str]:
    """``AttentionInterface._global_mapping``'s keys, and ``eager`` (the models' own attention, no entry)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "AttentionInterface":
            for statement in node.body:
                if isinstance(statement, ast.Assign) and ast.unparse(statement.targets[0]) == "_global_mapping":
                    assert isinstance(statement.value, ast.Dict)
                    return ["eager", *(ast.literal_eval(k) for k in statement.value.keys if k is not None)]
    raise SystemExit("AttentionInterface._global_mapping not found")


def _method(tree: ast.Module, owner: str, name: str) -> ast.FunctionDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == owner:
            for statement in node.body:
                if isinstance(statement, ast.FunctionDef) and statement.name == name:
                    return statement
    raise SystemExit(f"{owner}.{name} not found")


def _popped(function: ast.FunctionDef, mapping: str = "kwargs") -> list[str]:
    """The names ``function`` takes out of ``mapping`` by ``mapping.pop("name"[, default])``, in order (a name
    popped by a variable, as a loop over names no longer used does, is none)."""
    found: list[str] = []
    for node in ast.walk(function):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "pop"
                and ast.unparse(node.func.value) == mapping and node.args
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):  # fmt: skip
            found.append(node.args[0].value)
    return sorted(set(found), key=found.index)


def _named_parameters(function: ast.FunctionDef) -> list[str]:
    """The parameters a caller can pass by keyword (no ``cls``/``self``, no ``*args``/``**kwargs``)."""
    args = function.args
    return [a.arg for a in [*args.args, *args.kwonlyargs] if a.arg not in ("cls", "self")]


def _from_pretrained(modeling: ast.Module, auto: ast.Module) -> dict[str, Any]:
    """``AutoModelForCausalLM.from_pretrained``'s keywords: the auto class pops its own (``config``,
    ``code_revision``, the hub names it lists) and passes the rest to ``PreTrainedModel.from_pretrained``, which
    reads its named parameters and pops the others from ``**kwargs`` (what neither reads goes to the model's
    configuration)."""
    model = _method(modeling, "PreTrainedModel", "from_pretrained")
    auto_method = _method(auto, "_BaseAutoModelClass", "from_pretrained")
    hub: list[str] = []
    for node in ast.walk(auto_method):
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "hub_kwargs_names":
            hub = list(_literal(node.value))
    return {
        "file": MODELING,
        "line": model.lineno,
        "parameters": _named_parameters(model),
        "popped": _popped(model),
        "auto_file": AUTO_FACTORY,
        "auto_line": auto_method.lineno,
        "auto_popped": sorted(set(_popped(auto_method)) | set(hub)),
    }


def _generation_config(tree: ast.Module) -> dict[str, Any]:
    """``GenerationConfig.__init__``'s ``kwargs.pop`` names (the attributes ``generate`` reads; any other keyword
    becomes an attribute nothing reads), and the ``cache_implementation`` values ``validate`` allows."""
    init = _method(tree, "GenerationConfig", "__init__")
    constants = {ast.unparse(n.targets[0]): n.value for n in tree.body if isinstance(n, ast.Assign)}

    def value(node: ast.expr) -> list[str]:
        if isinstance(node, ast.BinOp):
            return value(node.left) + value(node.right)
        if isinstance(node, ast.Name):
            return value(constants[node.id])
        return list(ast.literal_eval(node))

    validate = _method(tree, "GenerationConfig", "validate")
    allowed = next((node for node in ast.walk(validate) if isinstance(node, ast.Assign)
                    and ast.unparse(node.targets[0]) == "valid_cache_implementations"), None)  # fmt: skip
    if allowed is None:
        raise SystemExit("GenerationConfig.validate's valid_cache_implementations not found")
    return {
        "file": GENERATION_CONFIG,
        "line": init.lineno,
        "attributes": [name for name in _popped(init) if not name.startswith("_")],
        "cache_implementations": value(allowed.value),
        "cache_implementations_line": allowed.lineno,
        "static_cache_implementations": value(constants["ALL_STATIC_CACHE_IMPLEMENTATIONS"]),
    }


def _plan_model_types(files: dict[str, bytes]) -> dict[str, Any]:
    """The ``model_type`` of every configuration class that names a ``base_model_tp_plan`` (``base_model_pp_plan``),
    itself or through a base class of the models' configuration files (a plan of None names none)."""
    classes: dict[str, ast.ClassDef] = {}
    for name in sorted(files):
        if re.fullmatch(r"transformers/models/[^/]+/configuration_[^/]+\.py", name):
            classes.update(_classes(ast.parse(files[name])))

    def own(node: ast.ClassDef, attribute: str) -> Any:
        for statement in node.body:
            target = statement.target if isinstance(statement, ast.AnnAssign) else None
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                target = statement.targets[0]
            if isinstance(target, ast.Name) and target.id == attribute:
                return statement.value
        return None

    def found(name: str, attribute: str) -> Any:
        node = classes.get(name)
        if node is None:
            return None
        value = own(node, attribute)
        if value is not None:
            return value
        return next((v for b in node.bases if (v := found(ast.unparse(b), attribute)) is not None), None)

    out: dict[str, Any] = {"files": "transformers/models/*/configuration_*.py"}
    for attribute in ("base_model_tp_plan", "base_model_pp_plan"):
        types = set()
        for name in classes:
            model_type, plan = found(name, "model_type"), found(name, attribute)
            named = plan is not None and not (isinstance(plan, ast.Constant) and plan.value is None)
            if isinstance(model_type, ast.Constant) and model_type.value and named:
                types.add(model_type.value)
        out[attribute] = sorted(types)
    return out


def extract_transformers(files: dict[str, bytes]) -> dict[str, Any]:
    classes = _classes(ast.parse(files[TRAINING_ARGS]))
    enums = {"OptimizerNames": _enum(classes["OptimizerNames"])}
    modeling = ast.parse(files[MODELING])
    distributed = _classes(ast.parse(files[DISTRIBUTED_CONFIG]))["DistributedConfig"]
    return {
        "dataclasses": {"TrainingArguments": _dataclass(classes["TrainingArguments"], TRAINING_ARGS, enums)},
        "enums": enums,
        "attention_implementations": _attention_implementations(modeling),
        "from_pretrained": _from_pretrained(modeling, ast.parse(files[AUTO_FACTORY])),
        "generation_config": _generation_config(ast.parse(files[GENERATION_CONFIG])),
        "distributed_config": _dataclass(distributed, DISTRIBUTED_CONFIG, {}),
        "parallel_plans": _plan_model_types(files),
        # the source's files stay those of the keys read first; each key added since names its own file and line
        "files": [TRAINING_ARGS, MODELING],
    }


def _launch_flags(tree: ast.Module) -> dict[str, dict[str, Any]]:
    """Every option string of every ``add_argument`` call, with its dest (argparse's: the first long option)."""
    flags = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            names = [a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("-")]
            if not names:
                continue
            keywords = {kw.arg: kw.value for kw in node.keywords if kw.arg is not None}
            long = next((n for n in names if n.startswith("--")), names[0])
            entry = {"dest": _literal(keywords["dest"]) if "dest" in keywords else long.lstrip("-").replace("-", "_"),
                     "type": ast.unparse(keywords["type"]) if "type" in keywords else None,
                     "action": _literal(keywords.get("action")), "choices": _literal(keywords.get("choices")),
                     "line": node.lineno}  # fmt: skip
            flags |= dict.fromkeys(names, entry)
    return flags


def _nested_prefixes(tree: ast.Module) -> dict[str, str]:
    """``_validate_launch_command``'s renaming of a nested config section's keys: ``if name == "fsdp_config" and not
    key.startswith("fsdp"): key = "fsdp_" + key`` → ``{"fsdp_config": "fsdp_"}``."""
    found = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.BoolOp)):
            continue
        compare = node.test.values[0]
        assign = node.body[0]
        if (isinstance(compare, ast.Compare) and ast.unparse(compare.left) == "name"
                and isinstance(assign, ast.Assign) and ast.unparse(assign.targets[0]) == "key"
                and isinstance(assign.value, ast.BinOp) and isinstance(assign.value.left, ast.Constant)):  # fmt: skip
            section = _literal(compare.comparators[0])
            found[section] = assign.value.left.value
    return found


def _plugin_choices(node: ast.ClassDef) -> dict[str, list[str]]:
    """``DeepSpeedPlugin`` fields whose help says "Possible options are a|b|c" (the offload devices)."""
    found = {}
    for statement in node.body:
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            options = re.search(r"Possible options are ([a-z|]+)\.", ast.unparse(statement))
            if options is not None:
                found[statement.target.id] = options.group(1).split("|")
    return found


def extract_accelerate(files: dict[str, bytes]) -> dict[str, Any]:
    config = _classes(ast.parse(files[CONFIG_ARGS]))
    keys = [s.target.id for name in ("BaseConfig", "ClusterConfig") for s in config[name].body
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]  # fmt: skip
    classes = _classes(ast.parse(files[ACCELERATE_DATACLASSES]))
    launch = ast.parse(files[LAUNCH])
    return {
        "command": ["accelerate", "launch"],
        "launch_flags": _launch_flags(launch),
        "config_keys": keys,
        "nested_prefixes": _nested_prefixes(launch),
        "enums": {name: _enum(classes[name]) for name in ("DistributedType", "PrecisionType", "ComputeEnvironment")},
        "deepspeed_choices": _plugin_choices(classes["DeepSpeedPlugin"]),
        "files": [LAUNCH, CONFIG_ARGS, ACCELERATE_DATACLASSES],
    }


def _constant(tree: ast.Module, name: str) -> Any:
    for node in tree.body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == name:
            return _literal(node.value)
    raise SystemExit(f"{name} not found")


def _keyword_default(tree: ast.Module, function: str, keyword: str) -> Any:
    """The default of ``function``'s keyword (its implementation, not an overload stub)."""
    for node in tree.body:
        if (
            isinstance(node, ast.FunctionDef)
            and node.name == function
            and node.body
            and not any(ast.unparse(d) == "overload" for d in node.decorator_list)
        ):
            args = node.args
            for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
                if arg.arg == keyword:
                    return _literal(default)
            positional = [*args.posonlyargs, *args.args]
            for arg, default in zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True):
                if arg.arg == keyword:
                    return _literal(default)
    raise SystemExit(f"{function}({keyword}=…) not found")


def extract_peft(files: dict[str, bytes]) -> dict[str, Any]:
    lora = _classes(ast.parse(files[LORA_CONFIG]))["LoraConfig"]
    base = _classes(ast.parse(files[PEFT_CONFIG]))
    return {
        "dataclasses": {
            "LoraConfig": _dataclass(lora, LORA_CONFIG, {}),
            **{name: _dataclass(base[name], PEFT_CONFIG, {}) for name in ("PeftConfig", "PeftConfigMixin")},
        },
        "all_linear": _constant(ast.parse(files[PEFT_CONSTANTS]), "INCLUDE_LINEAR_LAYERS_SHORTHAND"),
        "autocast_adapter_dtype": _keyword_default(
            ast.parse(files[PEFT_MAPPING]), "get_peft_model", "autocast_adapter_dtype"
        ),
        "files": [LORA_CONFIG, PEFT_CONFIG, PEFT_CONSTANTS, PEFT_MAPPING],
    }


EXTRACTORS = {"trl": extract_trl, "transformers": extract_transformers, "accelerate": extract_accelerate,
              "peft": extract_peft}  # fmt: skip


def extract(package: str, wheel: Path) -> dict[str, Any]:
    with zipfile.ZipFile(wheel) as archive:
        files = {name: archive.read(name) for name in archive.namelist()
                 if name.endswith((".py", ".yaml", "METADATA"))}  # fmt: skip
    found = EXTRACTORS[package](files)
    read = found.pop("files")
    return {"engine": package, "release": _release(files), "source": _source(wheel, read), **found}


if __name__ == "__main__":
    json.dump(extract(sys.argv[1], Path(sys.argv[2])), sys.stdout, indent=1)
    sys.stdout.write("\n")
