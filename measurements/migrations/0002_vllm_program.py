"""Ship the vLLM acceptance program (workers/runner/programs/vllm_serve.py) as a registered program.

It starts allowed on no configuration: staff choose where vLLM is installed (admin or API).
"""

from django.db import migrations

from workers.runner.programs import VLLM_SERVE_TEMPLATE

VLLM_ARGV = list(VLLM_SERVE_TEMPLATE)  # one template: workers/runner/programs/__init__.py


def create(apps, schema_editor):
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


def remove(apps, schema_editor):
    apps.get_model("measurements", "RegisteredProgram").objects.filter(slug="vllm-serve").delete()


class Migration(migrations.Migration):
    dependencies = [("measurements", "0001_initial")]
    operations = [migrations.RunPython(create, remove)]
