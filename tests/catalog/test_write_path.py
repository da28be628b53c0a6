"""One write path: the admin, the API, loadcatalog and the node heartbeat all write catalog rows through
``catalog.services.<entity>_create`` / ``_update``.

The proof is a rule only the services hold (``catalog_rules_check``: an observed usable figure needs its source;
neither the model nor any serializer or form declares it): it is enforced at every door alike.
"""

from __future__ import annotations

import copy

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from catalog import services
from catalog.api.serializers import AcceleratorSerializer
from catalog.models import Accelerator, Architecture, Node, Precision
from catalog.services import CatalogDataError, catalog_load, catalog_read
from tests.factories import AcceleratorFactory, ArchitectureFactory, ConfigurationFactory, VendorFactory
from tests.workers.inventories import gpu, nvml_inventory
from workers.services import node_heartbeat_record

pytestmark = pytest.mark.django_db

USABLE = 85_520_809_984 - 566_231_040  # an H100's NVML total less the driver's reserve, bytes


@pytest.fixture
def staff_client(client, admin_user):
    client.force_login(admin_user)
    return client


def _admin_accelerator_form(architecture: Architecture, **changes: object) -> dict[str, object]:
    form = {
        "name": "New GPU",
        "slug": "new-gpu",
        "architecture": architecture.pk,
        "marketed_memory_bytes": 80 * 10**9,
        "usable_memory_bytes": "",
        "usable_memory_source": "",
        "dense_tflops": "{}",
        "uncertain_fields": "[]",
        "max_devices_per_node": 8,
        "source_url": "https://example.org/datasheet",
    }
    return {**form, **changes}


def _api_accelerator(architecture: Architecture, **changes: object) -> dict[str, object]:
    payload = {
        "slug": "new-gpu",
        "name": "New GPU",
        "architecture": architecture.slug,
        "marketed_memory_bytes": 80 * 10**9,
        "source_url": "https://example.org/datasheet",
    }
    return {**payload, **changes}


# --- the service's own rule, at every door ---------------------------------------------------------


def test_the_service_refuses_an_unsourced_usable_figure_and_saves_nothing() -> None:
    architecture = ArchitectureFactory()
    with pytest.raises(ValidationError) as excinfo:
        services.accelerator_create(slug="new-gpu", name="New GPU", architecture=architecture,
                                    marketed_memory_bytes=80 * 10**9, source_url="https://example.org/d",
                                    usable_memory_bytes=USABLE)  # fmt: skip
    assert "needs a source" in excinfo.value.message_dict["usable_memory_source"][0]
    assert not Accelerator.objects.filter(slug="new-gpu").exists()
    # The model alone accepts it: the rule is the service's, not full_clean's.
    Accelerator(slug="x", name="X", architecture=architecture,  # type: ignore[misc]
                marketed_memory_bytes=1, source_url="https://e.org",
                usable_memory_bytes=USABLE).full_clean()  # fmt: skip


def test_the_api_enforces_the_service_rule_on_create_and_update(editor_api) -> None:
    architecture = ArchitectureFactory()
    response = editor_api.post(
        "/api/v1/accelerators/", _api_accelerator(architecture, usable_memory_bytes=USABLE), format="json"
    )
    assert response.status_code == 400, response.content
    assert "needs a source" in response.json()["usable_memory_source"][0]
    assert not Accelerator.objects.filter(slug="new-gpu").exists()

    sourced = _api_accelerator(architecture, usable_memory_bytes=USABLE, usable_memory_source="nvidia-smi on box 7")
    assert editor_api.post("/api/v1/accelerators/", sourced, format="json").status_code == 201
    response = editor_api.patch("/api/v1/accelerators/new-gpu/", {"usable_memory_source": ""}, format="json")
    assert response.status_code == 400 and "usable_memory_source" in response.json()
    assert Accelerator.objects.get(slug="new-gpu").usable_memory_source == "nvidia-smi on box 7"


def test_the_admin_enforces_the_service_rule_on_its_form(staff_client) -> None:
    architecture = ArchitectureFactory()
    response = staff_client.post(
        "/admin/catalog/accelerator/add/", _admin_accelerator_form(architecture, usable_memory_bytes=USABLE)
    )
    assert response.status_code == 200  # the form again, with the error on its field
    assert "needs a source" in response.context["adminform"].form.errors["usable_memory_source"][0]
    assert not Accelerator.objects.filter(slug="new-gpu").exists()

    response = staff_client.post(
        "/admin/catalog/accelerator/add/",
        _admin_accelerator_form(architecture, usable_memory_bytes=USABLE, usable_memory_source="nvidia-smi"),
    )
    assert response.status_code == 302, response.context and response.context["adminform"].form.errors
    accelerator = Accelerator.objects.get(slug="new-gpu")
    assert (accelerator.usable_memory_bytes, accelerator.usable_memory_source) == (USABLE, "nvidia-smi")
    response = staff_client.post(
        f"/admin/catalog/accelerator/{accelerator.pk}/change/",
        _admin_accelerator_form(architecture, usable_memory_bytes=USABLE, usable_memory_source=""),
    )
    assert response.status_code == 200 and "usable_memory_source" in response.context["adminform"].form.errors
    accelerator.refresh_from_db()
    assert accelerator.usable_memory_source == "nvidia-smi"


