"""Ship the vLLM acceptance program (workers/runner/programs/vllm_serve.py) as a registered program.

It starts allowed on no configuration: staff choose where vLLM is installed (admin or API).
"""

from django.db import migrations

VLLM_ARGV = [
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


def create(apps, schema_editor):  # type: ignore[no-untyped-def]
    RegisteredProgram = apps.get_model("measurements", "RegisteredProgram")
    RegisteredProgram.objects.get_or_create(
        slug="vllm-serve",
        defaults={
            "name": "vLLM OpenAI server at the workload's settings",
            "description": (
                "Starts vLLM with the workload's model, max_model_len, max_num_seqs, tensor parallel size, "
                "gpu_memory_utilization, dtype and KV dtype; drives the asked concurrency at the longest request; "
                "parses vLLM's startup memory report into the measurement beside NVML's view. Needs vllm installed "
                "for the worker's Python on the node and the model's weights in its Hugging Face cache."
            ),
            "argv_template": VLLM_ARGV,
            "time_limit_seconds": 3600,
        },
    )


def remove(apps, schema_editor):  # type: ignore[no-untyped-def]
    apps.get_model("measurements", "RegisteredProgram").objects.filter(slug="vllm-serve").delete()


class Migration(migrations.Migration):
    dependencies = [("measurements", "0001_initial")]
    operations = [migrations.RunPython(create, remove)]
