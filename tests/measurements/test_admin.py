"""The admin shows an order with its jobs and measurements, read-only, and a measurement's timeline as SVG."""

from __future__ import annotations

import re

import pytest

from measurements import services
from measurements.chart import timeline_svg
from measurements.models import Measurement

from .helpers import claimed_job, measurement_document

pytestmark = pytest.mark.django_db


@pytest.fixture
def measured(api):
    claimed, node = claimed_job(api)
    document = measurement_document(peaks={"framework_allocated_bytes": 3 * 2**20, "host_rss_bytes": 400 * 2**20,
                                           "reasons": {"device_used_bytes": "no NVML <here>"}})  # fmt: skip
    measurement = services.acceptance_job_finish(claimed.job_id, node.name, claimed.attempt, document)
    assert measurement is not None
    return measurement


def test_order_page_shows_its_job_and_measurement_and_the_decision(admin_client, measured: Measurement) -> None:
    page = admin_client.get(f"/admin/measurements/order/{measured.order_id}/change/").content.decode()
    assert "Accepted: the measured peak" in page
    assert f"/admin/measurements/acceptancejob/{measured.job_id}/change/" in page
    assert f"/admin/measurements/measurement/{measured.pk}/change/" in page
    assert 'name="_save"' not in page  # read-only


def test_measurement_page_renders_the_timeline_chart(admin_client, measured: Measurement) -> None:
    page = admin_client.get(f"/admin/measurements/measurement/{measured.pk}/change/").content.decode()
    svg = re.search(r"<svg[^>]*role=\"img\".*?</svg>", page, re.S)
    assert svg is not None
    points = re.search(r'<polyline[^>]*points="([^"]+)"', svg.group(0))
    assert points is not None and len(points.group(1).split()) == 3  # the three device samples
    assert "no NVML &lt;here&gt;" in page  # reasons are escaped
    for path in ("order", "acceptancejob", "measurement"):
        assert admin_client.get(f"/admin/measurements/{path}/").status_code == 200


def test_the_chart_keeps_a_spike_and_escapes_its_title() -> None:
    svg = timeline_svg([[0, 10, None], [1, 1000, None], [2, 10, None]], title="<x>", budget_bytes=800)
    assert "&lt;x&gt;" in svg and "<x>" not in svg
    ys = [float(p.split(",")[1]) for p in re.search(r'points="([^"]+)"', svg).group(1).split()]
    assert min(ys) < ys[0] and ys[0] == ys[2]  # the spike is the highest point (smallest y)
    assert "no samples" in timeline_svg([], title="empty")


def test_the_list_shows_provenance_and_staff_with_the_permission_mark_uploads_reviewed(
    admin_client, client, django_user_model, measured: Measurement
) -> None:
    upload, _ = services.measurement_record(
        measured.order,
        measurement_document(peaks={"framework_allocated_bytes": 3 * 2**20, "host_rss_bytes": 400 * 2**20}),
        source="upload",
    )
    page = admin_client.get("/admin/measurements/measurement/").content.decode()
    assert "node-verified (an acceptance job on a registered node)" in page
    assert "upload, reported by its owner (not reviewed)" in page

    # staff without the review permission are not offered the action
    django_user_model.objects.create_user("clerk", password="pw", is_staff=True)
    client.login(username="clerk", password="pw")
    client.post("/admin/measurements/measurement/", {"action": "mark_reviewed", "_selected_action": [upload.pk]})
    assert not hasattr(Measurement.objects.get(pk=upload.pk), "review")

    response = admin_client.post(
        "/admin/measurements/measurement/", {"action": "mark_reviewed", "_selected_action": [upload.pk, measured.pk]}
    )
    assert response.status_code == 302
    reviewed = Measurement.objects.select_related("review__reviewer").get(pk=upload.pk)
    assert reviewed.provenance == "reviewed_upload" and reviewed.review.reviewer.username == "admin"
    assert not hasattr(Measurement.objects.get(pk=measured.pk), "review")  # a node's run needs no review


def test_the_measurement_page_reads_each_views_ratio(admin_client, measured: Measurement) -> None:
    """The "measured / estimated" table shows its numbers (it showed "-": format_html escaped the float before the
    template's {:.3f} could format it, and the ValueError was swallowed)."""
    assert measured.ratios, "the fixture's measurement must have been compared with its budget"
    page = admin_client.get(f"/admin/measurements/measurement/{measured.pk}/change/").content.decode()
    table = re.search(r"<table><tr><th>view</th><th>measured</th>.*?</table>", page, re.S)
    assert table is not None
    for view, ratio in measured.ratios.items():
        assert f"<td>{view}</td>" in table.group(0)
        assert f"<td>{ratio['ratio']:.3f}</td>" in table.group(0)


def test_the_chart_is_scaled_to_the_run_not_to_a_far_larger_usable_memory() -> None:
    """Issue 16, first hour, item 6: a 3 GiB run on a 69 GiB GPU was a flat line at the bottom."""
    run = [[0, 1 * 2**30, None], [1, 3 * 2**30, None], [2, 1 * 2**30, None]]
    svg = timeline_svg(run, usable_bytes=69 * 2**30, title="small run")
    labels = [float(v.replace(",", "")) for v in re.findall(r">([0-9.,]+) GiB</text>", svg)]
    assert max(labels) < 4  # the axis ends just above the 3 GiB peak
    assert "usable 69.00 GiB, above the chart" in svg
    near = timeline_svg(run, usable_bytes=4 * 2**30, title="a near limit")
    assert "usable 4.00 GiB</title>" in near  # drawn as a line when it is near the run


def test_a_cpu_runs_chart_draws_no_tensor_budget_against_host_rss(admin_client, measured: Measurement) -> None:
    assert measured.budget["device"] == "cpu"
    page = admin_client.get(f"/admin/measurements/measurement/{measured.pk}/change/").content.decode()
    svg = re.search(r"<svg[^>]*role=\"img\".*?</svg>", page, re.S)
    assert svg is not None and "<title>budget " not in svg.group(0)