def test_loadcatalog_enforces_the_service_rule_and_names_the_record() -> None:
    data = {name: records for name, records in copy.deepcopy(catalog_read()).items()
            if name in ("vendors.json", "precisions.json", "architectures.json", "accelerators.json")}  # fmt: skip
    record = next(r for r in data["accelerators.json"] if r.get("usable_memory_bytes"))
    record["usable_memory_source"] = ""
    with pytest.raises(CatalogDataError) as excinfo:
        catalog_load(data)
    message = str(excinfo.value)
    assert f"accelerators.json record {data['accelerators.json'].index(record)} ({record['slug']})" in message
    assert "usable_memory_source: usable_memory_bytes=" in message and "needs a source" in message
    assert not Accelerator.objects.exists()  # one transaction: nothing kept


# --- the same services behind each door ------------------------------------------------------------


def test_admin_saves_many_to_many_through_the_service(staff_client) -> None:
    vendor = VendorFactory()
    bf16, fp8 = Precision.objects.create(slug="bf16"), Precision.objects.create(slug="fp8")
    form = {"vendor": vendor.pk, "slug": "arch-x", "name": "Arch X", "family": "X", "gfx_target": "",
            "compute_capability_major": 9, "compute_capability_minor": 0, "precisions": [bf16.pk]}  # fmt: skip
    assert staff_client.post("/admin/catalog/architecture/add/", form).status_code == 302
    architecture = Architecture.objects.get(slug="arch-x")
    assert [p.slug for p in architecture.precisions.all()] == ["bf16"]
    response = staff_client.post(
        f"/admin/catalog/architecture/{architecture.pk}/change/", {**form, "precisions": [bf16.pk, fp8.pk]}
    )
    assert response.status_code == 302
    assert sorted(p.slug for p in architecture.precisions.all()) == ["bf16", "fp8"]
    # The model's own constraint comes through the same path: half a compute capability is refused.
    response = staff_client.post(
        f"/admin/catalog/architecture/{architecture.pk}/change/", {**form, "compute_capability_minor": ""}
    )
    assert response.status_code == 200
    architecture.refresh_from_db()
    assert architecture.compute_capability == "9.0"


def test_api_validation_messages_come_from_the_service(editor_api) -> None:
    accelerator = AcceleratorFactory(max_devices_per_node=4)
    payload = {"slug": "box", "name": "Box", "kind": "gpu", "accelerator_slug": accelerator.slug, "device_count": 8,
               "nvlink_domain_size": 1, "vcpus": 8, "host_ram_bytes": 10**11, "disk_bytes": 10**12}  # fmt: skip
    response = editor_api.post("/api/v1/configurations/", payload, format="json")
    with pytest.raises(ValidationError) as excinfo:
        services.configuration_create(slug="box", name="Box", accelerator=accelerator, device_count=8, vcpus=8,
                                      host_ram_bytes=10**11, disk_bytes=10**12)  # fmt: skip
    assert response.status_code == 400
    assert response.json()["device_count"] == excinfo.value.message_dict["device_count"]


def test_a_failed_write_saves_nothing() -> None:
    """Row and many-to-many values are one transaction: a failure after the row is saved leaves no row."""
    vendor = VendorFactory()
    unsaved = Precision(slug="fp3")  # set() refuses an unsaved row, after the architecture was saved
    with pytest.raises(ValueError):
        services.architecture_create(slug="arch-x", name="Arch X", family="X", vendor=vendor, precisions=[unsaved])
    assert not Architecture.objects.filter(slug="arch-x").exists()


def test_unknown_fields_are_named_and_the_serializer_saves_through_the_services() -> None:
    accelerator = AcceleratorFactory()
    with pytest.raises(TypeError, match=r"no writable field.*memory_gb"):
        services.accelerator_update(accelerator=accelerator, memory_gb=80)
    # the serializer's save() is the service: the rule only the service holds applies to it too
    serializer = AcceleratorSerializer(instance=accelerator, data={"usable_memory_bytes": USABLE}, partial=True)
    assert serializer.is_valid(), serializer.errors
    with pytest.raises(ValidationError) as excinfo:
        serializer.save()
    assert "needs a source" in excinfo.value.message_dict["usable_memory_source"][0]
    stored = Accelerator.objects.get(pk=accelerator.pk)  # nothing was kept
    assert stored.usable_memory_bytes is None
    serializer = AcceleratorSerializer(instance=stored, data={"notes": "x"}, partial=True)
    assert serializer.is_valid(), serializer.errors
    serializer.save()
    stored.refresh_from_db()
    assert stored.notes == "x"


def test_the_heartbeat_writes_nodes_through_the_node_services() -> None:
    configuration = ConfigurationFactory(device_count=1, nvlink_domain_size=1)  # one 80 GB device
    node = node_heartbeat_record("n7", nvml_inventory(gpu(0)))
    assert node.verified_usable_memory_bytes == USABLE and node.last_heartbeat_at is not None
    assert node.configuration_id == configuration.pk  # a new node is matched once, on creation
    staff_choice = ConfigurationFactory()
    services.node_update(node=node, configuration=staff_choice)  # staff assign it (admin or API)
    again = node_heartbeat_record("n7", nvml_inventory(gpu(0), gpu(1)))
    assert (again.pk, again.device_count, again.configuration_id) == (node.pk, 2, staff_choice.pk)
    assert Node.objects.filter(name="n7").count() == 1
    with pytest.raises(ValidationError):  # the node services validate the row as any other door's write
        services.node_update(node=again, probe="quantum", last_heartbeat_at=timezone.now())
