"""A measurement stored with a figure beyond the upload bounds (issue 16, finding 2: an upload made before
them) does not make the recommendations that read it, or the admin page that shows them, a 500."""

from __future__ import annotations

import pytest

from measurements.models import Measurement
from tests.recommendations.measured import H100_X1, QWEN_7B, measured_workload

pytestmark = pytest.mark.django_db


def test_a_stored_out_of_range_ratio_leaves_recommend_and_the_workload_page_working(
    staff_api, admin_client, user, catalog
) -> None:
    workload, measurement = measured_workload(user)
    ratios = {view: {**r, "measured_bytes": 10**400} for view, r in measurement.ratios.items()}
    Measurement.objects.filter(pk=measurement.pk).update(ratios=ratios)

    response = staff_api.post("/api/v1/recommend?top=200", QWEN_7B, format="json")
    assert response.status_code == 200
    entry = {e["configuration"]["slug"]: e for e in response.json()["recommendations"]}[H100_X1]
    assert entry["margin"]["candidates"]["calibration_spread"] == 0  # the unreadable figure calibrates nothing
    assert admin_client.get(f"/admin/budgets/workload/{workload.pk}/change/").status_code == 200
