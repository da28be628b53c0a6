"""Display code reads a stored budget through the engine's typed reader (``budgets.engine.budget.read_stored_budget``):
the workload and order admins and the order API show the figures of a budget that reads, and one that does not
shows "unreadable budget" with the field it stopped at (admin) or a documented null (API) — never a 500, never a
half-empty table."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from django.utils.html import escape

from budgets.engine import Workload as WorkloadSpec
from budgets.engine import estimate
from budgets.engine.budget import UNREADABLE_BUDGET, StoredBudget, read_budget, read_stored_budget
from budgets.models import Workload
from budgets.services import workload_create
from catalog.units import format_bytes
from measurements import services
from measurements.chart import COLOURS, _gib
from measurements.models import Measurement, Order
from tests.measurements.helpers import TINY_CPU_WORKLOAD, cpu_configuration, measurement_document

CHAT = {
    "name": "support-chat-8b",
    "task": "inference",
    "model": {"preset": "llama-3.1-8b"},
    "inference": {"max_input_tokens": 6144, "max_output_tokens": 2048, "concurrent_sessions": 32},
}
FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "workloads" / "vllm-llama-3.1-8b-chat.json"


def _components_as_a_list(budget: dict[str, Any]) -> None:
    """The malformed layout: the components as a list of objects (each with its name) instead of an object."""
    components = budget["per_device"]["components"]
    budget["per_device"]["components"] = [{"name": name, **c} for name, c in components.items()]


# --- the pure helper --------------------------------------------------------------------------------


def test_read_stored_budget_is_the_reader_none_or_the_readers_message() -> None:
    stored = json.loads(
        json.dumps(estimate(WorkloadSpec.model_validate(json.loads(FIXTURE.read_text()))).as_contract())
    )
    assert read_stored_budget(stored) == StoredBudget(read_budget(stored))
    assert read_stored_budget(None) == StoredBudget(None, None) and read_stored_budget(None).message is None
    broken = copy.deepcopy(stored)
    _components_as_a_list(broken)
    unreadable = read_stored_budget(broken)
    assert unreadable.budget is None
    assert unreadable.error is not None
    assert unreadable.error.startswith("per_device.components: expected an object, got list")
    assert unreadable.message == f"{UNREADABLE_BUDGET}: {unreadable.error}"
    assert read_stored_budget("60 GiB").error == "budget: expected an object, got str"


# --- the workload admin -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_workload_page_shows_the_stored_figures(admin_client, user) -> None:
    workload = workload_create(owner=user, data=CHAT)
    stored = Workload.objects.get(pk=workload.pk).budget  # as the JSON field gives it back
    page = admin_client.get(f"/admin/budgets/workload/{workload.pk}/change/").content.decode()
    components = stored["per_device"]["components"]
    assert list(components) and UNREADABLE_BUDGET not in page
    for name, c in components.items():
        row = (f"<tr><td>{name}</td><td>{format_bytes(c['bytes'])}</td><td>{format_bytes(c['low'])}</td>"
               f"<td>{format_bytes(c['high'])}</td><td>{escape(c['note'])}</td></tr>")  # fmt: skip
        assert row in page
        assert (f'title="{name}: {format_bytes(c["bytes"])}"' in page) == (c["bytes"] > 0)  # a bar segment
    total = stored["per_device"]["total"]
    assert (f"<tr><th>peak</th><th>{format_bytes(total['bytes'])}</th><th>{format_bytes(total['low'])}</th>"
            f"<th>{format_bytes(total['high'])}</th>") in page  # fmt: skip
    assert f"set by phase <b>{stored['per_device']['peak_phase']}</b>" in page
    assert stored["assumptions"] and all(f"<li>{escape(a)}</li>" in page for a in stored["assumptions"])


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_components_as_a_list, "per_device.components: expected an object, got list"),
        (lambda b: b["per_device"]["components"]["weights"].pop("bytes"),
         "per_device.components.weights.bytes: missing"),
        (lambda b: b["per_device"].pop("total"), "per_device.total: missing"),  # once shown as a peak of 0.0 GB
        (lambda b: b.update(assumptions="none"), "assumptions: expected a list, got str"),
    ],
    ids=["components-list", "component-without-bytes", "no-total", "assumptions-not-a-list"],
)  # fmt: skip
def test_the_workload_page_says_a_stored_budget_does_not_read(admin_client, user, edit, message: str) -> None:
    workload = workload_create(owner=user, data=CHAT)
    broken = copy.deepcopy(workload.budget)
    edit(broken)
    Workload.objects.filter(pk=workload.pk).update(budget=broken)
    response = admin_client.get(f"/admin/budgets/workload/{workload.pk}/change/")
    assert response.status_code == 200
    page = response.content.decode()
    assert escape(f"{UNREADABLE_BUDGET}: {message}") in page
    assert "<th>peak</th>" not in page and "set by phase" not in page  # no half-read table or bar
    assert not any(f"<li>{escape(a)}</li>" in page for a in workload.budget["assumptions"])
    assert admin_client.get("/admin/budgets/workload/").status_code == 200


# --- orders and measurements: the admin and the API --------------------------------------------------


@pytest.fixture
def order(api) -> Order:
    configuration = cpu_configuration()
    workload = api.post("/api/v1/workloads/", TINY_CPU_WORKLOAD, format="json").json()
    response = api.post("/api/v1/orders/", {"workload": workload["id"], "configuration": configuration.slug},
                        format="json")  # fmt: skip
    assert response.status_code == 201, response.content
    return Order.objects.get(pk=response.json()["id"])


def _break(order: Order) -> dict[str, Any]:
    broken = copy.deepcopy(order.budget)
    _components_as_a_list(broken)
    Order.objects.filter(pk=order.pk).update(budget=broken)
    return broken


@pytest.mark.django_db
def test_a_readable_order_budget_shows_its_stored_peak(admin_client, api, order: Order) -> None:
    peak = order.budget["per_device"]["total"]["bytes"]
    assert peak > 0
    page = admin_client.get(f"/admin/measurements/order/{order.pk}/change/").content.decode()
    assert format_bytes(peak) in page and UNREADABLE_BUDGET not in page
    assert format_bytes(peak) in admin_client.get("/admin/measurements/order/").content.decode()
    body = api.get(f"/api/v1/orders/{order.pk}/").json()
    assert body["budget_peak_bytes"] == peak and body["budget"] == order.budget


@pytest.mark.django_db
def test_an_unreadable_order_budget_says_so_in_the_admin(admin_client, order: Order) -> None:
    peak = order.budget["per_device"]["total"]["bytes"]
    _break(order)  # the total still reads on its own: the old display showed it as if nothing were wrong
    expected = escape(f"{UNREADABLE_BUDGET}: per_device.components: expected an object, got list")
    response = admin_client.get(f"/admin/measurements/order/{order.pk}/change/")
    assert response.status_code == 200
    page = response.content.decode()
    assert expected in page and format_bytes(peak) not in page
    changelist = admin_client.get("/admin/measurements/order/")
    assert changelist.status_code == 200 and expected in changelist.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "edit",
    [_components_as_a_list, lambda b: b.update(per_device="60 GiB"), lambda b: b["per_device"].update(total=[1, 2])],
    ids=["components-list", "per-device-a-string", "total-a-list"],
)
def test_an_unreadable_order_budget_is_a_null_peak_in_the_api(api, order: Order, edit) -> None:
    broken = copy.deepcopy(order.budget)
    edit(broken)
    Order.objects.filter(pk=order.pk).update(budget=broken)
    response = api.get(f"/api/v1/orders/{order.pk}/")
    assert response.status_code == 200
    body = response.json()
    assert body["budget_peak_bytes"] is None
    assert body["budget"] == broken  # the stored object itself, as documented: the shape does not change
    listed = api.get("/api/v1/orders/")
    assert listed.status_code == 200
    assert [o["budget_peak_bytes"] for o in listed.json()["results"] if o["id"] == order.pk] == [None]


@pytest.mark.django_db
def test_the_measurement_chart_draws_a_readable_budget_and_says_when_it_does_not_read(
    admin_client, order: Order
) -> None:
    measurement = services.measurement_record(order, measurement_document(), source="upload")[0]
    # a GPU run's budget (the device view): a cpu budget is tensors only and is not drawn against host RSS
    gpu_budget = {**(measurement.budget or {}), "device": "cuda"}
    Measurement.objects.filter(pk=measurement.pk).update(budget=gpu_budget)
    measurement.budget = gpu_budget
    peak = Measurement.objects.get(pk=measurement.pk).budget["per_device"]["total"]["bytes"]
    url = f"/admin/measurements/measurement/{measurement.pk}/change/"
    page = admin_client.get(url).content.decode()
    assert f"<title>budget {_gib(peak)}</title>" in page and UNREADABLE_BUDGET not in page

    broken = copy.deepcopy(measurement.budget)
    _components_as_a_list(broken)
    Measurement.objects.filter(pk=measurement.pk).update(budget=broken)
    response = admin_client.get(url)
    assert response.status_code == 200
    page = response.content.decode()
    assert escape(f"{UNREADABLE_BUDGET}: per_device.components: expected an object, got list") in page
    assert "<title>budget " not in page and f'stroke="{COLOURS["budget"]}"' not in page  # no budget line
    assert "<svg" in page  # the measured timeline is still drawn
