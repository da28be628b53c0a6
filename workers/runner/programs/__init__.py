"""Acceptance programs staff can register: commands that run one engine under the parent's memory sampler.

A program is an ordinary command (``python -m workers.runner.programs.<name> …``). The parent
(``workers.runner.execute``) samples NVML device memory around it; the program only runs the engine,
drives it, and reports through ``workers.runner.report`` (progress, checkpoints, a result message) and
the JSON file named by ``VRAMPLAN_QUALITY_PATH``. Staff register a program as an argv template whose
``{placeholders}`` (``workers.runner.plan.PLACEHOLDERS``) are filled from the validated workload and, for the
engine's settings, from the recommended launch for the ordered configuration (``workers.runner.plan.launch_values``):
the shipped templates carry a placeholder for every flag of that launch, so the job runs the recommended command.
Flags a program has no option of its own for go to the engine through ``--extra-arg``, one argument each with its
value (``--extra-arg=--block-size={block_size}``), which also lets an optional placeholder leave the flag out.

Pure: standard library only (no Django, no Celery, no engine import in this process).
"""

from __future__ import annotations

#: A template staff can register for ``vllm_serve``: every value comes from the workload or the recommended launch,
#: none from a user: every flag of ``recommendations.launch.vllm_launch``'s command.
#: Add ``--python /path/to/venv/bin/python`` when vLLM lives in another environment, and
#: ``--extra-arg=--enforce-eager`` (one flag per ``--extra-arg``) for engine flags of the node's own choosing.
VLLM_SERVE_TEMPLATE: tuple[str, ...] = (
    "{python}", "-m", "workers.runner.programs.vllm_serve",
    "--model", "{model}",
    "--max-model-len", "{max_model_len}",
    "--max-num-seqs", "{max_num_seqs}",
    "--tensor-parallel-size", "{tensor_parallel_size}",
    "--pipeline-parallel-size", "{pipeline_parallel_size}",
    "--gpu-memory-utilization", "{gpu_memory_utilization}",
    "--dtype", "{dtype}",
    "--kv-cache-dtype", "{kv_cache_dtype}",
    "--extra-arg=--data-parallel-size={data_parallel_size}",
    "--extra-arg=--max-num-batched-tokens={max_num_batched_tokens}",
    "--extra-arg=--block-size={block_size}",
    "--extra-arg=--quantization={quantization}",
    "--max-input-tokens", "{max_input_tokens}",
    "--max-output-tokens", "{max_output_tokens}",
    "--concurrency", "{concurrency}",
)  # fmt: skip

#: A template staff can register for ``sglang_serve``, for workloads whose engine is SGLang: the settings the SGLang
#: budget (``budgets/engine/sglang.py``) is computed with, as the recommended launch
#: (``recommendations.launch.sglang_launch``) passes them, else "auto" where the workload leaves SGLang's default. The
#: SGLang-only placeholders have no value for another engine's workload, so the job is refused rather than run
#: at settings the budget never saw. ``--python`` and ``--extra-arg`` as for vLLM.
SGLANG_SERVE_TEMPLATE: tuple[str, ...] = (
    "{python}", "-m", "workers.runner.programs.sglang_serve",
    "--model-path", "{model}",
    "--context-length", "{max_model_len}",
    "--tp-size", "{tensor_parallel_size}",
    "--pp-size", "{pipeline_parallel_size}",
    "--mem-fraction-static", "{mem_fraction_static}",
    "--max-running-requests", "{max_running_requests}",
    "--chunked-prefill-size", "{chunked_prefill_size}",
    "--cuda-graph-max-bs", "{cuda_graph_max_bs}",
    "--page-size", "{page_size}",
    "--dtype", "{dtype}",
    "--kv-cache-dtype", "{sglang_kv_cache_dtype}",
    "--extra-arg=--dp-size={data_parallel_size}",
    "--extra-arg=--quantization={quantization}",
    "--max-input-tokens", "{max_input_tokens}",
    "--max-output-tokens", "{max_output_tokens}",
    "--concurrency", "{concurrency}",
)  # fmt: skip

PROGRAMS: dict[str, str] = {
    "vllm_serve": "workers.runner.programs.vllm_serve",
    "sglang_serve": "workers.runner.programs.sglang_serve",
}
