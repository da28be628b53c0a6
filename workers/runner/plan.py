"""What a job runs: the synthetic workload's command, or a registered program's argv filled in.

A registered program's template is a list of arguments; ``{name}`` placeholders inside an argument
are replaced by values derived from the validated workload. Nothing is ever passed through a
shell, and users never send a command: they choose a program that staff registered. Pure.
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
    "page_size": "SGLang workloads: inference.kv_block_tokens when the workload sets it, else auto (SGLang's 1)",
    "sglang_kv_cache_dtype": "SGLang workloads: precision.kv_cache for SGLang (auto, fp8_e4m3)",
}

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
        if inference.engine == "sglang":
            values.update(_sglang_values(workload))
    return {k: v for k, v in values.items() if k == "python" or _SAFE_VALUE.fullmatch(v)}


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
    """Fill a template, argument by argument (no shell); raises when the workload lacks a value."""
    missing = sorted(template_placeholders(template) - set(values))
    if missing:
        raise PlaceholderError(
            f"the workload gives no value for {', '.join('{' + m + '}' for m in missing)} "
            f"({'; '.join(f'{m}: {PLACEHOLDERS[m]}' for m in missing)})"
        )
    return [argument.format_map(values) for argument in template]


def synthetic_argv(spec_path: str) -> list[str]:
    """The built-in synthetic acceptance workload, run by this interpreter."""
    return [sys.executable, "-m", "workers.runner.synthetic", spec_path]
