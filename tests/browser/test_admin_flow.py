"""One flow in a real browser: sign in to the admin, open a workload, see its recommendations, open the
measurement behind one of them.

Debian's ``chromium`` (``apt-get install chromium``; ``.ci/run`` installs it when missing) driven by the
``playwright`` package against pytest-django's live server; never ``playwright install``. Without chromium
the test is skipped saying so, or fails under REQUIRE_SERVICES=1 (CI), so it cannot pass unseen.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from django.core.management import call_command
from playwright.sync_api import expect, sync_playwright

from budgets.services import workload_create
from tests.conftest import skip_or_fail
from tests.recommendations.measured import H100_X1, measured_workload

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CHROMIUM = "/usr/bin/chromium"
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "workloads"


@pytest.fixture
def chromium() -> str:
    if shutil.which(CHROMIUM) is None:
        skip_or_fail(f"no browser at {CHROMIUM}: install Debian's chromium (apt-get install -y chromium)")
    return CHROMIUM


def test_sign_in_open_a_workload_see_its_recommendations_and_open_the_evidence(
    chromium, live_server, admin_user
) -> None:
    # the database is written before the browser starts: Playwright's sync API runs an event loop in this
    # thread, where Django refuses database calls; the live server answers from its own thread
    call_command("loadcatalog", verbosity=0)
    workload, measurement = measured_workload(admin_user, ratio=1.3)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium)
        page = browser.new_page()
        page.goto(f"{live_server.url}/admin/")
        page.fill("#id_username", "admin")
        page.fill("#id_password", "password")  # pytest-django's admin_user
        page.get_by_role("button", name="Log in").click()
        expect(page.locator("#site-name")).to_have_text("vramplan")

        page.get_by_role("link", name="Workloads", exact=True).first.click()
        page.get_by_role("link", name=workload.name, exact=True).click()
        expect(page.locator("h2", has_text="Recommendations")).to_be_visible()
        row = page.locator("tr.recommendation", has=page.locator(f"a:text-is('{H100_X1}')"))
        expect(row).to_contain_text("measured_here")
        expect(page.locator("table.recommendations svg").first).to_be_visible()

        row.locator("a.evidence-measurement").click()
        expect(page).to_have_url(re.compile(rf"/admin/measurements/measurement/{measurement.pk}/change/$"))
        expect(page.locator("svg[role=img]").first).to_be_visible()  # the measurement's memory timeline
        browser.close()


def test_a_launchs_file_opens_and_its_copy_button_copies_it(chromium, live_server, admin_user) -> None:
    """The ZeRO paper's 7.5B names no checkpoint: a row's launch lists the files it reads; opening the config.json
    of the model built from its numbers shows it, and its copy button puts exactly that file on the clipboard."""
    call_command("loadcatalog", verbosity=0)
    data = json.loads((FIXTURES / "train-zero3-dp64-7.5b.json").read_text())
    workload = workload_create(owner=admin_user, data=data)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium)
        context = browser.new_context(permissions=["clipboard-read", "clipboard-write"])
        page = context.new_page()
        page.goto(f"{live_server.url}/admin/login/?next=/admin/budgets/workload/{workload.pk}/change/")
        page.fill("#id_username", "admin")
        page.fill("#id_password", "password")
        page.get_by_role("button", name="Log in").click()
        config = page.locator("details.launch-file", has_text="model/config.json, which the command reads").first
        expect(config.locator("pre")).to_be_hidden()
        config.locator("summary").click(position={"x": 5, "y": 5})
        expect(config.locator("pre")).to_contain_text('"GPTNeoXForCausalLM"')
        shown = config.locator("pre").inner_text()
        config.locator("button.copy-launch-file").click()
        expect(config.locator("button.copy-launch-file")).to_have_text("copied")
        assert json.loads(page.evaluate("navigator.clipboard.readText()")) == json.loads(shown)
        assert json.loads(shown)["num_hidden_layers"] == data["model"]["architecture"]["num_layers"]
        browser.close()
