"""The benchmark's in-process Django steps, each run in a subprocess with its database's environment.

    python -m benchmarks.load.django_side fixture   # the benchmark user, its token, an order and a job: JSON
    python -m benchmarks.load.django_side queries   # queries per catalog list request at two catalog sizes: JSON
    python -m benchmarks.load.django_side calibration  # what recommend's calibration costs the user: JSON

``fixture`` is idempotent: it reuses the user, token, order and job of an earlier run. The job is
started through ``measurements.services.acceptance_job_start`` on a GPU configuration that no node of
this benchmark serves, so it is recorded at once (``failed``, ``no_node``) and never runs. It also gives
the user ``MEASURED_ORDERS`` orders of the recommend workload, each with an uploaded measurement
(``measurements.services.measurement_record``, as ``POST /orders/{id}/measurements/`` stores one): the
recommendations the benchmark asks for are calibrated by them, as a customer's with a history would be.

``queries`` counts the SQL of one ``GET`` per catalog list (``?limit=500``, every row on one page) with
``CaptureQueriesContext``, on the catalog as loaded and again after copying every architecture,
accelerator and configuration and adding nodes (about twice the rows), inside a transaction that is
rolled back: nothing is left behind.
"""

from __future__ import annotations

import copy
import json
import os
import sys

import django

USERNAME = "loadbench"
OTHER_USERNAME = "loadbench-other"  # another account, whose requests the benchmark user's slow ones must not hold
LISTS = {
    "architectures": "/api/v1/architectures/?limit=500",
    "accelerators": "/api/v1/accelerators/?limit=500",
    "configurations": "/api/v1/configurations/?limit=500",
    "nodes": "/api/v1/nodes/?limit=500",
}

#: The smallest workload the synthetic program runs (one layer, 17,504 parameters): the jobs part's orders.
TINY_CPU_WORKLOAD = {
    "name": "loadbench-tiny-cpu",
    "task": "inference",
    "model": {
        "architecture": {
            "num_layers": 1,
            "hidden_size": 32,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "intermediate_size": 64,
            "vocab_size": 128,
        }
    },
    "precision": {"weights": "fp32"},
    "inference": {
        "max_input_tokens": 8,
        "max_output_tokens": 2,
        "concurrent_sessions": 1,
        "engine": "transformers",
        "kv_cache_layout": "dynamic",
    },
    "runtime": {"device": "cpu", "attention": "sdpa"},
}


#: The jobs part's staff program (``--program tiny``): a Python one-liner that writes 16 MiB (resident, so the
#: sampler's host view sees it), prints a line, holds it a quarter of a second (a few host samples at 50 ms)
#: and exits 0. No torch, no report line: the runner records what it measured (host RSS of the child's tree,
#: duration, exit status) and the framework views as null with their reason; the CPU node's decision reads
#: host RSS, so each order is decided by its job's measurement.
TINY_PROGRAM_SLUG = "loadbench-tiny"
TINY_PROGRAM_CODE = (
    "import time; held = b'x' * (16 << 20); "
    "print('loadbench-tiny: holding', len(held) >> 20, 'MiB', flush=True); time.sleep(0.25)"
)
TINY_PROGRAM = {
    "name": "Load benchmark: hold 16 MiB for 0.25 s",
    "description": "Registered by benchmarks.load for its jobs part; allowed on the CPU configuration its nodes match.",
    "argv_template": ["{python}", "-c", TINY_PROGRAM_CODE],
    "time_limit_seconds": 60,
    "enabled": True,
}


#: Measured orders of the benchmark user (the recommend endpoint reads every one it may see to calibrate).
MEASURED_ORDERS = 100


def upload_document(index: int, device_used_bytes: int) -> dict[str, object]:
    """A vramplan-measure document of a succeeded run that peaked at ``device_used_bytes`` per device."""
    return {
        "schema": "vramplan-measurement/1",
        "run_id": f"loadbench-{index:05d}",
        "outcome": "succeeded",
        "exit_code": 0,
        "signal": None,
        "duration_seconds": 30.0,
        "command": ["vllm", "serve"],
        "peaks": {
            "device_used_bytes": device_used_bytes,
            "framework_allocated_bytes": int(device_used_bytes * 0.85),
            "framework_reserved_bytes": int(device_used_bytes * 0.9),
            "host_rss_bytes": 6 * 2**30,
            "reasons": {},
        },
        "sampling": {"interval_s": 0.002, "device_samples": 15000, "max_gap_s": 0.004},
        "devices": [{"index": 0, "uuid": f"GPU-{index}", "name": "loadbench"}],
        "versions": {"python": "3.11.7"},
        "conditions": {"tool": "vramplan-measure"},
        "timing": {"ms_per_output_token": 25.0 + index % 7},
    }


