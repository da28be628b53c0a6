"""What a job runs: the synthetic workload's command, or a registered program's argv filled in.

A registered program's template is a list of arguments; ``{name}`` placeholders inside an argument
are replaced by values derived from the validated workload. Nothing is ever passed through a
shell, and users never send a command: they choose a program that staff registered. Pure.

A job whose program takes the engine's settings runs the recommended launch for the ordered configuration: the
placeholders that launch sets (``LAUNCH_FLAGS``: parallel sizes, context length, sequence and token budgets, memory
fraction, CUDA-graph batch, block or page size, dtypes, quantization) are filled from its command
(``launch_values``, recorded on the job when it starts; ``with_launch`` lays them over the workload's), so the
measured run is the recommended run, flag by flag. An argument that uses an optional placeholder
(``OPTIONAL_PLACEHOLDERS``) is left out when there is no value for it: the engine keeps its own default.
"""

from __future__ import annotations

import re
import string
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from budgets.engine import Workload
from budgets.engine.dtypes import framework_dtype

#: Every placeholder a template may use, and what it stands for.
PLACEHOLDERS: dict[str, str] = {
    "python": "the interpreter running the worker (sys.executable)",
    "model": "the model's Hugging Face repository (preset hf_repo or hf_config _name_or_path), else the preset id",
    "max_model_len": "inference.max_model_len (default max_input_tokens + max_output_tokens)",
    "max_input_tokens": "the longest prompt",
    "max_output_tokens": "the longest output",
    "max_num_seqs": "inference.max_num_seqs, else concurrent_sessions",
    "concurrency": "concurrent_sessions",
    "tensor_parallel_size": "parallelism.tensor",
    "pipeline_parallel_size": "parallelism.pipeline",
    "gpu_memory_utilization": "inference.gpu_memory_utilization",
    "dtype": "precision.compute as a framework dtype (float32, bfloat16, float16)",
    "kv_cache_dtype": "precision.kv_cache for vLLM (auto, fp8)",
    "device_count": "devices in the configuration",
    # SGLang workloads only (inference.engine "sglang"): the settings budgets/engine/sglang.py budgets with, "auto"
    # where the workload leaves SGLang its own default (the program then passes no flag)
    "mem_fraction_static": "SGLang workloads: inference.gpu_memory_utilization, else auto (SGLang's default)",
    "max_running_requests": "SGLang workloads: inference.max_num_seqs, else auto (SGLang's default)",
    "chunked_prefill_size": "SGLang workloads: inference.max_num_batched_tokens, else auto (SGLang's default)",
    "cuda_graph_max_bs": "SGLang workloads: inference.cuda_graph_max_bs, else auto (SGLang's default)",
    "page_size": "SGLang workloads: inference.kv_block_tokens (SGLang's 1 when the workload names none)",
    "sglang_kv_cache_dtype": "SGLang workloads: precision.kv_cache for SGLang (auto, fp8_e4m3)",
    # optional (OPTIONAL_PLACEHOLDERS): write each in one argument with its flag, --extra-arg=--block-size={block_size}
    "data_parallel_size": "optional: the recommended plan's replicas (vLLM --data-parallel-size, SGLang --dp-size),"
    " else parallelism.data above 1",
    "max_num_batched_tokens": "optional: vLLM's --max-num-batched-tokens, the recommended launch's, else"
    " inference.max_num_batched_tokens",
    "block_size": "optional: vLLM's --block-size, inference.kv_block_tokens",
    "quantization": "optional: --quantization fp8 for FP8 weights (precision.weights fp8)",
}

#: Placeholders a workload or launch may leave without a value: an argument that uses one is then left out, and the
#: engine keeps its own default. Each goes in one argument with its flag (``--extra-arg=--block-size={block_size}``),
#: so that leaving it out leaves no flag without its value.
OPTIONAL_PLACEHOLDERS = frozenset({"data_parallel_size", "max_num_batched_tokens", "block_size", "quantization"})

