"""A stored workload with an acceptance measurement on one H100: evidence for the admin tests."""

from __future__ import annotations

import json
from pathlib import Path

from budgets.engine.budget import read_budget
from budgets.models import Workload
from budgets.services import workload_create
from catalog.models import Configuration
from measurements import acceptance
from measurements import services as measurement_services
from measurements.choices import MeasurementSource
from measurements.models import AcceptanceJob, Measurement
from tests.measurements.helpers import measurement_document

ROOT = Path(__file__).resolve().parents[2]
QWEN_7B = json.loads((ROOT / "fixtures" / "workloads" / "transformers-qwen2.5-7b-dynamic.json").read_text())
H100_X1 = "h100-sxm-80gb-x1-r550"


def measured_workload(owner, ratio: float = 1.2) -> tuple[Workload, Measurement]:
    """QWEN_7B stored for ``owner``, ordered on one H100, with a job whose measured device_used peak is
    ``ratio`` × the estimate (the catalog must be loaded)."""
    workload = workload_create(owner=owner, data=QWEN_7B)
    configuration = Configuration.objects.get(slug=H100_X1)
    order = measurement_services.order_create(owner=owner, workload=workload, configuration=configuration)
    job = AcceptanceJob.objects.create(order=order)
    estimated, _ = acceptance.estimated_views(read_budget(order.budget))["device_used"]
    peaks = {"device_used_bytes": int(estimated * ratio), "host_rss_bytes": 3 * 2**30, "reasons": {}}
    measurement, _ = measurement_services.measurement_record(
        order, measurement_document(peaks=peaks), source=MeasurementSource.JOB, job=job
    )
    return workload, measurement