def measured_orders(user) -> int:
    """Up to ``MEASURED_ORDERS`` orders of the recommend workload (sessions 1 to 24) on the catalog's first
    GPU configurations, each with one uploaded measurement at 90 % of its budget's peak; the count."""
    from benchmarks.recommend_speed import WORKLOAD
    from budgets.services import workload_create
    from catalog.choices import ConfigurationKind
    from catalog.models import Configuration
    from measurements import services
    from measurements.models import Measurement

    have = Measurement.objects.filter(order__owner=user).count()
    configurations = list(Configuration.objects.filter(kind=ConfigurationKind.GPU).order_by("slug")[:20])
    if not configurations:
        raise SystemExit("the catalog has no GPU configuration; run manage.py loadcatalog")
    for index in range(have, MEASURED_ORDERS):
        data = copy.deepcopy(WORKLOAD)
        data["name"] = f"loadbench-measured-{index}"
        data["inference"]["concurrent_sessions"] = 1 + index % 24
        workload = workload_create(owner=user, data=data)
        configuration = configurations[index % len(configurations)]
        order = services.order_create(owner=user, workload=workload, configuration=configuration)
        budget = order.budget or workload.budget
        peak = int(budget["per_device"]["total"]["bytes"] * 0.9)
        services.measurement_record(order, upload_document(index, peak), source="upload")
    return Measurement.objects.filter(order__owner=user).count()


def setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.load.settings")
    django.setup()


def benchmark_user(username: str = USERNAME):
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    user, _ = get_user_model().objects.get_or_create(username=username)
    token, _ = Token.objects.get_or_create(user=user)
    return user, token.key


def tiny_program(configuration):
    """Register (or bring up to date) the tiny staff program and allow it on ``configuration``: what staff do
    in the admin or with ``POST /api/v1/programs/``, here in the benchmark's own database."""
    from measurements.models import RegisteredProgram
    from measurements.services import program_validate_template

    program_validate_template(TINY_PROGRAM["argv_template"])
    program, _ = RegisteredProgram.objects.update_or_create(slug=TINY_PROGRAM_SLUG, defaults=TINY_PROGRAM)
    program.allowed_configurations.add(configuration)
    return program


def fixture() -> dict[str, object]:
    from budgets.services import workload_create
    from catalog.choices import ConfigurationKind
    from catalog.models import Configuration
    from measurements import services
    from measurements.models import AcceptanceJob

    user, token = benchmark_user()
    job = AcceptanceJob.objects.filter(order__owner=user).order_by("id").first()
    if job is None:
        # A GPU configuration: this benchmark's nodes are host-probe (CPU) nodes, so none serves it.
        candidates = Configuration.objects.filter(kind=ConfigurationKind.GPU, nodes__isnull=True).order_by("slug")
        configuration = candidates.first()
        if configuration is None:
            raise SystemExit("the catalog has no GPU configuration without a node; run manage.py loadcatalog")
        workload = workload_create(owner=user, data=TINY_CPU_WORKLOAD)
        order = services.order_create(owner=user, workload=workload, configuration=configuration)
        job = services.acceptance_job_start(order)
    measured = measured_orders(user)
    _, other_token = benchmark_user(OTHER_USERNAME)
    return {"username": user.username, "token": token, "job_id": job.pk, "job_status": job.status,
            "measurements": measured, "other_token": other_token}  # fmt: skip


def _double_catalog() -> None:
    """Copy every architecture, accelerator and configuration (new slugs and names) and add a node per
    configuration kind; the copies point at the copies, so every relation the lists read is there."""
    from catalog.models import Accelerator, Architecture, Configuration, Node

    def copy(row, **changes):
        row.pk = row.id = None
        row._state.adding = True
        for field, value in changes.items():
            setattr(row, field, value)
        row.save()
        return row

    architectures = {}
    for architecture in Architecture.objects.prefetch_related("precisions"):
        precisions = list(architecture.precisions.all())
        old = architecture.pk
        architectures[old] = copy(architecture, slug=f"{architecture.slug}-qc", name=f"{architecture.name} qc")
        architectures[old].precisions.set(precisions)
    accelerators = {}
    for accelerator in Accelerator.objects.all():
        old = accelerator.pk
        accelerators[old] = copy(accelerator, slug=f"{accelerator.slug}-qc", name=f"{accelerator.name} qc",
                                 architecture=architectures[accelerator.architecture_id])  # fmt: skip
    configurations = []
    for configuration in Configuration.objects.all():
        copied = accelerators.get(configuration.accelerator_id)
        configurations.append(
            copy(configuration, slug=f"{configuration.slug}-qc", name=f"{configuration.name} qc", accelerator=copied)
        )
    for index, configuration in enumerate(configurations[:20]):
        Node.objects.create(name=f"loadbench-qc-{index}", configuration=configuration, device_count=1)