#: The flags a recommended launch (``recommendations.launch``) sets, by engine, and the placeholder each fills. vLLM
#: takes the model as its positional argument, read here as ``--model``.
LAUNCH_FLAGS: dict[str, dict[str, str]] = {
    "vllm": {
        "--model": "model",
        "--tensor-parallel-size": "tensor_parallel_size",
        "--pipeline-parallel-size": "pipeline_parallel_size",
        "--data-parallel-size": "data_parallel_size",
        "--max-model-len": "max_model_len",
        "--max-num-seqs": "max_num_seqs",
        "--max-num-batched-tokens": "max_num_batched_tokens",
        "--gpu-memory-utilization": "gpu_memory_utilization",
        "--dtype": "dtype",
        "--block-size": "block_size",
        "--kv-cache-dtype": "kv_cache_dtype",
        "--quantization": "quantization",
    },
    "sglang": {
        "--model-path": "model",
        "--tp-size": "tensor_parallel_size",
        "--pp-size": "pipeline_parallel_size",
        "--dp-size": "data_parallel_size",
        "--context-length": "max_model_len",
        "--mem-fraction-static": "mem_fraction_static",
        "--max-running-requests": "max_running_requests",
        "--chunked-prefill-size": "chunked_prefill_size",
        "--cuda-graph-max-bs": "cuda_graph_max_bs",
        "--page-size": "page_size",
        "--dtype": "dtype",
        "--kv-cache-dtype": "sglang_kv_cache_dtype",
        "--quantization": "quantization",
    },
}
#: A placeholder's value when the launch leaves its flag out (the engine's default then): None leaves it without a
#: value (an optional placeholder: the argument is left out). A flag not named here and left out keeps the
#: workload's value.
LAUNCH_ABSENT: dict[str, dict[str, str | None]] = {
    "vllm": {"kv_cache_dtype": "auto", "quantization": None},
    "sglang": {"pipeline_parallel_size": "1", "data_parallel_size": None, "quantization": None},
}
#: The placeholders a launch fills: a program whose template uses one runs the recommended launch.
LAUNCH_PLACEHOLDERS = frozenset(name for flags in LAUNCH_FLAGS.values() for name in flags.values())

#: Matched with ``fullmatch``, never ``match`` + ``$``: ``$`` also matches before a final newline ("org/model\n").
_SAFE_VALUE = re.compile(r"[A-Za-z0-9_.:@+][A-Za-z0-9_./:@+-]{0,255}")  # never an option: no leading "-"


class PlaceholderError(ValueError):
    """A template that uses an unknown placeholder, or a value this workload cannot give."""


def template_placeholders(template: Sequence[str]) -> set[str]:
    """The placeholder names a template uses; raises for unknown names and malformed braces."""
    names: set[str] = set()
    for argument in template:
        try:
            parsed = list(string.Formatter().parse(argument))
        except ValueError as exc:
            raise PlaceholderError(f"argument {argument!r}: {exc} (write a literal brace as {{{{ or }}}})") from None
        for _, name, spec, conversion in parsed:
            if name is None:
                continue
            if name not in PLACEHOLDERS or spec or conversion:
                raise PlaceholderError(
                    f"argument {argument!r} uses {{{name}}}; allowed placeholders: {', '.join(sorted(PLACEHOLDERS))}"
                )
            names.add(name)
    return names


def placeholder_values(description: Mapping[str, Any], device_count: int) -> dict[str, str]:
    """Placeholder values for a stored (already validated) workload description."""
    workload = Workload.model_validate(description)
    values = {"python": sys.executable, "device_count": str(device_count)}
    values["tensor_parallel_size"] = str(workload.parallelism.tensor)
    values["pipeline_parallel_size"] = str(workload.parallelism.pipeline)
    values["dtype"] = framework_dtype(workload.precision.compute)
    values["kv_cache_dtype"] = "fp8" if workload.precision.kv_cache == "fp8" else "auto"
    model = workload.model
    if model is not None:
        repo = model.hf_repo() or model.preset  # a preset without a repository: its id
        if repo:
            values["model"] = repo
    if workload.inference is not None:
        inference = workload.inference
        values["max_input_tokens"] = str(inference.max_input_tokens)
        values["max_output_tokens"] = str(inference.max_output_tokens)
        values["max_model_len"] = str(inference.max_model_len or inference.max_request_tokens)
        values["concurrency"] = str(inference.concurrent_sessions)
        # vLLM's max_num_seqs as the workload sets it; else the sessions it must hold at once
        values["max_num_seqs"] = str(inference.max_num_seqs or inference.concurrent_sessions)
        if inference.gpu_memory_utilization is not None:  # SGLang's default is resolved on the device, not here
            values["gpu_memory_utilization"] = f"{inference.gpu_memory_utilization:g}"
        values.update(_optional_values(workload))
        if inference.engine == "sglang":
            values.update(_sglang_values(workload))
    return {k: v for k, v in values.items() if k == "python" or _SAFE_VALUE.fullmatch(v)}


def _optional_values(workload: Workload) -> dict[str, str]:
    """The optional placeholders a workload sets (``OPTIONAL_PLACEHOLDERS``); the rest stay without a value."""
    inference = workload.inference
    assert inference is not None
    values = {}
    if workload.parallelism.data > 1:
        values["data_parallel_size"] = str(workload.parallelism.data)
    if inference.max_num_batched_tokens is not None:
        values["max_num_batched_tokens"] = str(inference.max_num_batched_tokens)
    if inference.kv_block_tokens is not None:
        values["block_size"] = str(inference.kv_block_tokens)
    if workload.precision.weights == "fp8":
        values["quantization"] = "fp8"
    return values


