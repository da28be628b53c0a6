"""The recommended launch a job runs (``AcceptanceJob.launch``), and the shipped serving programs' templates with a
placeholder for every flag of that launch (issue 17: the measured run is the recommended run).

A shipped program whose template (or description) is still the one migrations 0002 and 0005 registered gets the new
one; a template staff changed is left as it is. Both templates are written out here, as they were and as they are,
so that this migration does the same whatever ``workers.runner.programs`` holds later.
"""

from django.db import migrations, models

VLLM_BEFORE = [
    "{python}", "-m", "workers.runner.programs.vllm_serve",
    "--model", "{model}",
    "--max-model-len", "{max_model_len}",
    "--max-num-seqs", "{max_num_seqs}",
    "--tensor-parallel-size", "{tensor_parallel_size}",
    "--gpu-memory-utilization", "{gpu_memory_utilization}",
    "--dtype", "{dtype}",
    "--kv-cache-dtype", "{kv_cache_dtype}",
    "--max-input-tokens", "{max_input_tokens}",
    "--max-output-tokens", "{max_output_tokens}",
    "--concurrency", "{concurrency}",
]  # fmt: skip
VLLM_AFTER = [
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
]  # fmt: skip
SGLANG_BEFORE = [
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
    "--max-input-tokens", "{max_input_tokens}",
    "--max-output-tokens", "{max_output_tokens}",
    "--concurrency", "{concurrency}",
]  # fmt: skip
SGLANG_AFTER = [*SGLANG_BEFORE[:25], "--extra-arg=--dp-size={data_parallel_size}",
                "--extra-arg=--quantization={quantization}", *SGLANG_BEFORE[25:]]  # fmt: skip

VLLM_DESCRIPTION_BEFORE = (
    "Starts vLLM with the workload's model, max_model_len, max_num_seqs, tensor parallel size, "
    "gpu_memory_utilization, dtype and KV dtype; drives the asked concurrency at the longest request; "
    "parses vLLM's startup memory report into the measurement beside NVML's view. Needs vllm installed "
    "for the worker's Python on the node and the model's weights in its Hugging Face cache."
)
VLLM_DESCRIPTION_AFTER = (
    "Starts vLLM as the recommendation for the ordered configuration launches it (its launch command: tensor, "
    "pipeline and data parallel sizes, max_model_len, max_num_seqs, max_num_batched_tokens, gpu_memory_utilization, "
    "dtype, block size, KV dtype, quantization; the workload's own settings where the recommender gives no launch); "
    "drives the asked concurrency at the longest request; parses vLLM's startup memory report into the measurement "
    "beside NVML's view. Needs vllm installed for the worker's Python on the node and the model's weights in its "
    "Hugging Face cache."
)
SGLANG_DESCRIPTION_BEFORE = (
    "Starts SGLang (sglang.launch_server) with the workload's model, context length, tensor and pipeline "
    "degree, mem_fraction_static, max_running_requests, chunked prefill size, CUDA-graph batch, page "
    "size, dtype and KV dtype (SGLang's own defaults where the workload sets none); drives the asked "
    "concurrency at the longest request through /v1/completions; parses SGLang's start-up memory lines "
    "(weights, KV pool, CUDA graphs, free memory after each) into the measurement beside NVML's view. "
    "For SGLang workloads only. Needs sglang installed for the worker's Python on the node (or "
    "--python) and the model's weights in its Hugging Face cache."
)
SGLANG_DESCRIPTION_AFTER = (
    "Starts SGLang (sglang.launch_server) as the recommendation for the ordered configuration launches it (its "
    "launch command: tensor, pipeline and data parallel sizes, context length, mem_fraction_static, "
    "max_running_requests, chunked prefill size, CUDA-graph batch, page size, dtype, KV dtype, quantization; the "
    "workload's settings, SGLang's own defaults where it sets none, where the recommender gives no launch); drives "
    "the asked concurrency at the longest request through /v1/completions; parses SGLang's start-up memory lines "
    "(weights, KV pool, CUDA graphs, free memory after each) into the measurement beside NVML's view. For SGLang "
    "workloads only. Needs sglang installed for the worker's Python on the node (or --python) and the model's "
    "weights in its Hugging Face cache."
)

#: slug → (template before, after, description before, after)
SHIPPED = {
    "vllm-serve": (VLLM_BEFORE, VLLM_AFTER, VLLM_DESCRIPTION_BEFORE, VLLM_DESCRIPTION_AFTER),
    "sglang-serve": (SGLANG_BEFORE, SGLANG_AFTER, SGLANG_DESCRIPTION_BEFORE, SGLANG_DESCRIPTION_AFTER),
}


def _rewrite(apps, index_from: int, index_to: int) -> None:
    """Each shipped program's template and description from one version to the other, where still the shipped one."""
    RegisteredProgram = apps.get_model("measurements", "RegisteredProgram")
    for slug, versions in SHIPPED.items():
        program = RegisteredProgram.objects.filter(slug=slug).first()
        if program is None:
            continue
        changed = []
        if program.argv_template == versions[index_from]:
            program.argv_template = list(versions[index_to])
            changed.append("argv_template")
        if program.description == versions[index_from + 2]:
            program.description = versions[index_to + 2]
            changed.append("description")
        if changed:
            program.save(update_fields=changed)


def forward(apps, schema_editor):
    _rewrite(apps, 0, 1)


def backward(apps, schema_editor):
    _rewrite(apps, 1, 0)


class Migration(migrations.Migration):
    dependencies = [("measurements", "0005_sglang_program")]
    operations = [
        migrations.AddField(
            model_name="acceptancejob",
            name="launch",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="The recommended launch its program runs, as recorded when it started: the recommender's "
                "entry for the order's configuration (verdict, plan, launch command), the placeholder values filled "
                "from it and the budget of that plan; empty for the synthetic run or a program that takes no engine "
                "setting.",
            ),
        ),
        migrations.RunPython(forward, backward),
    ]