def queries() -> dict[str, object]:
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext
    from rest_framework.test import APIClient

    from catalog.models import Accelerator, Architecture, Configuration, Node

    _, token = benchmark_user()
    client = APIClient(HTTP_HOST="127.0.0.1")
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")

    def measure() -> dict[str, dict[str, int]]:
        rows = {
            "architectures": Architecture.objects.count(),
            "accelerators": Accelerator.objects.count(),
            "configurations": Configuration.objects.count(),
            "nodes": Node.objects.count(),
        }
        result = {}
        for name, url in LISTS.items():
            client.get(url)  # warm: content types, the token, the throttle's cache
            with CaptureQueriesContext(connection) as captured:
                response = client.get(url)
            if response.status_code != 200:
                raise SystemExit(f"GET {url} answered {response.status_code}: {response.content[:300]!r}")
            result[name] = {"rows": rows[name], "returned": len(response.json()["results"]),
                            "queries": len(captured.captured_queries)}  # fmt: skip
        return result

    with transaction.atomic():
        # One node at least: an empty list is answered without its page query, which is not a fair "small".
        Node.objects.create(name="loadbench-qc-base", device_count=1)
        small = measure()
        _double_catalog()
        large = measure()
        transaction.set_rollback(True)
    return {
        name: {"small": small[name], "large": large[name], "constant": small[name]["queries"] == large[name]["queries"]}
        for name in LISTS
    }


def calibration() -> dict[str, object]:
    """Median milliseconds, in this process, of what a recommend request spends on calibration for the
    benchmark user: the records built from every measurement it may see, against the check that finds
    them kept (one query); the calibration built from them, against found kept; and the pure ranking of the
    full catalog with it (top 10), with the garbage collections it causes at Python's young-generation
    threshold (700) and at the web process's (``WEB_GC_GEN0_THRESHOLD``)."""
    import gc
    import statistics
    import time

    from benchmarks.recommend_speed import WORKLOAD
    from budgets.services import workload_validate
    from measurements.services import workload_summary
    from recommendations import services
    from recommendations.recommend import Calibration, recommend

    user, _ = benchmark_user()
    spec = workload_validate(WORKLOAD)
    views = services.catalog_views()
    summary = workload_summary(spec.model_dump(mode="json", exclude_none=False))
    visible = services._visible_measurements(user)

    def median_ms(call, repeat: int = 20) -> float:
        call()
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            call()
            times.append((time.perf_counter() - start) * 1000)
        return round(statistics.median(times), 2)

    records = services.acceptance_records(views, user)
    kept = services.calibration_for(spec, views, user)

    def collections_per_ranking(gen0_threshold: int, repeat: int = 50) -> list[float]:
        """Garbage collections (young, middle, full) per ranking at this young-generation threshold."""
        counts = [0, 0, 0]

        def count(phase: str, info: dict[str, int]) -> None:
            if phase == "start":
                counts[info["generation"]] += 1

        before = gc.get_threshold()
        gc.set_threshold(gen0_threshold, before[1], before[2])
        gc.callbacks.append(count)
        try:
            for _ in range(repeat):
                recommend(spec, list(views), kept, 10)
        finally:
            gc.callbacks.remove(count)
            gc.set_threshold(*before)
        return [round(n / repeat, 3) for n in counts]

    from django.conf import settings

    tuned = settings.WEB_GC_GEN0_THRESHOLD or 700
    return {
        "measurements": visible.count(),
        "records": len(records),
        "records_built_ms": median_ms(lambda: services._build_records(tuple(views), visible), repeat=5),
        "records_kept_ms": median_ms(lambda: services.acceptance_records(views, user)),
        "calibration_built_ms": median_ms(lambda: Calibration.build(records, summary)),
        "calibration_kept_ms": median_ms(lambda: services.calibration_for(spec, views, user)),
        "recommend_top10_ms": median_ms(lambda: recommend(spec, list(views), kept, 10)),
        "gc_collections_per_ranking": {"700": collections_per_ranking(700), str(tuned): collections_per_ranking(tuned)},
    }


STEPS = {"fixture": fixture, "queries": queries, "calibration": calibration}


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in STEPS:
        print(__doc__, file=sys.stderr)
        return 2
    setup()
    result = STEPS[argv[0]]()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