def _sglang_values(workload: Workload) -> dict[str, str]:
    """SGLang's settings as ``budgets.engine.inference.sglang_stage`` reads them from the workload; "auto" where
    it leaves SGLang's default (mem_fraction_static by GPU memory, max_running_requests from the pool, …)."""
    inference = workload.inference
    assert inference is not None

    def given(value: float | int | None) -> str:
        return "auto" if value is None else f"{value:g}" if isinstance(value, float) else str(value)

    page = inference.block_tokens
    return {
        "mem_fraction_static": given(inference.gpu_memory_utilization),
        "max_running_requests": given(inference.max_num_seqs),
        "chunked_prefill_size": given(inference.max_num_batched_tokens),
        "cuda_graph_max_bs": given(inference.cuda_graph_max_bs),
        "page_size": given(page),
        # SGLang has no plain "fp8" (server_args.py:3857-3861); e4m3, the fp8 format its own advice names
        # (server_args.py:1426), keeps the 1 byte per element the budget counts
        "sglang_kv_cache_dtype": "fp8_e4m3" if workload.precision.kv_cache == "fp8" else "auto",
    }


def program_argv(template: Sequence[str], values: Mapping[str, str]) -> list[str]:
    """Fill a template, argument by argument (no shell); raises when the workload lacks a value. An argument that
    uses an optional placeholder without a value is left out (``OPTIONAL_PLACEHOLDERS``)."""
    missing = sorted(template_placeholders(template) - set(values) - OPTIONAL_PLACEHOLDERS)
    if missing:
        raise PlaceholderError(
            f"the workload gives no value for {', '.join('{' + m + '}' for m in missing)} "
            f"({'; '.join(f'{m}: {PLACEHOLDERS[m]}' for m in missing)})"
        )
    return [argument.format_map(values) for argument in template if template_placeholders([argument]) <= set(values)]


def launch_values(engine: str, argv: Sequence[str]) -> dict[str, str | None]:
    """The placeholder values a recommended launch's command sets (``LAUNCH_FLAGS``), and those of the flags it leaves
    out (``LAUNCH_ABSENT``; None: no value). Raises for an engine without a table, a flag no placeholder carries, a
    flag without its value, or a value that is not a safe argument."""
    table = LAUNCH_FLAGS.get(engine)
    if table is None:
        raise PlaceholderError(f"no placeholders carry a {engine} launch's flags")
    first = next((i for i, argument in enumerate(argv) if argument.startswith("--")), len(argv))
    pairs = list(argv[first:])
    if len(pairs) % 2:
        raise PlaceholderError(f"the {engine} launch ends with a flag without its value: {pairs[-1]}")
    flags = dict(zip(pairs[::2], pairs[1::2], strict=True))
    if "--model" in table and first > 0:  # vLLM: the positional model before the flags
        flags.setdefault("--model", argv[first - 1])
    unknown = sorted(set(flags) - set(table))
    if unknown:
        raise PlaceholderError(f"the {engine} launch sets {', '.join(unknown)}, which no placeholder carries")
    unsafe = sorted(flag for flag, value in flags.items() if not _SAFE_VALUE.fullmatch(value))
    if unsafe:
        raise PlaceholderError(f"the {engine} launch's {', '.join(unsafe)} is not a safe argument")
    values: dict[str, str | None] = dict(LAUNCH_ABSENT.get(engine, {}))
    values.update({table[flag]: value for flag, value in flags.items()})
    return values


def with_launch(values: Mapping[str, str], launch: Mapping[str, str | None]) -> dict[str, str]:
    """``values`` (the workload's) with a launch's (``launch_values``, as a job recorded them) laid over them: a
    launch's None removes the workload's value."""
    merged = dict(values)
    for name, value in launch.items():
        if value is None:
            merged.pop(name, None)
        elif name in PLACEHOLDERS and name != "python" and _SAFE_VALUE.fullmatch(value):
            merged[name] = value
    return merged


def synthetic_argv(spec_path: str) -> list[str]:
    """The built-in synthetic acceptance workload, run by this interpreter."""
    return builtin_argv({}, spec_path)[0]


def builtin_argv(workload: dict[str, Any], spec_path: str) -> tuple[list[str], str]:
    """What a job that names no program runs, by this interpreter, and its name: a custom workload's replay of its
    declared components (``workers.runner.replay``), any other workload's synthetic model."""
    module = "replay" if workload.get("task") == "custom" else "synthetic"
    return [sys.executable, "-m", f"workers.runner.{module}", spec_path], module
