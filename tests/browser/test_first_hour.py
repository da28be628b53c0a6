"""The first hour, end to end, as the README tells a newcomer on a CPU machine: this machine's CPU configuration in
the catalog (`manage.py localconfiguration`, which `make run` runs), a real Celery worker whose host-probe node is that
configuration, then the README's API steps (store a workload, order the configuration, start an acceptance job), and a
buyer reading the outcome through the admin pages in Debian's chromium: the workload and its recommendations, the
order with its decision, the measurement with its measured / estimated ratio.

Real components only: PostgreSQL, Redis, `celery worker` in its own process running the synthetic job in a child
process, the live server, the browser. The database is written before the browser starts (Playwright's sync API runs
an event loop in this thread, where Django refuses database calls).
"""

from __future__ import annotations

import re
import time

import pytest
from django.core.management import call_command
from playwright.sync_api import expect, sync_playwright

from catalog.models import Configuration
from tests.conftest import _token_client
from tests.measurements.helpers import TINY_CPU_WORKLOAD
from tests.workers.conftest import start_worker  # noqa: F401  (the real-worker fixture)

from .test_admin_flow import chromium  # noqa: F401  (Debian's chromium, or a skip that CI turns into a failure)

pytestmark = [pytest.mark.browser, pytest.mark.services, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

JOB_TIMEOUT_S = 180.0


def _wait_job(api, job_id: int) -> dict:
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while time.monotonic() < deadline:
        job = api.get(f"/api/v1/acceptance-jobs/{job_id}/").json()
        if job["status"] in ("succeeded", "failed", "cancelled"):
            return job
        time.sleep(0.5)
    pytest.fail(f"job {job_id} did not end in {JOB_TIMEOUT_S:.0f} s")


def test_a_newcomers_first_order_is_measured_and_decided_and_readable_in_the_admin(
    chromium,  # noqa: F811
    start_worker,  # noqa: F811
    live_server,
    admin_user,
    capsys,
) -> None:
    call_command("loadcatalog", verbosity=0)
    call_command("localconfiguration")
    slug = capsys.readouterr().out.strip().splitlines()[-1]
    local = Configuration.objects.get(slug=slug)
    worker = start_worker()
    assert worker.wait_for_node().configuration_id == local.pk, "the local worker's node is this machine's entry"

    # the README's steps, as the buyer (here the admin) sends them with an API token
    api = _token_client(admin_user)
    workload = api.post("/api/v1/workloads/", TINY_CPU_WORKLOAD, format="json").json()
    order = api.post("/api/v1/orders/", {"workload": workload["id"], "configuration": slug}, format="json").json()
    started = api.post(f"/api/v1/orders/{order['id']}/acceptance-jobs/", {}, format="json")
    assert started.status_code == 202, started.json()
    job = _wait_job(api, started.json()["id"])
    assert job["status"] == "succeeded", job
    decided = api.get(f"/api/v1/orders/{order['id']}/").json()
    assert decided["status"] == "accepted", decided["decision"]
    measurement_id = job["measurement"]["id"]

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{live_server.url}/admin/")
        page.fill("#id_username", "admin")
        page.fill("#id_password", "password")  # pytest-django's admin_user
        page.get_by_role("button", name="Log in").click()

        # the workload, its recommendations: this machine's configuration is there, measured here
        page.get_by_role("link", name="Workloads", exact=True).first.click()
        page.get_by_role("link", name=TINY_CPU_WORKLOAD["name"], exact=True).click()
        row = page.locator("tr.recommendation", has=page.locator(f"a:text-is('{slug}')"))
        expect(row).to_contain_text("measured_here")
        expect(row.locator("td.price")).to_have_text(re.compile(r"no price|per hour|per million"))

        # a 1,400 px screen holds the recommendations table without scrolling sideways
        table, width = page.evaluate(
            "[document.querySelector('table.recommendations').scrollWidth, document.documentElement.scrollWidth]"
        )
        assert table <= 1400 and width <= 1400, f"the recommendations table is {table} px wide, the page {width} px"

        # and the configuration list (the catalog a buyer browses)
        page.goto(f"{live_server.url}/admin/catalog/configuration/")
        expect(page.locator("#result_list")).to_be_visible()
        # the admin scrolls a wide result list inside its own box: the table must fit that box, not only the page
        table, box = page.evaluate(
            "[document.querySelector('#result_list').scrollWidth, document.querySelector('.results').clientWidth]"
        )
        assert table <= box <= 1400, f"the configuration list is {table} px wide in a {box} px box"

        # the order: accepted, with the sentence that says why
        page.goto(f"{live_server.url}/admin/measurements/order/{order['id']}/change/")
        expect(page.locator("div.form-row.field-status")).to_contain_text("accepted", ignore_case=True)
        expect(page.locator("div.form-row.field-decision_sentence")).to_contain_text("Accepted")

        # the measurement behind it: its measured / estimated ratio, a number, and the run's timeline
        page.locator(f"a[href$='/admin/measurements/measurement/{measurement_id}/change/']").first.click()
        ratios = page.locator("div.form-row.field-ratios_table table")
        expect(ratios).to_be_visible()
        expect(ratios.locator("td").nth(3)).to_have_text(re.compile(r"^\d+\.\d{3}$"))
        expect(page.locator("svg[role=img]").first).to_be_visible()
        browser.close()
