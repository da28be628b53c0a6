"""Exact weight bytes of a quantized checkpoint, from `config.json`'s `quantization_config` and the weight groups.

Every quantized Linear is priced tensor by tensor as the library that wrote the checkpoint stores it (packed
codes, scales, zero points, group indices, global scales), every other tensor at `unquantized_bytes` per
element. The totals are the bytes of the checkpoint's safetensors (what `model.safetensors.index.json`
`metadata.total_size` sums), which is what vLLM loads; where vLLM keeps a different layout on the device the
`assumptions` say so. Sources are pinned: vLLM v0.11.0 (commit f71952c1c), AutoAWQ v0.2.9, AutoGPTQ v0.7.1,
GPTQModel v2.2.0, compressed-tensors 0.11.0 (the release vLLM 0.11.0 requires), transformers 4.57.1,
TensorRT-Model-Optimizer 0.37.0, bitsandbytes 0.48.1, safetensors v0.7.0.

Which modules a method quantizes is its own default, then the config's lists:

- AWQ: every Linear inside a decoder layer (AutoAWQ awq/models/base.py:650-654 with awq/utils/module.py:11-12),
  never lm_head or embeddings; `modules_to_not_convert` by substring (vLLM awq.py:120-121).
- GPTQ: the decoder-layer Linears the model definition lists (AutoGPTQ auto_gptq/modeling/_base.py:1003-1011;
  MoE routers are never listed, e.g. modeling/mixtral.py:8-38); lm_head only with `lm_head: true`
  (vLLM gptq.py:122-123); `modules_in_block_to_quantize` by substring and `dynamic` rules by re.match
  (vLLM utils/gptq_utils.py:54-115).
- FP8 (`quant_method: fp8`): every Linear but `ignored_layers`/`modules_to_not_convert` (vLLM fp8.py:127-141);
  lm_head is a ParallelLMHead, not a LinearBase, and MoE routers are built with `quant_config=None`
  (vLLM models/deepseek_v2.py:158-162, models/mixtral.py:106-111), so both stay unquantized.
- compressed-tensors: what a `config_groups` target matches (a name, "re:" + re.match, or the class "Linear",
  lm_head included) minus `ignore` (compressed_tensors/utils/match.py:174-237).
- ModelOpt: every Linear but `exclude_modules` (FP8: exact or substring, vLLM modelopt.py:160-185; NVFP4:
  exact or "*" wildcards, modelopt.py:794-808); lm_head and routers are off in ModelOpt's default config
  (modelopt/torch/quantization/config.py:147-161), vision towers in vLLM (modelopt.py:193-195).
- MXFP4: only the MoE experts (transformers integrations/mxfp4.py:436-443; vLLM mxfp4.py:136-152), minus
  `modules_to_not_convert` ("lm_head" by default, mxfp4.py:478-482) by re.match (mxfp4.py:315-321).
- bitsandbytes: every Linear but `llm_int8_skip_modules`; when that is unset the output embedding (lm_head)
  is skipped (transformers quantizers/base.py:293-312, integrations/bitsandbytes.py:167-172 and 291-320).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal, cast, get_args

from .weight_groups import Role, WeightGroup

__all__ = [
    "AwqScheme",
    "BitsAndBytesScheme",
    "CheckpointSummary",
    "CompressedTensorsArgs",
    "CompressedTensorsGroup",
    "CompressedTensorsScheme",
    "Fp8Scheme",
    "GptqDynamicRule",
    "GptqScheme",
    "ModelOptScheme",
    "Mxfp4Scheme",
    "QuantizationConfigError",
    "QuantizationScheme",
    "QuantizedWeights",
    "Role",
    "WeightGroup",
    "checkpoint_bytes",
    "quantized_weight_bytes",
    "read_quantization",
]

ROLES: frozenset[str] = frozenset(get_args(Role))

# Bounds on what a request may ask for (the engine serves a web API)
MAX_GROUPS = 100_000
MAX_LAYER_INDEX = 100_000
MAX_LAYERS_PER_GROUP = 4096
MAX_PER_LAYER = 65_536
MAX_DIM = (1 << 40) - 1
MAX_NAME_CHARS = 256  # a group's name template; expanded names stay under 300 characters
MAX_PATTERNS = 10_000  # entries of one ignore / exclude / skip list
MAX_PATTERN_CHARS = 1000
MAX_UNBOUNDED_REPEATS = 3  # `*`, `+`, `{n,}` per regex: matching stays O(len(name)^3) at worst
MAX_GROUP_SIZE = 1 << 20
MAX_BLOCK = 1 << 16
MAX_MATCH_CALLS = 1_000_000  # module names classified for one request
MAX_PATTERN_TESTS = 20_000_000  # pattern tests (names × regex or substring patterns) for one request
MAX_TENSORS = 1_000_000
MAX_CHECKPOINT_BYTES = 10**15 - 1

FP16_BYTES = 2  # AutoAWQ and AutoGPTQ/GPTQModel store scales (and biases) in float16
FP32_BYTES = 4
INT32_BYTES = 4
INT64_BYTES = 8


class QuantizationConfigError(ValueError):
    """A quantization_config (or checkpoint summary) the engine cannot read; the message names the field."""


# ---------------------------------------------------------------------------------------------------------
# Scheme types: what `read_quantization` returns
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AwqScheme:
    bits: int  # 4: AutoAWQ's WQLinear_GEMM/GEMV accept only 4 (awq/modules/linear/gemm.py:122-123)
    group_size: int  # input features per scale; -1 = all of them (one group per output channel)
    layout: Literal["gemm", "gemv"]  # gemm: packed along out_features (also exllama/ipex); gemv: along in
    version: str  # as the config spells it
    zero_point: bool  # qzeros are stored either way (gemm.py:143-150)
    modules_to_not_convert: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class GptqDynamicRule:
    """One GPTQModel `dynamic` entry: "-:regex" skips the modules it matches, "+:regex"/"regex" overrides."""

    pattern: str  # the regex, without its "+:"/"-:" prefix; matched with re.match
    skip: bool
    bits: int | None
    group_size: int | None


@dataclass(frozen=True, slots=True)
class GptqScheme:
    bits: int  # 2, 3, 4 or 8
    group_size: int  # -1 = per output channel
    desc_act: bool
    lm_head: bool
    modules_in_block_to_quantize: tuple[str, ...] | None
    dynamic: tuple[GptqDynamicRule, ...]
    checkpoint_format: str


@dataclass(frozen=True, slots=True)
class Fp8Scheme:
    weight_block_size: tuple[int, int] | None  # (rows, cols) per fp32 weight_scale_inv; None: one scale per tensor
    activation_scheme: Literal["static", "dynamic"]  # static: an fp32 input_scale per tensor as well
    ignored_layers: tuple[str, ...]


_Strategy = Literal["tensor", "channel", "group", "block", "token", "tensor_group"]


@dataclass(frozen=True, slots=True)
class CompressedTensorsArgs:
    """A QuantizationArgs (compressed_tensors/quantization/quant_args.py:146-291), strategy resolved."""

    num_bits: int
    type: Literal["int", "float"]
    symmetric: bool
    strategy: _Strategy
    group_size: int | None
    block_structure: tuple[int, int] | None
    dynamic: bool | Literal["local"]
    actorder: Literal["group", "weight"] | None


@dataclass(frozen=True, slots=True)
class CompressedTensorsGroup:
    name: str
    targets: tuple[str, ...]
    weights: CompressedTensorsArgs | None
    input_activations: CompressedTensorsArgs | None
    output_activations: CompressedTensorsArgs | None
    format: str  # the storage format of this group's weights


@dataclass(frozen=True, slots=True)
class CompressedTensorsScheme:
    format: str
    groups: tuple[CompressedTensorsGroup, ...]
    ignore: tuple[str, ...]
    kv_cache: CompressedTensorsArgs | None


@dataclass(frozen=True, slots=True)
class ModelOptScheme:
    algo: Literal["FP8", "NVFP4"]
    group_size: int  # NVFP4: elements per fp8 weight_scale (16)
    exclude_modules: tuple[str, ...]
    kv_cache_quant_algo: str | None


@dataclass(frozen=True, slots=True)
class Mxfp4Scheme:
    modules_to_not_convert: tuple[str, ...]  # "lm_head" plus the config's list, as transformers merges them


@dataclass(frozen=True, slots=True)
class BitsAndBytesScheme:
    bits: Literal[4, 8]
    quant_type: Literal["nf4", "fp4"]  # 4-bit code book; transformers' default is "fp4"
    blocksize: int  # weights per absmax (64: bitsandbytes functional.py:859-860)
    double_quant: bool
    quant_storage: str  # dtype the packed 4-bit codes are stored in
    skip_modules: tuple[str, ...] | None  # None: transformers' default (the output embedding)


QuantizationScheme = (
    AwqScheme | GptqScheme | Fp8Scheme | CompressedTensorsScheme | ModelOptScheme | Mxfp4Scheme | BitsAndBytesScheme
)


@dataclass(frozen=True, slots=True)
class QuantizedWeights:
    method: str  # "awq", "gptq", "fp8", "compressed-tensors", "modelopt-nvfp4", "modelopt-fp8", "mxfp4",
    # "bitsandbytes-4bit", "bitsandbytes-8bit"
    total_bytes: int  # bytes of every tensor of the groups, quantization metadata included
    quantized_elements: int  # logical elements of the quantized Linear weights
    unquantized_elements: int  # logical elements of every other tensor
    by_role: tuple[tuple[str, int], ...]  # (role, bytes), sorted by role
    assumptions: tuple[str, ...]


# ---------------------------------------------------------------------------------------------------------
# Reading a config
# ---------------------------------------------------------------------------------------------------------

_FIELD = "quantization_config"


def _fail(path: str, message: str) -> QuantizationConfigError:
    return QuantizationConfigError(f"{path} {message}")


def _get(cfg: Mapping[str, Any], *keys: str) -> tuple[str, Any]:
    """(key, value) of the first key present (vLLM's get_from_keys_or order); (keys[0], None) if none is."""
    for key in keys:
        if key in cfg:
            return key, cfg[key]
    return keys[0], None


def _int(path: str, value: Any, lo: int, hi: int, allowed: Sequence[int] = ()) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(path, f"must be an integer, got {value!r}")
    if allowed and value not in allowed:
        raise _fail(path, f"must be one of {', '.join(str(a) for a in allowed)}, got {value}")
    if not allowed and not lo <= value <= hi:
        raise _fail(path, f"must be an integer from {lo} to {hi}, got {value}")
    return value


def _group_size(path: str, value: Any) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not (value == -1 or 1 <= value <= MAX_GROUP_SIZE):
        raise _fail(path, f"must be -1 (per channel) or an integer from 1 to {MAX_GROUP_SIZE}, got {value!r}")
    return value


def _bool(path: str, value: Any, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _fail(path, f"must be true or false, got {value!r}")
    return value


def _choice(path: str, value: Any, allowed: Sequence[str], default: str | None = None) -> str:
    if value is None and default is not None:
        return default
    if not isinstance(value, str) or value.lower() not in allowed:
        raise _fail(path, f"must be one of {', '.join(repr(a) for a in allowed)}, got {value!r}")
    return value.lower()


def _check_regex(path: str, pattern: str) -> re.Pattern[str]:
    """Compile a user regex, refusing the shapes that backtrack catastrophically."""
    repeats = 0
    stack: list[bool] = []  # per open group: does it hold a quantifier or an alternation?
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 < n and pattern[i + 1].isdigit() and pattern[i + 1] != "0":
                raise _fail(path, f"must not use back-references, got {pattern!r}")
            i += 2
            continue
        if c == "[":
            j = i + 1
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            i = j + 1
            continue
        if c == "(":
            stack.append(False)
        elif c == ")":
            inner = stack.pop() if stack else False
            nxt = pattern[i + 1] if i + 1 < n else ""
            if inner and nxt in ("*", "+", "{"):
                raise _fail(path, f"must not repeat a group that itself repeats or alternates, got {pattern!r}")
            if inner and stack:
                stack[-1] = True
        elif c in "*+{|?":
            if c in "*+" or (c == "{" and re.match(r"\{\d*,\}", pattern[i:])):
                repeats += 1
            if stack and c != "?":
                stack[-1] = True
        i += 1
    if repeats > MAX_UNBOUNDED_REPEATS:
        raise _fail(path, f"may hold at most {MAX_UNBOUNDED_REPEATS} unbounded repeats (*, +), got {pattern!r}")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise _fail(path, f"is not a valid regular expression ({exc}): {pattern!r}") from None


def _strings(path: str, value: Any, *, allow_none: bool = True) -> tuple[str, ...] | None:
    if value is None:
        if allow_none:
            return None
        raise _fail(path, "must be a list of strings")
    if not isinstance(value, list | tuple):
        raise _fail(path, f"must be a list of strings, got {type(value).__name__}")
    if len(value) > MAX_PATTERNS:
        raise _fail(path, f"may hold at most {MAX_PATTERNS} entries, got {len(value)}")
    out: list[str] = []
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item or len(item) > MAX_PATTERN_CHARS:
            raise _fail(f"{path}[{i}]", f"must be a non-empty string of at most {MAX_PATTERN_CHARS} characters")
        out.append(item)
    return tuple(out)


def _detect_method(cfg: Mapping[str, Any]) -> str:
    method = cfg.get("quant_method")
    if method is None:
        if isinstance(cfg.get("quantization"), Mapping):  # hf_quant_config.json (ModelOpt)
            return "modelopt"
        if cfg.get("load_in_4bit") is True or cfg.get("load_in_8bit") is True:
            return "bitsandbytes"
        raise _fail(f"{_FIELD}.quant_method", "is missing (expected one of " + ", ".join(_READERS) + ")")
    if not isinstance(method, str) or method.lower() not in _READERS:
        raise _fail(f"{_FIELD}.quant_method", f"must be one of {', '.join(_READERS)}, got {method!r}")
    return method.lower()


def read_quantization(quantization_config: Mapping[str, Any]) -> QuantizationScheme:
    """Validate a `quantization_config` (or an hf_quant_config.json-like dict) and return its scheme."""
    if not isinstance(quantization_config, Mapping):
        raise _fail(_FIELD, "must be an object (config.json's quantization_config)")
    return _READERS[_detect_method(quantization_config)](quantization_config)


def _read_awq(cfg: Mapping[str, Any]) -> AwqScheme:
    # vLLM awq.py:73-79 reads w_bit/bits and q_group_size/group_size (AutoAWQ's own names first)
    key, bits = _get(cfg, "w_bit", "bits")
    bits = _int(f"{_FIELD}.{key}", bits, 4, 4, allowed=(4,))
    key, group = _get(cfg, "q_group_size", "group_size")
    group_size = _group_size(f"{_FIELD}.{key}", group)
    version = _choice(f"{_FIELD}.version", cfg.get("version"), ("gemm", "gemv", "exllama", "ipex"), "gemm")
    layout: Literal["gemm", "gemv"] = "gemv" if version == "gemv" else "gemm"  # exllama/ipex load GEMM files
    if layout == "gemv" and group_size not in (32, 64) and group_size < 128:
        # AutoAWQ awq/modules/linear/gemv.py:12-20 raises NotImplementedError for other sizes
        raise _fail(f"{_FIELD}.group_size", f"must be 32, 64 or at least 128 for version 'gemv', got {group_size}")
    not_convert = _strings(f"{_FIELD}.modules_to_not_convert", cfg.get("modules_to_not_convert")) or ()
    return AwqScheme(
        bits, group_size, layout, version, _bool(f"{_FIELD}.zero_point", cfg.get("zero_point"), True), not_convert
    )


def _read_gptq(cfg: Mapping[str, Any]) -> GptqScheme:
    bits = _int(f"{_FIELD}.bits", cfg.get("bits"), 2, 8, allowed=(2, 3, 4, 8))  # vLLM gptq.py:76-80
    group_size = _group_size(f"{_FIELD}.group_size", cfg.get("group_size"))
    fmt = _choice(f"{_FIELD}.checkpoint_format", cfg.get("checkpoint_format"), ("gptq", "gptq_v2"), "gptq")
    raw_modules = cfg.get("modules_in_block_to_quantize")
    modules: tuple[str, ...] | None = None
    if raw_modules is not None:
        # transformers writes a list of lists (vLLM gptq.py:158-166 flattens it)
        if isinstance(raw_modules, list) and raw_modules and all(isinstance(sub, list) for sub in raw_modules):
            raw_modules = [m for sub in raw_modules for m in sub]
        modules = _strings(f"{_FIELD}.modules_in_block_to_quantize", raw_modules)
    raw_dynamic = {} if cfg.get("dynamic") is None else cfg["dynamic"]
    if not isinstance(raw_dynamic, Mapping):
        raise _fail(f"{_FIELD}.dynamic", "must be an object of regex → overrides")
    if len(raw_dynamic) > MAX_PATTERNS:
        raise _fail(f"{_FIELD}.dynamic", f"may hold at most {MAX_PATTERNS} rules")
    rules: list[GptqDynamicRule] = []
    for key, override in raw_dynamic.items():
        path = f"{_FIELD}.dynamic[{key!r}]"
        if not isinstance(key, str) or not key or len(key) > MAX_PATTERN_CHARS:
            raise _fail(path, f"key must be a regex of at most {MAX_PATTERN_CHARS} characters")
        if not isinstance(override, Mapping):
            raise _fail(path, 'must be an object such as {"bits": 8}')
        skip = key.startswith("-:")
        pattern = key[2:] if key[:2] in ("-:", "+:") else key
        _check_regex(path, pattern)
        o_bits = None if override.get("bits") is None else _int(f"{path}.bits", override["bits"], 2, 8, (2, 3, 4, 8))
        o_group = (
            None if override.get("group_size") is None else _group_size(f"{path}.group_size", override["group_size"])
        )
        rules.append(GptqDynamicRule(pattern, skip, o_bits, o_group))
    return GptqScheme(
        bits,
        group_size,
        _bool(f"{_FIELD}.desc_act", cfg.get("desc_act"), False),
        _bool(f"{_FIELD}.lm_head", cfg.get("lm_head"), False),
        modules,
        tuple(rules),
        fmt,
    )


def _read_fp8(cfg: Mapping[str, Any]) -> Fp8Scheme:
    # activation_scheme: vLLM fp8.py:130 requires it; transformers' FineGrainedFP8Config defaults to "dynamic"
    scheme = _choice(f"{_FIELD}.activation_scheme", cfg.get("activation_scheme"), ("static", "dynamic"), "dynamic")
    block = cfg.get("weight_block_size")
    block_size: tuple[int, int] | None = None
    if block is not None:
        if not isinstance(block, list | tuple) or len(block) != 2:
            raise _fail(f"{_FIELD}.weight_block_size", f"must be a list of two integers like [128, 128], got {block!r}")
        block_size = (
            _int(f"{_FIELD}.weight_block_size[0]", block[0], 1, MAX_BLOCK),
            _int(f"{_FIELD}.weight_block_size[1]", block[1], 1, MAX_BLOCK),
        )
        if scheme == "static":  # vLLM fp8.py:311 asserts dynamic activations for block quantization
            raise _fail(f"{_FIELD}.activation_scheme", "must be 'dynamic' with weight_block_size")
    key, ignored = _get(cfg, "ignored_layers", "modules_to_not_convert")
    if not ignored:  # vLLM fp8.py:131-137: modules_to_not_convert when ignored_layers is empty
        key, ignored = "modules_to_not_convert", cfg.get("modules_to_not_convert")
    return Fp8Scheme(
        block_size, "static" if scheme == "static" else "dynamic", _strings(f"{_FIELD}.{key}", ignored) or ()
    )


_CT_FORMATS = ("pack-quantized", "float-quantized", "int-quantized", "naive-quantized", "nvfp4-pack-quantized")


def _read_ct_args(path: str, raw: Any) -> CompressedTensorsArgs | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise _fail(path, "must be an object of quantization args")
    num_bits = _int(f"{path}.num_bits", raw.get("num_bits", 8), 1, 32)
    qtype = _choice(f"{path}.type", raw.get("type"), ("int", "float"), "int")
    symmetric = _bool(f"{path}.symmetric", raw.get("symmetric"), True)
    group_raw = raw.get("group_size")
    group_size = None if group_raw is None else _group_size(f"{path}.group_size", group_raw)
    strategy_raw = raw.get("strategy")
    # strategy inference: compressed_tensors quantization/quant_args.py:264-276
    if strategy_raw is None:
        strategy = "tensor" if group_size is None else ("channel" if group_size == -1 else "group")
    else:
        strategy = _choice(
            f"{path}.strategy", strategy_raw, ("tensor", "channel", "group", "block", "token", "tensor_group")
        )
    if strategy in ("group", "tensor_group") and (group_size is None or group_size < 1):
        raise _fail(f"{path}.group_size", f"must be a positive integer for strategy '{strategy}', got {group_raw!r}")
    block_raw = raw.get("block_structure")
    block: tuple[int, int] | None = None
    if strategy == "block":
        if isinstance(block_raw, str) and re.fullmatch(r"\d+x\d+", block_raw):  # quant_args.py:214-217
            block_raw = [int(x) for x in block_raw.split("x")]
        if not isinstance(block_raw, list | tuple) or len(block_raw) != 2:
            raise _fail(
                f"{path}.block_structure", f"must be two integers [rows, cols] for strategy 'block', got {block_raw!r}"
            )
        block = (
            _int(f"{path}.block_structure[0]", block_raw[0], 1, MAX_BLOCK),
            _int(f"{path}.block_structure[1]", block_raw[1], 1, MAX_BLOCK),
        )
    dyn_raw = raw.get("dynamic", False)
    dynamic: bool | Literal["local"]
    if isinstance(dyn_raw, str) and dyn_raw.lower() == "local":
        dynamic = "local"
    elif isinstance(dyn_raw, bool):
        dynamic = dyn_raw
    else:
        raise _fail(f"{path}.dynamic", f"must be true, false or 'local', got {dyn_raw!r}")
    act_raw = raw.get("actorder")
    actorder: Literal["group", "weight"] | None
    if act_raw is None or act_raw is False:
        actorder = None
    elif act_raw is True:
        actorder = "group"  # quant_args.py:239-242
    else:
        act = _choice(f"{path}.actorder", act_raw, ("group", "weight", "dynamic", "static"))
        actorder = "group" if act in ("group", "dynamic") else "weight"
    if actorder is not None and strategy != "group":
        raise _fail(f"{path}.actorder", "requires strategy 'group'")  # quant_args.py:294-298
    return CompressedTensorsArgs(
        num_bits,
        "float" if qtype == "float" else "int",
        symmetric,
        cast(_Strategy, strategy),
        group_size,
        block,
        dynamic,
        actorder,
    )


def _check_ct_weights(path: str, fmt: str, w: CompressedTensorsArgs) -> None:
    if fmt == "nvfp4-pack-quantized" and not (w.type == "float" and w.num_bits == 4 and w.strategy == "tensor_group"):
        raise _fail(path, "must be float, num_bits 4, strategy 'tensor_group' for format 'nvfp4-pack-quantized'")
    if fmt == "float-quantized" and not (w.type == "float" and w.num_bits == 8):
        raise _fail(path, "must be float with num_bits 8 for format 'float-quantized' (quant_args.py:341-346)")
    if fmt in ("int-quantized", "pack-quantized") and w.type != "int":
        raise _fail(f"{path}.type", f"must be 'int' for format '{fmt}'")
    if fmt == "pack-quantized" and w.num_bits > 8:
        raise _fail(f"{path}.num_bits", "must be at most 8 for format 'pack-quantized'")
    if fmt == "naive-quantized" and w.type == "float" and w.num_bits != 8:
        raise _fail(f"{path}.num_bits", "must be 8 for float weights in format 'naive-quantized'")


def _read_ct(cfg: Mapping[str, Any]) -> CompressedTensorsScheme:
    fmt_raw = cfg.get("format")
    fmt = _choice(f"{_FIELD}.format", fmt_raw, (*_CT_FORMATS, "mixed-precision"))
    sparsity = cfg.get("sparsity_config")
    if isinstance(sparsity, Mapping) and sparsity.get("format") not in (None, "dense"):
        raise _fail(
            f"{_FIELD}.sparsity_config.format",
            f"must be 'dense' (sparse formats are not priced), got {sparsity.get('format')!r}",
        )
    raw_groups = cfg.get("config_groups")
    if not isinstance(raw_groups, Mapping) or not raw_groups:
        raise _fail(f"{_FIELD}.config_groups", "must be a non-empty object of quantization schemes")
    if len(raw_groups) > 1000:
        raise _fail(f"{_FIELD}.config_groups", "may hold at most 1000 schemes")
    groups: list[CompressedTensorsGroup] = []
    for name, raw in raw_groups.items():
        path = f"{_FIELD}.config_groups.{name}"
        if not isinstance(raw, Mapping):
            raise _fail(path, "must be an object with targets and weights (preset names are not expanded here)")
        targets = _strings(f"{path}.targets", raw.get("targets"), allow_none=False) or ()
        if not targets:
            raise _fail(f"{path}.targets", "must list at least one target")
        for i, t in enumerate(targets):
            if t.startswith("re:"):
                _check_regex(f"{path}.targets[{i}]", t[3:])
        group_fmt = fmt
        if raw.get("format") is not None:
            group_fmt = _choice(f"{path}.format", raw.get("format"), _CT_FORMATS)
        elif fmt == "mixed-precision":
            raise _fail(f"{path}.format", "is required when quantization_config.format is 'mixed-precision'")
        weights = _read_ct_args(f"{path}.weights", raw.get("weights"))
        if weights is not None:
            _check_ct_weights(f"{path}.weights", group_fmt, weights)
        groups.append(
            CompressedTensorsGroup(
                str(name),
                targets,
                weights,
                _read_ct_args(f"{path}.input_activations", raw.get("input_activations")),
                _read_ct_args(f"{path}.output_activations", raw.get("output_activations")),
                group_fmt,
            )
        )
    ignore = _strings(f"{_FIELD}.ignore", cfg.get("ignore")) or ()
    for i, pat in enumerate(ignore):
        if pat.startswith("re:"):
            _check_regex(f"{_FIELD}.ignore[{i}]", pat[3:])
    return CompressedTensorsScheme(
        fmt, tuple(groups), ignore, _read_ct_args(f"{_FIELD}.kv_cache_scheme", cfg.get("kv_cache_scheme"))
    )


def _read_modelopt(cfg: Mapping[str, Any]) -> ModelOptScheme:
    # both spellings: hf_quant_config.json {"quantization": {...}} and config.json {"quant_algo": ...}
    # (vLLM modelopt.py:129-147 and 687-744)
    inner: Mapping[str, Any] = cfg
    path = _FIELD
    if "quantization" in cfg:
        inner = cfg["quantization"]
        path = f"{_FIELD}.quantization"
        if not isinstance(inner, Mapping):
            raise _fail(path, "must be an object")
    algo = inner.get("quant_algo")
    if not isinstance(algo, str) or algo.upper() not in ("FP8", "NVFP4"):
        raise _fail(f"{path}.quant_algo", f"must be 'FP8' or 'NVFP4' (vLLM modelopt.py:55), got {algo!r}")
    group_raw = inner.get("group_size")
    group_size = 16 if group_raw is None else _int(f"{path}.group_size", group_raw, 1, MAX_GROUP_SIZE)
    kv = inner.get("kv_cache_quant_algo")
    if kv is not None and not isinstance(kv, str):
        raise _fail(f"{path}.kv_cache_quant_algo", f"must be a string or null, got {kv!r}")
    exclude = _strings(f"{path}.exclude_modules", inner.get("exclude_modules")) or ()
    if algo.upper() == "NVFP4":
        for i, pat in enumerate(exclude):
            if "*" in pat or "." in pat:
                _check_regex(f"{path}.exclude_modules[{i}]", pat.replace(".", r"\.").replace("*", ".*"))
    return ModelOptScheme("NVFP4" if algo.upper() == "NVFP4" else "FP8", group_size, exclude, kv)


def _read_mxfp4(cfg: Mapping[str, Any]) -> Mxfp4Scheme:
    extra = _strings(f"{_FIELD}.modules_to_not_convert", cfg.get("modules_to_not_convert")) or ()
    for i, pat in enumerate(extra):
        _check_regex(f"{_FIELD}.modules_to_not_convert[{i}]", pat)
    if _bool(f"{_FIELD}.dequantize", cfg.get("dequantize"), False):
        raise _fail(f"{_FIELD}.dequantize", "must be false: a dequantized load holds bf16 experts, not MXFP4")
    merged = ("lm_head", *[p for p in extra if p != "lm_head"])  # integrations/mxfp4.py:478-482
    return Mxfp4Scheme(merged)


_BNB_STORAGE_BYTES = {"uint8": 1, "int8": 1, "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}


def _read_bnb(cfg: Mapping[str, Any]) -> BitsAndBytesScheme:
    four = _bool(f"{_FIELD}.load_in_4bit", cfg.get("load_in_4bit"), False)
    eight = _bool(f"{_FIELD}.load_in_8bit", cfg.get("load_in_8bit"), False)
    if four == eight:  # transformers utils/quantization_config.py:473-474
        raise _fail(f"{_FIELD}.load_in_4bit", "or load_in_8bit must be true, and not both")
    quant_type = _choice(f"{_FIELD}.bnb_4bit_quant_type", cfg.get("bnb_4bit_quant_type"), ("nf4", "fp4"), "fp4")
    blocksize = _int(
        f"{_FIELD}.bnb_4bit_blocksize",
        cfg.get("bnb_4bit_blocksize", 64),
        32,
        4096,
        allowed=(32, 64, 128, 256, 512, 1024, 2048, 4096),
    )
    storage = cfg.get("bnb_4bit_quant_storage") or "uint8"
    if not isinstance(storage, str) or storage.removeprefix("torch.") not in _BNB_STORAGE_BYTES:
        raise _fail(
            f"{_FIELD}.bnb_4bit_quant_storage", f"must be one of {', '.join(_BNB_STORAGE_BYTES)}, got {storage!r}"
        )
    skip = _strings(f"{_FIELD}.llm_int8_skip_modules", cfg.get("llm_int8_skip_modules"))
    return BitsAndBytesScheme(
        4 if four else 8,
        "nf4" if quant_type == "nf4" else "fp4",
        blocksize,
        _bool(f"{_FIELD}.bnb_4bit_use_double_quant", cfg.get("bnb_4bit_use_double_quant"), False),
        storage.removeprefix("torch."),
        skip,
    )


_READERS: dict[str, Callable[[Mapping[str, Any]], QuantizationScheme]] = {
    "awq": _read_awq,
    "gptq": _read_gptq,
    "fp8": _read_fp8,
    "compressed-tensors": _read_ct,
    "modelopt": _read_modelopt,
    "modelopt_fp4": _read_modelopt,
    "mxfp4": _read_mxfp4,
    "bitsandbytes": _read_bnb,
}


# ---------------------------------------------------------------------------------------------------------
# Name matching
# ---------------------------------------------------------------------------------------------------------

# How a pattern's verdict can depend on the layer/expert index in a name: not at all, only through the
# number of digits (a bare `.` or `\w` stands for one character), or through the digits themselves.
_NONE, _LENGTH, _CONTENT = 0, 1, 2

PatternKind = Literal["exact", "regex", "fullmatch", "substring", "bnb"]


def _regex_sensitivity(pattern: str) -> int:
    level, i, n = _NONE, 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if nxt.isdigit() or nxt in "dD":
                return _CONTENT
            if nxt.isalnum():
                level = max(level, _LENGTH)  # \w, \S, \b, ... may stand for a digit
            i += 2
            continue
        if c.isdigit() or c in "[{":
            return _CONTENT
        if c == "(" and pattern[i + 1 : i + 3] not in ("?:",) and pattern[i + 1 : i + 2] == "?":
            return _CONTENT  # lookarounds and the like: read conservatively
        if c == ".":
            if i + 1 < n and pattern[i + 1] in "*+":
                i += 3 if i + 2 < n and pattern[i + 2] == "?" else 2
                continue
            level = max(level, _LENGTH)
        i += 1
    return level


@dataclass(frozen=True, slots=True)
class _Pattern:
    field: str  # "quantization_config.ignore[2]"
    text: str
    kind: PatternKind
    regex: re.Pattern[str] | None

    def matches(self, name: str) -> bool:
        if self.kind == "exact":
            return name == self.text
        if self.kind == "substring":
            return self.text in name
        if self.kind == "bnb":  # transformers integrations/bitsandbytes.py:167-172
            return self.text == name or self.text + "." in name or name.rsplit(".", 1)[-1] == self.text
        assert self.regex is not None
        if self.kind == "fullmatch":
            return self.regex.fullmatch(name) is not None
        return self.regex.match(name) is not None

    @property
    def sensitivity(self) -> int:
        if self.kind == "exact" or self.kind == "substring" or self.kind == "bnb":
            return _CONTENT if any(ch.isdigit() for ch in self.text) else _NONE
        assert self.regex is not None
        return _regex_sensitivity(self.regex.pattern)


def _patterns(field: str, texts: Sequence[str], kind: PatternKind) -> list[_Pattern]:
    out = []
    for i, text in enumerate(texts):
        if kind == "regex" and text.startswith("re:"):
            out.append(_Pattern(f"{field}[{i}]", text, "regex", re.compile(text[3:])))
        elif kind == "regex":  # compressed-tensors: a plain entry is an exact name (match.py:234-237)
            out.append(_Pattern(f"{field}[{i}]", text, "exact", None))
        else:
            out.append(_Pattern(f"{field}[{i}]", text, kind, None))
    return out


class _Matcher:
    """A list of patterns; exact names are looked up in a dict, the rest tested in order."""

    __slots__ = ("_exact", "_fields", "_others", "patterns", "used")

    def __init__(self, patterns: Sequence[_Pattern]) -> None:
        self.patterns = tuple(patterns)
        self._exact = {p.text: p for p in reversed(self.patterns) if p.kind == "exact"}
        self._others = tuple(p for p in self.patterns if p.kind != "exact")
        self.used: set[str] = set()
        self._fields = {p.field for p in self.patterns}

    @property
    def sensitivity(self) -> int:
        return max((p.sensitivity for p in self.patterns), default=_NONE)

    def first(self, name: str, budget: _Budget) -> _Pattern | None:
        hit = self._exact.get(name)
        if hit is None:
            budget.tests += len(self._others)
            hit = next((p for p in self._others if p.matches(name)), None)
        if hit is not None:
            self.used.add(hit.field)
        return hit

    def mark(self, name: str, budget: _Budget) -> None:
        """Record every entry that matches `name` (bookkeeping for `unused`, whatever decided the module)."""
        hit = self._exact.get(name)
        if hit is not None:
            self.used.add(hit.field)
        waiting = [p for p in self._others if p.field not in self.used]
        budget.tests += len(waiting)
        self.used.update(p.field for p in waiting if p.matches(name))

    @property
    def complete(self) -> bool:
        return len(self.used) == len(self._fields)

    def unused(self) -> list[_Pattern]:
        return [p for p in self.patterns if p.field not in self.used]


@dataclass(slots=True)
class _Budget:
    calls: int = 0
    tests: int = 0

    def check(self) -> None:
        if self.calls > MAX_MATCH_CALLS or self.tests > MAX_PATTERN_TESTS:
            raise QuantizationConfigError(
                f"{_FIELD}: its index-dependent patterns would need more than {MAX_MATCH_CALLS} module names "
                f"or {MAX_PATTERN_TESTS} pattern tests for these weight groups; shorten the lists"
            )


# ---------------------------------------------------------------------------------------------------------
# Decisions and layouts: what one Linear weight is stored as
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Keep:
    reason: str


@dataclass(frozen=True, slots=True)
class _Quant:
    layout: Any  # hashable, method-specific parameters


_Decision = _Keep | _Quant


def _awq_bytes(s: AwqScheme, out_f: int, in_f: int) -> int:
    g = in_f if s.group_size == -1 else s.group_size
    pack = 32 // s.bits
    if s.layout == "gemm":
        # AutoAWQ awq/modules/linear/gemm.py:135-157: qweight (in, out/8) int32, qzeros (in/g, out/8) int32,
        # scales (in/g, out) fp16
        return (
            in_f * (out_f // pack) * INT32_BYTES
            + (in_f // g) * (out_f // pack) * INT32_BYTES
            + (in_f // g) * out_f * FP16_BYTES
        )
    # gemv.py:12-25 and 45-68: qweight (out, in/8), qzeros (out, w), scales (out, w·8) with the padded width w
    width = -(-(in_f // g) // pack)
    multiplier = 1 if g >= 128 else (2 if g == 64 else 4)
    width = -(-width // multiplier) * multiplier
    return out_f * (in_f // pack) * INT32_BYTES + out_f * width * INT32_BYTES + out_f * width * pack * FP16_BYTES


def _gptq_bytes(bits: int, group_size: int, out_f: int, in_f: int) -> int:
    # AutoGPTQ auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py:50-74 (GPTQModel nn_modules/qlinear/__init__.py:124-148
    # the same): qweight (in/32·bits, out) int32, qzeros (ceil(in/g), out/32·bits) int32, scales (ceil(in/g), out)
    # fp16, g_idx (in,) int32 -- g_idx is written whatever desc_act says
    g = in_f if group_size == -1 else group_size
    groups = -(-in_f // g)
    return (
        (in_f // 32 * bits) * out_f + groups * (out_f // 32 * bits) + in_f
    ) * INT32_BYTES + groups * out_f * FP16_BYTES


def _fp8_bytes(s: Fp8Scheme, out_f: int, in_f: int) -> int:
    # vLLM utils/fp8_utils.py:785-845: fp8 weight; fp32 weight_scale_inv per block, or one fp32 weight_scale
    # (and one fp32 input_scale when static) per checkpoint tensor
    scales = (
        1 if s.weight_block_size is None else -(-out_f // s.weight_block_size[0]) * -(-in_f // s.weight_block_size[1])
    )
    static = 1 if s.activation_scheme == "static" else 0
    return out_f * in_f + (scales + static) * FP32_BYTES


def _ct_scale_count(a: CompressedTensorsArgs, out_f: int, in_f: int) -> int:
    # compressed_tensors/quantization/lifecycle/initialize.py:168-212
    if a.strategy == "channel":
        return out_f
    if a.strategy in ("group", "tensor_group"):
        assert a.group_size is not None
        return out_f * max(-(-in_f // a.group_size), 1)
    if a.strategy == "block":
        assert a.block_structure is not None
        return -(-out_f // a.block_structure[0]) * -(-in_f // a.block_structure[1])
    return 1


def _ct_activation_bytes(a: CompressedTensorsArgs | None, scale_bytes: int) -> int:
    """input_/output_ scale, zero point and global scale of an activation (initialize.py:150-245)."""
    if a is None or a.dynamic is True:
        return 0
    total = FP32_BYTES if a.strategy == "tensor_group" else 0  # *_global_scale (:159-166)
    fp4 = a.type == "float" and a.num_bits == 4
    if not a.dynamic:  # "local" registers no scale (:233-238)
        total += 1 if fp4 else scale_bytes
    if not a.symmetric:
        total += 1
    return total


def _ct_bytes(group: CompressedTensorsGroup, scale_bytes: int, out_f: int, in_f: int) -> int:
    w = group.weights
    assert w is not None
    fp4 = w.type == "float" and w.num_bits == 4
    s_bytes = 1 if fp4 else scale_bytes  # fp4 scales are float8_e4m3 (initialize.py:217-218)
    n_scales = _ct_scale_count(w, out_f, in_f)
    total = n_scales * s_bytes
    if w.strategy == "tensor_group":
        total += FP32_BYTES  # weight_global_scale (initialize.py:159-166)
    if w.actorder == "group":
        total += in_f * INT32_BYTES  # weight_g_idx (initialize.py:247-255)
    fmt = group.format
    if fmt == "pack-quantized":
        pack = 32 // w.num_bits
        # pack_quantized.py:66-72 and 130-136: weight_packed (out, ceil(in/pack)) int32, weight_shape int64 [2]
        total += out_f * -(-in_f // pack) * INT32_BYTES + 2 * INT64_BYTES
        if not w.symmetric:
            if w.strategy in ("group", "channel"):  # packed zero points (pack_quantized.py:73-86)
                zp_cols = in_f // (w.group_size if w.strategy == "group" and w.group_size else in_f)
                total += -(-out_f // pack) * zp_cols * INT32_BYTES
            else:
                total += n_scales  # int8, like the scale
    elif fmt == "nvfp4-pack-quantized":
        total += out_f * (in_f // 2)  # weight_packed uint8 (nvfp4_quantized.py:77-81)
    else:
        # naive/int/float-quantized store the weight in pytorch_dtype(): int8 or float8_e4m3fn (quant_args.py:341-353)
        total += out_f * in_f * (1 if w.num_bits <= 8 else (2 if w.num_bits <= 16 else 4))
        if not w.symmetric:
            total += n_scales
    total += _ct_activation_bytes(group.input_activations, scale_bytes)
    total += _ct_activation_bytes(group.output_activations, scale_bytes)
    return total


def _modelopt_bytes(s: ModelOptScheme, out_f: int, in_f: int) -> int:
    if s.algo == "FP8":
        # vLLM modelopt.py:240-262: fp8 weight, fp32 weight_scale and input_scale per checkpoint tensor
        return out_f * in_f + 2 * FP32_BYTES
    # modelopt.py:889-926: weight uint8 (out, in/2), fp8 weight_scale (out, in/group), fp32 weight_scale_2
    # and input_scale
    return out_f * (in_f // 2) + out_f * (in_f // s.group_size) + 2 * FP32_BYTES


def _mxfp4_bytes(out_f: int, in_f: int) -> int:
    # transformers integrations/mxfp4.py:162-180: *_blocks uint8 (…, in/32, 16), *_scales uint8 e8m0 (…, in/32)
    return out_f * (in_f // 32) * 16 + out_f * (in_f // 32)


def _bnb_bytes(s: BitsAndBytesScheme, unq_dtype: str, out_f: int, in_f: int) -> int:
    n = out_f * in_f
    if s.bits == 8:
        # bitsandbytes nn/modules.py:978-1000: int8 weight, fp32 SCB per row, uint8 weight_format
        return n + out_f * FP32_BYTES + 1
    item = _BNB_STORAGE_BYTES[s.quant_storage]
    weight = (n + 1) // (item * 2) * item  # bitsandbytes _ops.py:224-227
    blocks = -(-n // s.blocksize)
    meta: dict[str, Any] = {
        "quant_type": s.quant_type,
        "blocksize": s.blocksize,
        "dtype": unq_dtype,
        "shape": [out_f, in_f],
    }
    if s.double_quant:
        # functional.py:873-885: uint8 absmax, fp32 absmax per 256 of them and the 256-entry dynamic code
        absmax = blocks + -(-blocks // 256) * FP32_BYTES + 256 * FP32_BYTES
        meta.update({"nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": 0.028376519680023193})
    else:
        absmax = blocks * FP32_BYTES
    # functional.py:505-535 as_dict(packed=True): absmax, quant_map (16 fp32), the JSON of the rest as uint8
    packed_json = len(json.dumps(meta).encode())
    return weight + absmax + 16 * FP32_BYTES + packed_json


# ---------------------------------------------------------------------------------------------------------
# Per-method plans: which Linear is quantized, and how it is stored
# ---------------------------------------------------------------------------------------------------------

_DECODER_ROLES = frozenset({"attention", "mlp", "expert", "shared_expert", "router", "other"})


@dataclass(slots=True)
class _Plan:
    method: str
    matchers: dict[str, _Matcher]  # the config's lists, by purpose
    classify: Callable[[WeightGroup, str, _Budget], _Decision]
    linear_bytes: Callable[[Any, int, int], int]  # (layout, out_features, in_features) → bytes
    notes: list[str]


def _listed(matcher: _Matcher, field: str, name: str, budget: _Budget) -> _Keep | None:
    """Kept unquantized because the config's `field` list names the module (None: it does not)."""
    hit = matcher.first(name, budget)
    return None if hit is None else _Keep(f"{field} {hit.text!r}")


def _plan_awq(s: AwqScheme) -> _Plan:
    skip = _Matcher(_patterns(f"{_FIELD}.modules_to_not_convert", s.modules_to_not_convert, "substring"))

    def classify(g: WeightGroup, name: str, budget: _Budget) -> _Decision:
        if kept := _listed(skip, "modules_to_not_convert", name, budget):
            return kept
        if not g.layers or g.role not in _DECODER_ROLES:
            return _Keep("AutoAWQ quantizes only the Linears inside the decoder layers")
        return _Quant(s)

    gs = "all input features" if s.group_size == -1 else f"{s.group_size} input features"
    packed = "out_features (qweight [in, out/8])" if s.layout == "gemm" else "in_features (qweight [out, in/8])"
    notes = [
        f"AWQ, version {s.version!r}: 4-bit weights packed 8 per int32 along {packed}, a packed int32 zero and "
        f"an fp16 scale per {gs} (AutoAWQ v0.2.9 awq/modules/linear/{s.layout}.py)",
    ]
    return _Plan("awq", {"modules_to_not_convert": skip}, classify, lambda lay, o, i: _awq_bytes(lay, o, i), notes)


def _plan_gptq(s: GptqScheme) -> _Plan:
    in_block = _Matcher(
        _patterns(f"{_FIELD}.modules_in_block_to_quantize", s.modules_in_block_to_quantize or (), "substring")
    )
    rules = [
        _Pattern(
            f"{_FIELD}.dynamic[{('-:' if r.skip else '+:') + r.pattern!r}]", r.pattern, "regex", re.compile(r.pattern)
        )
        for r in s.dynamic
    ]
    by_field = {p.field: r for p, r in zip(rules, s.dynamic, strict=True)}
    dynamic = _Matcher(rules)

    def classify(g: WeightGroup, name: str, budget: _Budget) -> _Decision:
        if g.role == "lm_head":
            if not s.lm_head:
                return _Keep("GPTQ leaves lm_head unquantized unless lm_head is true (vLLM gptq.py:122-123)")
        elif not g.layers or g.role not in _DECODER_ROLES:
            return _Keep("GPTQ quantizes only the decoder layers' Linears (AutoGPTQ modeling/_base.py:1003-1011)")
        elif g.role == "router":
            return _Keep("AutoGPTQ/GPTQModel model definitions never list MoE routers (e.g. modeling/mixtral.py:8-38)")
        if s.modules_in_block_to_quantize is not None and g.role != "lm_head" and in_block.first(name, budget) is None:
            return _Keep("not in modules_in_block_to_quantize")
        bits, group_size = s.bits, s.group_size
        hit = dynamic.first(name, budget)  # first rule that matches wins (vLLM gptq_utils.py:60-72)
        if hit is not None:
            rule = by_field[hit.field]
            if rule.skip:
                return _Keep(f"dynamic rule '-:{rule.pattern}'")
            bits = rule.bits if rule.bits is not None else bits
            group_size = rule.group_size if rule.group_size is not None else group_size
        return _Quant((bits, group_size))

    gs = "per output channel" if s.group_size == -1 else f"per {s.group_size} input features"
    notes = [
        f"GPTQ ({s.checkpoint_format}): {s.bits}-bit weights packed into int32 along in_features, packed int32 zeros "
        f"and fp16 scales {gs}, and an int32 g_idx per input feature (AutoGPTQ v0.7.1 "
        "auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py:50-74 writes g_idx whatever desc_act says)",
    ]
    if not s.desc_act:
        notes.append(
            "On the device vLLM drops g_idx when desc_act is false (vLLM gptq.py:316-322): "
            "4 bytes per input feature of each quantized Linear less than these checkpoint bytes"
        )
    return _Plan(
        "gptq",
        {"modules_in_block_to_quantize": in_block, "dynamic": dynamic},
        classify,
        lambda lay, o, i: _gptq_bytes(lay[0], lay[1], o, i),
        notes,
    )


def _plan_fp8(s: Fp8Scheme) -> _Plan:
    ignored = _Matcher(_patterns(f"{_FIELD}.ignored_layers", s.ignored_layers, "exact"))

    def classify(g: WeightGroup, name: str, budget: _Budget) -> _Decision:
        if kept := _listed(ignored, "ignored_layers", name, budget):
            return kept
        if g.role == "lm_head":
            return _Keep("vLLM's fp8 method quantizes LinearBase layers; lm_head is a ParallelLMHead (fp8.py:166-187)")
        if g.role in ("embedding", "norm"):
            return _Keep("not a Linear")
        if g.role == "router":
            return _Keep("MoE routers are built with quant_config=None (vLLM models/deepseek_v2.py:158-162)")
        return _Quant(s)

    if s.weight_block_size is None:
        how = "one fp32 weight_scale per tensor"
    else:
        how = f"an fp32 weight_scale_inv per {s.weight_block_size[0]}×{s.weight_block_size[1]} block"
    static = ", and one fp32 input_scale per tensor (static activations)" if s.activation_scheme == "static" else ""
    notes = [
        f"FP8 (quant_method fp8): float8_e4m3 weights with {how}{static} (vLLM fp8.py:255-329)",
        "On GPUs below compute capability 8.9 vLLM runs these weight-only through Marlin (fp8.py:234-238, "
        "376-379): the fp8 bytes are repacked as int32, the scales become "
        + (
            "per-channel 16-bit scales (marlin_utils_fp8.py:126-142)"
            if s.weight_block_size is None
            else f"16-bit scales per {s.weight_block_size[1]} input features and output channel "
            "(marlin_utils_fp8.py:143-152)"
        )
        + " and the input scales are dropped",
    ]
    return _Plan("fp8", {"ignored_layers": ignored}, classify, lambda lay, o, i: _fp8_bytes(lay, o, i), notes)


def _ct_scale_dtype_bytes(unquantized_bytes: Fraction) -> int:
    # scales take the module's dtype when it is f16/bf16/f32/f64, else float16 (initialize.py:215-228)
    return int(unquantized_bytes) if unquantized_bytes in (2, 4, 8) else FP16_BYTES


def _plan_ct(s: CompressedTensorsScheme, unquantized_bytes: Fraction) -> _Plan:
    targets = [
        _Matcher(
            [
                p
                for p in _patterns(f"{_FIELD}.config_groups.{grp.name}.targets", grp.targets, "regex")
                if p.text not in ("Linear", "Embedding")
            ]
        )
        for grp in s.groups
    ]
    class_targets = [{t for t in grp.targets if t in ("Linear", "Embedding")} for grp in s.groups]
    ignore = _Matcher([p for p in _patterns(f"{_FIELD}.ignore", s.ignore, "regex") if p.text != "Linear"])
    ignore_linear = "Linear" in s.ignore
    scale_bytes = _ct_scale_dtype_bytes(unquantized_bytes)

    def classify(g: WeightGroup, name: str, budget: _Budget) -> _Decision:
        for grp, names, classes in zip(s.groups, targets, class_targets, strict=True):
            # a target is a module name ("re:" + re.match, or equality) or a class in the module's MRO; nn.Linear
            # for "Linear" (compressed_tensors utils/match.py:174-259)
            if ("Linear" in classes) or names.first(name, budget) is not None:
                if ignore_linear:
                    return _Keep("ignore 'Linear'")
                hit = ignore.first(name, budget)
                if hit is not None:
                    return _Keep(f"ignore {hit.text!r}")
                if grp.weights is None:
                    return _Keep(f"config group {grp.name!r} quantizes no weights")
                return _Quant(grp)
        return _Keep("no config_groups target matches it")

    notes = []
    for grp in s.groups:
        if "Embedding" in grp.targets:
            notes.append(f"config group {grp.name!r} targets 'Embedding': embedding tables are priced unquantized here")
        w = grp.weights
        if w is None:
            notes.append(f"compressed-tensors group {grp.name!r}: activations only, weights stored unquantized")
            continue
        size = {
            "group": f" of {w.group_size}",
            "tensor_group": f" of {w.group_size}",
            "block": f" {w.block_structure}",
        }.get(w.strategy, "")
        notes.append(
            f"compressed-tensors group {grp.name!r} ({grp.format}): {w.type}{w.num_bits} weights, "
            f"{'symmetric' if w.symmetric else 'asymmetric'}, {w.strategy}{size} scales"
            + (
                " in float8_e4m3 with an fp32 global scale"
                if grp.format == "nvfp4-pack-quantized"
                else f" of {scale_bytes} bytes"
            )
            + f", targets {list(grp.targets)}"
        )
    return _Plan(
        "compressed-tensors",
        {"ignore": ignore, **{f"targets.{grp.name}": m for grp, m in zip(s.groups, targets, strict=True)}},
        classify,
        lambda lay, o, i: _ct_bytes(lay, scale_bytes, o, i),
        notes,
    )


def _plan_modelopt(s: ModelOptScheme) -> _Plan:
    field = f"{_FIELD}.exclude_modules"
    pats: list[_Pattern] = []
    for i, text in enumerate(s.exclude_modules):
        pats.append(_Pattern(f"{field}[{i}]", text, "exact", None))
        if s.algo == "FP8":
            pats.append(_Pattern(f"{field}[{i}]", text, "substring", None))  # modelopt.py:177-184
        elif "*" in text or "." in text:
            regex = re.compile(text.replace(".", r"\.").replace("*", ".*"))  # modelopt.py:802-807
            pats.append(_Pattern(f"{field}[{i}]", text, "fullmatch", regex))
    exclude = _Matcher(pats)

    def classify(g: WeightGroup, name: str, budget: _Budget) -> _Decision:
        if kept := _listed(exclude, "exclude_modules", name, budget):
            return kept
        if g.role == "lm_head":
            return _Keep("ModelOpt's default config disables lm_head (modelopt/torch/quantization/config.py:152)")
        if g.role == "router":
            return _Keep("ModelOpt's default config disables MoE routers (config.py:154-157)")
        if g.role in ("embedding", "norm"):
            return _Keep("not a Linear")
        if g.role == "vision" or "vision_tower" in name or "vision_model" in name:
            return _Keep("vLLM keeps vision-tower Linears unquantized (modelopt.py:193-195)")
        return _Quant(s)

    if s.algo == "FP8":
        notes = [
            "ModelOpt FP8: float8_e4m3 weights, one fp32 weight_scale and one fp32 input_scale per tensor "
            "(vLLM modelopt.py:240-262)"
        ]
    else:
        notes = [
            f"ModelOpt NVFP4: two fp4 (e2m1) values per byte, a float8_e4m3 weight_scale per {s.group_size} "
            "elements, an fp32 weight_scale_2 and an fp32 input_scale per tensor (vLLM modelopt.py:889-926)"
        ]
    return _Plan(
        f"modelopt-{s.algo.lower()}",
        {"exclude_modules": exclude},
        classify,
        lambda lay, o, i: _modelopt_bytes(lay, o, i),
        notes,
    )


def _plan_mxfp4(s: Mxfp4Scheme) -> _Plan:
    # transformers tests re.match(f"{key}\\.") or re.match(key) (integrations/mxfp4.py:315-321): re.match(key)
    skip = _Matcher(
        [
            _Pattern(f"{_FIELD}.modules_to_not_convert[{i}]", text, "regex", re.compile(text))
            for i, text in enumerate(s.modules_to_not_convert)
        ]
    )

    def classify(g: WeightGroup, name: str, budget: _Budget) -> _Decision:
        if kept := _listed(skip, "modules_to_not_convert", name, budget):
            return kept
        if g.role != "expert":
            return _Keep("MXFP4 quantizes only the MoE experts (transformers integrations/mxfp4.py:436-443)")
        return _Quant("mxfp4")

    notes = [
        "MXFP4: expert weights as *_blocks (uint8, two fp4 e2m1 values per byte) and *_scales (uint8 e8m0, one "
        "per 32 elements) (transformers 4.57.1 integrations/mxfp4.py:162-180)",
        "vLLM pads the experts on the device for some backends (Marlin: intermediate to a multiple of 128 and "
        "hidden to 256; SM100 FlashInfer: both to 256; vLLM mxfp4.py:185-227)",
    ]
    return _Plan("mxfp4", {"modules_to_not_convert": skip}, classify, lambda lay, o, i: _mxfp4_bytes(o, i), notes)


def _plan_bnb(s: BitsAndBytesScheme, unquantized_bytes: Fraction) -> _Plan:
    skip = _Matcher(_patterns(f"{_FIELD}.llm_int8_skip_modules", s.skip_modules or (), "bnb"))
    unq_dtype = {2: "bfloat16", 4: "float32", 8: "float64"}.get(int(unquantized_bytes), "bfloat16")

    def classify(g: WeightGroup, name: str, budget: _Budget) -> _Decision:
        hit = skip.first(name, budget)
        if hit is not None:
            return _Keep(f"llm_int8_skip_modules {hit.text!r}")
        if s.skip_modules is None and g.role == "lm_head":
            return _Keep(
                "transformers keeps the output embedding unquantized when llm_int8_skip_modules is unset "
                "(quantizers/base.py:301-302, integrations/bitsandbytes.py:315-320)"
            )
        return _Quant(s)

    if s.bits == 8:
        notes = [
            "bitsandbytes 8-bit: int8 weights, an fp32 SCB per output row and a uint8 weight_format "
            "(bitsandbytes 0.48.1 nn/modules.py:978-1000)"
        ]
    else:
        dq = (
            "a uint8 absmax (double quant: plus an fp32 absmax per 256 blocks and a 256-entry fp32 code)"
            if s.double_quant
            else "an fp32 absmax"
        )
        notes = [
            f"bitsandbytes 4-bit {s.quant_type}: two codes per byte, {dq} per {s.blocksize} weights, a 16-entry "
            "fp32 quant_map and the quant_state JSON as uint8 (bitsandbytes 0.48.1 functional.py:505-535, 859-895)"
        ]
        if s.double_quant:
            notes.append(
                "vLLM dequantizes the double-quantized absmax to fp32 at load (model_loader/"
                "bitsandbytes_loader.py:553-575): 4 bytes per block on the device instead of about 1"
            )
    if s.skip_modules is not None:
        notes.append(
            "llm_int8_skip_modules is set, so transformers adds no default skip: lm_head is quantized "
            "unless listed (quantizers/base.py:301-307)"
        )
    return _Plan(
        f"bitsandbytes-{s.bits}bit",
        {"llm_int8_skip_modules": skip},
        classify,
        lambda lay, o, i: _bnb_bytes(lay, unq_dtype, o, i),
        notes,
    )


def _plan(scheme: QuantizationScheme, unquantized_bytes: Fraction) -> _Plan:
    if isinstance(scheme, AwqScheme):
        return _plan_awq(scheme)
    if isinstance(scheme, GptqScheme):
        return _plan_gptq(scheme)
    if isinstance(scheme, Fp8Scheme):
        return _plan_fp8(scheme)
    if isinstance(scheme, CompressedTensorsScheme):
        return _plan_ct(scheme, unquantized_bytes)
    if isinstance(scheme, ModelOptScheme):
        return _plan_modelopt(scheme)
    if isinstance(scheme, Mxfp4Scheme):
        return _plan_mxfp4(scheme)
    return _plan_bnb(scheme, unquantized_bytes)


# ---------------------------------------------------------------------------------------------------------
# Pricing the groups
# ---------------------------------------------------------------------------------------------------------


def _check_group(i: int, g: Any) -> WeightGroup:
    path = f"groups[{i}]"
    if not isinstance(g, WeightGroup):
        raise ValueError(f"{path} must be a WeightGroup, got {type(g).__name__}")
    if not g.name or len(g.name) > MAX_NAME_CHARS or not g.name.isprintable():
        raise ValueError(f"{path}.name must be 1 to {MAX_NAME_CHARS} printable characters")
    if g.role not in ROLES:
        raise ValueError(f"{path}.role must be one of {', '.join(sorted(ROLES))}, got {g.role!r}")
    if len(g.shape) > 8 or any(isinstance(d, bool) or not isinstance(d, int) or not 1 <= d <= MAX_DIM for d in g.shape):
        raise ValueError(f"{path}.shape must be at most 8 dimensions from 1 to {MAX_DIM}, got {g.shape!r}")
    if g.linear and len(g.shape) != 2:
        raise ValueError(f"{path}.shape must be (out_features, in_features) for a Linear weight, got {g.shape!r}")
    if (
        len(g.layers) > MAX_LAYERS_PER_GROUP
        or len(set(g.layers)) != len(g.layers)
        or any(isinstance(x, bool) or not isinstance(x, int) or not 0 <= x <= MAX_LAYER_INDEX for x in g.layers)
    ):
        raise ValueError(
            f"{path}.layers must be at most {MAX_LAYERS_PER_GROUP} distinct indices from 0 to {MAX_LAYER_INDEX}"
        )
    if isinstance(g.per_layer, bool) or not isinstance(g.per_layer, int) or not 1 <= g.per_layer <= MAX_PER_LAYER:
        raise ValueError(f"{path}.per_layer must be an integer from 1 to {MAX_PER_LAYER}, got {g.per_layer!r}")
    if "{layer}" in g.name and not g.layers:
        raise ValueError(f"{path}.name has '{{layer}}' but layers is empty")
    return g


def _buckets(indices: Sequence[int], level: int) -> list[tuple[str, int]]:
    """(index as a name spells it, how many indices it stands for) for a pattern sensitivity level."""
    if level == _CONTENT:
        return [(str(x), 1) for x in indices]
    if level == _LENGTH:
        by_len: dict[int, list[int]] = {}
        for x in indices:
            by_len.setdefault(len(str(x)), []).append(x)
        return [(str(xs[0]), len(xs)) for xs in by_len.values()]
    return [(str(indices[0]), len(indices))] if indices else []


def _decisions(g: WeightGroup, plan: _Plan, level: int, budget: _Budget) -> dict[_Decision, int]:
    """How many of the group's tensors get each decision, expanding only the indices a pattern can tell apart.

    Every name is also offered to the config's lists that still have an entry without a match, so that the
    assumptions can say which entries matched nothing (a method's own default may decide before its lists)."""
    if "{layer}" in g.name:
        layer_buckets = _buckets(g.layers, level)
    else:
        layer_buckets = [("", max(1, len(g.layers)))]
    if "{expert}" in g.name:
        expert_buckets = _buckets(range(g.per_layer), level)
    else:
        expert_buckets = [("", g.per_layer)]
    out: dict[_Decision, int] = {}
    for layer, l_count in layer_buckets:
        base = g.name.replace("{layer}", layer)
        for expert, e_count in expert_buckets:
            name = base.replace("{expert}", expert)
            budget.calls += 1
            decision = plan.classify(g, name, budget) if g.linear else _Keep("")
            out[decision] = out.get(decision, 0) + l_count * e_count
            for matcher in plan.matchers.values():
                if not matcher.complete:
                    matcher.mark(name, budget)
        budget.check()
    return out


def _unquantized(elements: int, per_element: Fraction) -> int:
    return math.ceil(elements * per_element)


def quantized_weight_bytes(
    groups: Sequence[WeightGroup], quantization_config: Mapping[str, Any], unquantized_bytes: float = 2.0
) -> QuantizedWeights:
    """Bytes of the checkpoint's tensors for these weight groups under this quantization_config.

    `unquantized_bytes`: bytes per element of every tensor the method leaves alone (2.0 for bf16/fp16).
    """
    if (
        isinstance(unquantized_bytes, bool)
        or not isinstance(unquantized_bytes, int | float)
        or not (0 < unquantized_bytes <= 8)
    ):
        raise ValueError(f"unquantized_bytes must be a number in (0, 8], got {unquantized_bytes!r}")
    if not isinstance(groups, Sequence) or len(groups) > MAX_GROUPS:
        raise ValueError(f"groups must be a sequence of at most {MAX_GROUPS} WeightGroups")
    checked = [_check_group(i, g) for i, g in enumerate(groups)]
    per_element = Fraction(unquantized_bytes).limit_denominator(1 << 10)
    scheme = read_quantization(quantization_config)
    plan = _plan(scheme, per_element)
    level = max((m.sensitivity for m in plan.matchers.values()), default=_NONE)
    budget = _Budget()

    by_role: dict[str, int] = {}
    quantized_elements = unquantized_elements = 0
    quantized_tensors = 0
    kept: dict[tuple[str, str], int] = {}  # (name, reason) → tensors, for Linears left unquantized
    other_tensors = 0
    for g in checked:
        elements_each = math.prod(g.shape)
        decisions = _decisions(g, plan, level, budget)
        if not g.linear:
            other_tensors += g.count
        role_bytes = 0
        for decision, count in decisions.items():
            if isinstance(decision, _Quant):
                role_bytes += count * plan.linear_bytes(decision.layout, g.shape[0], g.shape[1])
                quantized_elements += count * elements_each
                quantized_tensors += count
            else:
                role_bytes += _unquantized(count * elements_each, per_element)
                unquantized_elements += count * elements_each
                if g.linear:
                    kept[(g.name, decision.reason)] = kept.get((g.name, decision.reason), 0) + count
        by_role[g.role] = by_role.get(g.role, 0) + role_bytes

    notes = list(plan.notes)
    notes.extend(_kv_scale_bytes(scheme, checked, per_element, by_role))
    notes.append(f"Quantized: {quantized_tensors} Linear weight tensors ({quantized_elements} elements)")
    for (name, reason), count in sorted(kept.items())[:20]:
        notes.append(f"Left unquantized: {name} ×{count}: {reason}")
    if len(kept) > 20:
        notes.append(f"... and {len(kept) - 20} more unquantized Linear groups")
    if other_tensors:
        notes.append(
            f"{other_tensors} non-Linear tensors (embeddings, norms, biases, buffers) at "
            f"{float(per_element):g} bytes per element"
        )
    unused = {p.field: p.text for m in plan.matchers.values() for p in m.unused()}
    for field, text in list(unused.items())[:20]:
        notes.append(f"{field} ({text!r}) matched no weight group")
    return QuantizedWeights(
        method=plan.method,
        total_bytes=sum(by_role.values()),
        quantized_elements=quantized_elements,
        unquantized_elements=unquantized_elements,
        by_role=tuple(sorted(by_role.items())),
        assumptions=tuple(notes),
    )


def _kv_scale_bytes(
    scheme: QuantizationScheme, groups: Sequence[WeightGroup], per_element: Fraction, by_role: dict[str, int]
) -> list[str]:
    """k_scale and v_scale of each attention layer, when the config quantizes the KV cache."""
    layers = {x for g in groups if g.role == "attention" for x in g.layers}
    if isinstance(scheme, CompressedTensorsScheme) and scheme.kv_cache is not None and layers:
        each = _ct_scale_dtype_bytes(per_element)  # the attention module's dtype (initialize.py:258-277)
        by_role["attention"] = by_role.get("attention", 0) + 2 * each * len(layers)
        return [f"kv_cache_scheme: a k_scale and a v_scale of {each} bytes in each of {len(layers)} attention layers"]
    if isinstance(scheme, ModelOptScheme) and scheme.kv_cache_quant_algo and layers:
        by_role["attention"] = by_role.get("attention", 0) + 2 * FP32_BYTES * len(layers)
        return [
            f"kv_cache_quant_algo {scheme.kv_cache_quant_algo}: an fp32 k_scale and v_scale in each of "
            f"{len(layers)} attention layers"
        ]
    return []


# ---------------------------------------------------------------------------------------------------------
# A user-given checkpoint summary
# ---------------------------------------------------------------------------------------------------------

# safetensors v0.7.0 safetensors/src/tensor.rs:779-852 (Dtype and bitsize)
SAFETENSORS_DTYPE_BITS: dict[str, int] = {
    "BOOL": 8,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "C64": 64,
    "F64": 64,
    "I64": 64,
    "U64": 64,
}


@dataclass(frozen=True, slots=True)
class CheckpointSummary:
    total_bytes: int  # bytes of the tensors' data (headers and padding not included)
    by_dtype: tuple[tuple[str, int], ...]  # (safetensors dtype, bytes), sorted; empty for a bare total_size
    tensors: int  # tensors listed; 0 for a bare total_size
    source: Literal["total_size", "tensors"]


def checkpoint_bytes(summary: Mapping[str, Any]) -> CheckpointSummary:
    """Bytes of a checkpoint from its safetensors index total or its tensor headers."""
    field = "checkpoint"
    if not isinstance(summary, Mapping):
        raise QuantizationConfigError(f"{field} must be an object with total_size or tensors")
    has_total, has_tensors = "total_size" in summary, "tensors" in summary
    if has_total == has_tensors:
        raise QuantizationConfigError(f"{field} must give exactly one of total_size or tensors")
    if has_total:
        total = summary["total_size"]
        if isinstance(total, bool) or not isinstance(total, int) or not 0 <= total <= MAX_CHECKPOINT_BYTES:
            raise QuantizationConfigError(
                f"{field}.total_size must be an integer from 0 to {MAX_CHECKPOINT_BYTES}, got {total!r}"
            )
        return CheckpointSummary(total, (), 0, "total_size")
    tensors = summary["tensors"]
    if not isinstance(tensors, list | tuple):
        raise QuantizationConfigError(f"{field}.tensors must be a list of {{name, dtype, shape}} objects")
    if len(tensors) > MAX_TENSORS:
        raise QuantizationConfigError(f"{field}.tensors may hold at most {MAX_TENSORS} tensors, got {len(tensors)}")
    by_dtype: dict[str, int] = {}
    total = 0
    for i, t in enumerate(tensors):
        path = f"{field}.tensors[{i}]"
        if not isinstance(t, Mapping):
            raise QuantizationConfigError(f"{path} must be an object with name, dtype and shape")
        name = t.get("name")
        if not isinstance(name, str) or not name or len(name) > MAX_PATTERN_CHARS:
            raise QuantizationConfigError(
                f"{path}.name must be a non-empty string of at most {MAX_PATTERN_CHARS} characters"
            )
        dtype = t.get("dtype")
        if dtype not in SAFETENSORS_DTYPE_BITS:
            raise QuantizationConfigError(
                f"{path}.dtype must be one of {', '.join(SAFETENSORS_DTYPE_BITS)}, got {dtype!r}"
            )
        shape = t.get("shape")
        if not isinstance(shape, list | tuple) or len(shape) > 16:
            raise QuantizationConfigError(f"{path}.shape must be a list of at most 16 dimensions")
        for j, d in enumerate(shape):
            if isinstance(d, bool) or not isinstance(d, int) or not 0 <= d < 1 << 40:
                raise QuantizationConfigError(
                    f"{path}.shape[{j}] must be an integer from 0 to {(1 << 40) - 1}, got {d!r}"
                )
        bits = math.prod(shape) * SAFETENSORS_DTYPE_BITS[str(dtype)]
        if bits % 8:  # safetensors src/tensor.rs:616-621 (MisalignedSlice)
            raise QuantizationConfigError(f"{path}.shape gives {bits} bits of {dtype}, not a whole number of bytes")
        total += bits // 8
        if total > MAX_CHECKPOINT_BYTES:
            raise QuantizationConfigError(f"{field}.tensors add up to more than {MAX_CHECKPOINT_BYTES} bytes")
        by_dtype[str(dtype)] = by_dtype.get(str(dtype), 0) + bits // 8
    return CheckpointSummary(total, tuple(sorted(by_dtype.items())), len(tensors), "tensors")
