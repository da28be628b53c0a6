"""Typed readers beside their dataclasses: a node's stored inventory (``workers.probes.model.read_inventory``) and a
stored budget (``budgets.engine.budget.read_budget``). Each round-trips what its dataclass wrote, and names the
field of a malformed one — never a KeyError, never a 500."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from budgets.engine import Workload, estimate
from budgets.engine.budget import BudgetReadError, read_budget
from catalog.models import Node
from tests.workers.inventories import gpu, host_inventory, nvml_inventory
from workers.probes.model import InventoryError, NodeInventory, read_inventory

WORKLOADS = sorted((Path(__file__).resolve().parent.parent / "fixtures" / "workloads").glob("*.json"))
GIB = 2**30

# --- the node inventory ----------------------------------------------------------------------------

INVENTORIES = {
    "nvml-v2": nvml_inventory(gpu(0), gpu(1)),
    "nvml-v1-driver": nvml_inventory(gpu(0, memory_info_version=1), driver="470.256.02", cuda=11040),
    "host": host_inventory("aarch64"),
}


@pytest.mark.parametrize("inventory", INVENTORIES.values(), ids=INVENTORIES.keys())
def test_an_inventory_reads_back_as_it_was_written(inventory: NodeInventory) -> None:
    stored = json.loads(json.dumps(inventory.as_dict()))  # as a JSONField gives it back
    assert read_inventory(stored) == inventory
    assert NodeInventory.from_dict(stored).as_dict() == stored


def test_no_inventory_yet_is_none_and_from_dict_says_so() -> None:
    assert read_inventory({}) is None and read_inventory(None) is None
    with pytest.raises(InventoryError, match="empty"):
        NodeInventory.from_dict({})


def _edited(edit: Any) -> dict[str, Any]:
    data = copy.deepcopy(INVENTORIES["nvml-v2"].as_dict())
    edit(data)
    return data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([1, 2], "inventory: expected an object, got list"),
        (_edited(lambda d: d.pop("host")), "inventory.host: missing"),
        (_edited(lambda d: d.update(probe="rocm")), "inventory.probe: expected one of nvml, host, got 'rocm'"),
        (_edited(lambda d: d.update(nvml=None)), "inventory.nvml: missing for probe 'nvml'"),
        (_edited(lambda d: d.update(inventory_version=2)), "inventory.inventory_version: this reader knows 1"),
        (_edited(lambda d: d["nvml"]["devices"][1].update(total_memory_bytes="80GB")),
         "inventory.nvml.devices[1].total_memory_bytes: expected a whole number ≥ 0, got str '80GB'"),
        (_edited(lambda d: d["nvml"]["devices"][0].update(total_memory_bytes=True)),
         "inventory.nvml.devices[0].total_memory_bytes"),
        (_edited(lambda d: d["nvml"].update(devices={"0": {}})), "inventory.nvml.devices: expected a list"),
        (_edited(lambda d: d["nvml"]["devices"][0].pop("uuid")), "inventory.nvml.devices[0].uuid: missing"),
        (_edited(lambda d: d["nvml"]["devices"][0].update(processes=[{"pid": -1}])),
         "inventory.nvml.devices[0].processes[0].pid"),
        (_edited(lambda d: d["host"].update(ram_total_bytes=None)), "inventory.host.ram_total_bytes: expected"),
    ],
)  # fmt: skip
def test_a_malformed_inventory_names_its_field(data: object, message: str) -> None:
    with pytest.raises(InventoryError) as excinfo:
        read_inventory(data)
    assert message in str(excinfo.value)


@pytest.mark.django_db
def test_the_node_api_reads_inventories_through_the_reader(api) -> None:
    good = INVENTORIES["nvml-v1-driver"]
    Node.objects.create(name="good", probe="nvml", device_count=1, inventory=good.as_dict())
    bad = _edited(lambda d: d["nvml"]["devices"][0].pop("name"))
    Node.objects.create(name="bad", probe="nvml", device_count=2, inventory=bad)
    summary = api.get("/api/v1/nodes/good/").json()["inventory_summary"]
    device = good.devices[0]
    assert summary["devices"] == [{"name": device.name, "total_memory_bytes": device.total_memory_bytes,
                                   "usable_memory_bytes": device.total_memory_bytes}]  # fmt: skip  # v1: no reserve
    assert summary["host_ram_total_bytes"] == good.host.ram_total_bytes
    response = api.get("/api/v1/nodes/bad/")  # a stored inventory that does not read: no devices, not a 500
    assert response.status_code == 200
    assert response.json()["inventory_summary"]["devices"] == [] and api.get("/api/v1/nodes/").status_code == 200


# --- the stored budget -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", WORKLOADS, ids=lambda p: p.stem)
def test_a_budget_reads_back_as_it_was_written(path: Path) -> None:
    spec = Workload.model_validate(json.loads(path.read_text()))
    for device_memory in (None, 80 * GIB):  # with a device memory a vLLM budget carries its serving block
        budget = estimate(spec, device_memory_bytes=device_memory)
        stored = json.loads(json.dumps(budget.as_contract()))
        read = read_budget(stored)
        assert read.as_contract() == stored
        assert (read.per_device.components, read.host, read.plan) == (
            budget.per_device.components,
            budget.host,
            budget.plan,
        )


def _budget(edit: Any) -> dict[str, Any]:
    path = next(p for p in WORKLOADS if p.stem == "vllm-llama-3.1-8b-chat")
    data = estimate(Workload.model_validate(json.loads(path.read_text())), device_memory_bytes=80 * GIB).as_contract()
    edit(data)
    return data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("60 GiB", "budget: expected an object, got str"),
        (_budget(lambda d: d.pop("per_device")), "per_device: missing"),
        (_budget(lambda d: d["per_device"].pop("total")), "per_device.total: missing"),
        (_budget(lambda d: d["per_device"]["components"].pop("kv_cache")), "per_device.components.kv_cache: missing"),
        (_budget(lambda d: d["per_device"]["components"].update(scratch={"bytes": 1})),
         "unknown component(s) scratch"),
        (_budget(lambda d: d["per_device"]["components"]["weights"].update(bytes="16 GB")),
         "per_device.components.weights.bytes: expected a whole number, got str '16 GB'"),
        (_budget(lambda d: d["per_device"]["total"].update(low=d["per_device"]["total"]["high"] + 1)),
         "per_device.total: expected low ≤ bytes ≤ high"),
        (_budget(lambda d: d.update(device="tpu")), "device: expected 'cuda' or 'cpu', got 'tpu'"),
        (_budget(lambda d: d.update(devices=0)), "devices: expected a whole number ≥ 1"),
        (_budget(lambda d: d["host"].update(ram_bytes=-1)), "host.ram_bytes: expected a whole number ≥ 0, got -1"),
        (_budget(lambda d: d["serving"].update(starts="yes")), "serving.starts: expected true or false"),
        (_budget(lambda d: d["serving"].pop("kv_bytes_per_token")), "serving.kv_bytes_per_token: missing"),
    ],
)  # fmt: skip
def test_a_malformed_budget_names_its_field(data: object, message: str) -> None:
    with pytest.raises(BudgetReadError) as excinfo:
        read_budget(data)
    assert message in str(excinfo.value)


@pytest.mark.django_db
def test_a_measurement_on_an_order_with_an_unreadable_budget_is_kept_and_says_why(api) -> None:
    from measurements import services
    from measurements.models import Order
    from tests.measurements.helpers import TINY_CPU_WORKLOAD, cpu_configuration, measurement_document

    configuration = cpu_configuration()
    workload = api.post("/api/v1/workloads/", TINY_CPU_WORKLOAD, format="json").json()
    order_id = api.post("/api/v1/orders/", {"workload": workload["id"], "configuration": configuration.slug},
                        format="json").json()["id"]  # fmt: skip
    order = Order.objects.get(pk=order_id)
    readable = services.measurement_record(order, measurement_document(), source="upload")[0]
    assert readable.ratios and "budget_unreadable" not in Order.objects.get(pk=order_id).decision

    del order.budget["per_device"]["components"]["weights"]["bytes"]  # damaged in storage
    order.save(update_fields=["budget"])
    measurement, created = services.measurement_record(order, measurement_document(), source="upload")
    assert created and measurement.ratios == {}
    decision = Order.objects.get(pk=order_id).decision
    assert decision["measurement"] == measurement.pk
    assert "per_device.components.weights.bytes: missing" in decision["budget_unreadable"]
