"""The workload admin: list, budget table and bar, and the re-estimate action."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from budgets.models import Workload
from budgets.services import workload_create

pytestmark = pytest.mark.django_db

CHAT = {
    "name": "support-chat-8b",
    "task": "inference",
    "model": {"preset": "llama-3.1-8b"},
    "inference": {"max_input_tokens": 6144, "max_output_tokens": 2048, "concurrent_sessions": 32},
}


def test_changelist_shows_peaks_in_both_units_with_constant_queries(admin_client, user) -> None:
    workload_create(owner=user, data=CHAT)
    with CaptureQueriesContext(connection) as few:
        page = admin_client.get("/admin/budgets/workload/")
    for index in range(10):
        workload_create(owner=user, data={**CHAT, "name": f"chat-{index}"})
    with CaptureQueriesContext(connection) as many:
        assert admin_client.get("/admin/budgets/workload/").status_code == 200
    assert len(many.captured_queries) == len(few.captured_queries)
    assert " GB (" in page.content.decode() and " GiB)" in page.content.decode()


def test_change_form_shows_table_bar_and_assumptions(admin_client, user) -> None:
    workload = workload_create(owner=user, data=CHAT)
    page = admin_client.get(f"/admin/budgets/workload/{workload.pk}/change/").content.decode()
    for component in ("weights", "kv_cache", "activations", "fragmentation"):
        assert f"<td>{component}</td>" in page
    assert "background:#e15759" in page  # the KV cache's segment of the stacked bar
    assert "set by phase" in page
    assert "GiB = 2^30 B" in page  # an assumption
    assert 'name="name"' not in page  # read-only: the name belongs to the stored description


def test_reestimate_action_reports_invalid_rows_and_keeps_going(admin_client, user) -> None:
    good = workload_create(owner=user, data=CHAT)
    stale = workload_create(owner=user, data={**CHAT, "name": "stale"})
    Workload.objects.filter(pk=stale.pk).update(description={**stale.description, "model": {"preset": "gone-1b"}})
    Workload.objects.filter(pk=good.pk).update(peak_bytes=1)
    response = admin_client.post(
        "/admin/budgets/workload/",
        {"action": "reestimate", "_selected_action": [good.pk, stale.pk], "index": 0, "select_across": 0},
        follow=True,
    )
    assert response.status_code == 200
    text = response.content.decode()
    assert "Stale: not re-estimated: model: unknown preset &#x27;gone-1b&#x27;" in text
    assert "Re-estimated 1 workload(s)." in text
    good.refresh_from_db()
    assert good.peak_bytes == good.budget["per_device"]["total"]["bytes"] > 1
