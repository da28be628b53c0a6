"""Shared data for order and acceptance tests: a tiny CPU workload, a CPU configuration, a document."""

from __future__ import annotations

import uuid
from typing import Any

from catalog.choices import ConfigurationKind
from catalog.models import Configuration

TINY_CPU_WORKLOAD: dict[str, Any] = {
    "name": "tiny-cpu-generate",
    "task": "inference",
    "model": {
        "architecture": {
            "num_layers": 2,
            "hidden_size": 64,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "intermediate_size": 128,
            "vocab_size": 256,
        }
    },
    "precision": {"weights": "fp32"},
    "inference": {
        "max_input_tokens": 32,
        "max_output_tokens": 8,
        "concurrent_sessions": 2,
        "engine": "transformers",
        "kv_cache_layout": "dynamic",
    },
    "runtime": {"device": "cpu", "attention": "sdpa"},
    "acceptance": {"min_headroom_fraction": 0.10},
}


def cpu_configuration() -> Configuration:
    """The one CPU-only configuration a host-probe node on this machine matches: this machine's architecture, vCPUs
    and RAM (``workers.services.host_configuration_match``)."""
    from workers.probes.host import probe_host

    host = probe_host()
    return Configuration.objects.create(
        slug="cpu-test",
        name="CPU only (test)",
        kind=ConfigurationKind.CPU,
        accelerator=None,
        device_count=1,
        nvlink_domain_size=1,
        host_cpu_architecture=host.architecture,
        vcpus=host.logical_cpus,
        host_ram_bytes=host.ram_total_bytes,
        disk_bytes=100 * 10**9,
        driver_version="",
    )


def measurement_document(**overrides: Any) -> dict[str, Any]:
    """A vramplan-measure document as a GPU box would upload it (numbers of an H100-sized run)."""
    document: dict[str, Any] = {
        "schema": "vramplan-measurement/1",
        "run_id": uuid.uuid4().hex,
        "outcome": "succeeded",
        "exit_code": 0,
        "signal": None,
        "duration_seconds": 12.5,
        "command": ["python3", "serve.py"],
        "peaks": {
            "device_used_bytes": 60 * 2**30,
            "framework_allocated_bytes": 50 * 2**30,
            "framework_reserved_bytes": 55 * 2**30,
            "host_rss_bytes": 3 * 2**30,
            "reasons": {},
        },
        "sampling": {"interval_s": 0.002, "device_samples": 6000, "max_gap_s": 0.004},
        "devices": [{"index": 0, "uuid": "GPU-1", "name": "NVIDIA H100 80GB HBM3"}],
        "versions": {"python": "3.11.7", "driver": "550.54.15"},
        "conditions": {"tool": "vramplan-measure"},
        "timing": {"ms_per_output_token": 21.5},
        "timeline": [[0.0, 1 * 2**30, 2**30], [6.0, 60 * 2**30, 3 * 2**30], [12.5, 2 * 2**30, 2**30]],
    }
    document.update(overrides)
    return document


def claimed_job(api, node_name: str = "n1"):
    """Through the API: the tiny CPU workload, an order on a CPU configuration with one live node, and
    a job claimed by that node (attempt 1). Returns (claimed job, node)."""
    from django.utils import timezone

    from catalog.models import Node
    from measurements import services

    configuration = cpu_configuration()
    node = Node.objects.create(name=node_name, configuration=configuration, last_heartbeat_at=timezone.now())
    workload = api.post("/api/v1/workloads/", TINY_CPU_WORKLOAD, format="json").json()
    order = api.post("/api/v1/orders/", {"workload": workload["id"], "configuration": configuration.slug},
                     format="json").json()  # fmt: skip
    job_id = api.post(f"/api/v1/orders/{order['id']}/acceptance-jobs/", {}, format="json").json()["id"]
    claimed = services.acceptance_job_claim(job_id, node.name)
    assert claimed is not None and claimed.attempt == 1
    return claimed, node
