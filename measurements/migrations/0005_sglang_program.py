"""Ship the SGLang acceptance program (workers/runner/programs/sglang_serve.py) as a registered program.

It starts allowed on no configuration: staff choose where SGLang is installed (admin or API).
"""

from django.db import migrations

from workers.runner.programs import SGLANG_SERVE_TEMPLATE

SGLANG_ARGV = list(SGLANG_SERVE_TEMPLATE)  # one template: workers/runner/programs/__init__.py


def create(apps, schema_editor):
    RegisteredProgram = apps.get_model("measurements", "RegisteredProgram")
    RegisteredProgram.objects.get_or_create(
        slug="sglang-serve",
        defaults={
            "name": "SGLang server at the workload's settings",
            "description": (
                "Starts SGLang (sglang.launch_server) with the workload's model, context length, tensor and pipeline "
                "degree, mem_fraction_static, max_running_requests, chunked prefill size, CUDA-graph batch, page "
                "size, dtype and KV dtype (SGLang's own defaults where the workload sets none); drives the asked "
                "concurrency at the longest request through /v1/completions; parses SGLang's start-up memory lines "
                "(weights, KV pool, CUDA graphs, free memory after each) into the measurement beside NVML's view. "
                "For SGLang workloads only. Needs sglang installed for the worker's Python on the node (or "
                "--python) and the model's weights in its Hugging Face cache."
            ),
            "argv_template": SGLANG_ARGV,
            "time_limit_seconds": 3600,
        },
    )


def remove(apps, schema_editor):
    apps.get_model("measurements", "RegisteredProgram").objects.filter(slug="sglang-serve").delete()


class Migration(migrations.Migration):
    dependencies = [("measurements", "0004_order_recommended_verdict")]
    operations = [migrations.RunPython(create, remove)]
