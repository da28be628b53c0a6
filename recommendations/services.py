"""Recommend configurations for a workload: the one path for the API, the command and the admin.

Builds the configuration views from the catalog (``views_data``), the calibration from the acceptance
measurements the caller may see (``measurements.services.calibration_records``; staff and the command see
all), and calls the pure ``recommend.recommend``.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from django.db.models import QuerySet

from budgets.engine import Workload as WorkloadSpec
from budgets.services import budget_compute, workload_validate
from measurements.calibration import CalibrationRecord
from measurements.models import Measurement
from measurements.services import calibration_records, workload_summary

from .plans import ConfigurationView
from .ranking import Filters
from .recommend import Calibration, Entry, recommend
from .views_data import configuration_views

DEFAULT_TOP = 10  # the ranked list an API page shows (benchmarks/recommend_speed.py times the same)
MAX_TOP = 200


def _visible_measurements(user: Any | None) -> QuerySet[Measurement]:
    """Measurements of the caller's orders (staff: all; no user, as from the command line: all)."""
    rows = Measurement.objects.all()
    return rows if user is None else rows.visible_to(user)


def _latency_estimator(views: dict[str, ConfigurationView]):
    """The recommender's roofline time per output token for a measured order (its workload on its
    configuration, uncorrected): what a measured ``ms_per_output_token`` is compared with."""
    remembered: dict[tuple[int, str], float | None] = {}

    def estimate(measurement: Measurement) -> float | None:
        order = measurement.order
        key = (order.workload_id, order.configuration.slug)
        if key not in remembered:
            view = views.get(order.configuration.slug)
            spec = workload_validate(order.workload.description)
            entries = recommend(spec, [view]) if view is not None else []
            latency = entries[0].latency if entries else None
            remembered[key] = latency.ms_per_output_token if latency is not None else None
        return remembered[key]

    return estimate


def acceptance_records(views: Iterable[ConfigurationView], user: Any | None) -> list[CalibrationRecord]:
    """Every calibration record of the measurements ``user`` may see (None: all), the latency view
    compared with the recommender's roofline on ``views``."""
    by_slug = {view.slug: view for view in views}
    return calibration_records(_visible_measurements(user), estimate_ms_per_output_token=_latency_estimator(by_slug))


def calibration_for(spec: WorkloadSpec, views: Iterable[ConfigurationView], user: Any | None) -> Calibration:
    records = acceptance_records(views, user)
    return Calibration.build(records, workload_summary(spec.model_dump(mode="json", exclude_none=False)))


def recommend_for(
    workload_spec: WorkloadSpec,
    *,
    top: int | None = DEFAULT_TOP,
    vendor: str | None = None,
    max_devices: int | None = None,
    max_price: Decimal | None = None,
    user: Any | None = None,
) -> list[Entry]:
    """The catalog's configurations ranked for ``workload_spec``, the first ``top`` of those the filters keep.

    Raises ``budgets.services.BudgetOutOfRange`` (a 400) for a workload no machine could hold, as the
    estimate does, before any plan search.
    """
    budget_compute(workload_spec)
    views = configuration_views()
    filters = Filters(vendor, max_devices, max_price)
    calibration = calibration_for(workload_spec, views, user)
    return recommend(workload_spec, [v for v in views if filters.keeps(v)], calibration, top)


def recommendations_payload(
    workload_spec: WorkloadSpec, entries: Iterable[Entry], workload_id: int | None = None
) -> dict[str, Any]:
    """The answer of the API and of ``manage.py recommend --format json``."""
    return {
        "workload": {
            "id": workload_id,
            "name": workload_spec.name,
            "description": workload_spec.model_dump(mode="json", exclude_none=False),
        },
        "recommendations": [entry.as_dict() for entry in entries],
    }
