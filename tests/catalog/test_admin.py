"""The catalog admin: pages load, memory shows in GB and GiB, and query counts do not grow with rows."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from catalog.admin import DriverBranchFilter
from catalog.models import Configuration
from tests.factories import AcceleratorFactory, ConfigurationFactory, NodeFactory

pytestmark = pytest.mark.django_db

CHANGELISTS = [
    "/admin/catalog/accelerator/",
    "/admin/catalog/architecture/",
    "/admin/catalog/configuration/",
    "/admin/catalog/node/",
    "/admin/catalog/cudatoolkit/",
    "/admin/catalog/pytorchwheel/",
    "/admin/catalog/vendor/",
    "/admin/catalog/precision/",
]


@pytest.fixture
def staff_client(client, admin_user):
    client.force_login(admin_user)
    return client


def _queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200, url
    return len(ctx.captured_queries)


@pytest.mark.parametrize("url", CHANGELISTS)
def test_changelist_query_count_is_constant_as_rows_grow(staff_client, url) -> None:
    NodeFactory.create_batch(2)
    few = _queries(staff_client, url)
    # Ten times the rows, each on its own accelerator, architecture and configuration.
    NodeFactory.create_batch(20)
    many = _queries(staff_client, url)
    assert many == few, f"{url}: {few} queries with few rows, {many} with many"


def test_changelists_load_the_real_catalog_and_show_both_units(staff_client, catalog) -> None:
    for url in CHANGELISTS:
        assert staff_client.get(url).status_code == 200, url
    page = staff_client.get("/admin/catalog/configuration/?memory_band=80-160").content.decode()
    assert " GB (" in page and " GiB)" in page
    accelerators = staff_client.get("/admin/catalog/accelerator/?q=H100").content.decode()
    assert "H100" in accelerators and "source" in accelerators


def _rows(client, query: str) -> list[Configuration]:
    response = client.get(f"/admin/catalog/configuration/?{query}")
    assert response.status_code == 200, query
    assert "e=1" not in response.get("Location", ""), query
    return list(response.context["cl"].queryset)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("memory_band=lt24", lambda c: c.per_device_memory_bytes < 24 * 10**9),
        ("memory_band=160plus", lambda c: c.per_device_memory_bytes >= 160 * 10**9),
        ("driver_branch=550", lambda c: c.driver_version.startswith("550.") and c.kind == "gpu"),
        ("kind__exact=cpu", lambda c: c.kind == "cpu"),
        ("q=H200", lambda c: "H200" in c.name or (c.accelerator and "H200" in c.accelerator.name)),
    ],
)
def test_configuration_filters_return_the_matching_rows(staff_client, catalog, query, expected) -> None:
    rows = _rows(staff_client, query)
    everything = list(Configuration.objects.with_memory().select_related("accelerator__architecture__vendor"))
    wanted = {c.pk for c in everything if expected(c)}
    assert wanted, f"{query}: the fixtures should hold matching rows"
    assert {c.pk for c in rows} == wanted


def test_memory_band_counts_a_cpu_configuration_by_its_host_ram(staff_client, db) -> None:
    cpu = ConfigurationFactory(kind="cpu", accelerator=None, device_count=1, nvlink_domain_size=1, driver_version="")
    cpu.host_ram_bytes = 512 * 10**9
    cpu.save()
    gpu = ConfigurationFactory()  # 80 GB devices
    assert {c.pk for c in _rows(staff_client, "memory_band=160plus")} == {cpu.pk}
    assert cpu.pk not in {c.pk for c in _rows(staff_client, "memory_band=lt24")}
    assert gpu.pk in {c.pk for c in _rows(staff_client, "memory_band=80-160")}


def test_changelist_loads_with_a_blank_and_an_r550_nvidia_driver(staff_client, db) -> None:
    """One NVIDIA configuration with a blank or "R550" driver used to break the driver-branch filter (a 500)."""
    blank = ConfigurationFactory(driver_version="")
    branch_only = ConfigurationFactory(driver_version="R550")
    full = ConfigurationFactory(driver_version="550.54.15")
    other = ConfigurationFactory(driver_version="570.195.03")
    response = staff_client.get("/admin/catalog/configuration/")
    assert response.status_code == 200
    changelist = response.context["cl"]
    spec = next(f for f in changelist.filter_specs if isinstance(f, DriverBranchFilter))
    choices = [c["display"] for c in spec.choices(changelist)]
    assert "R550" in choices and "R570" in choices
    assert {c.pk for c in _rows(staff_client, "driver_branch=550")} == {branch_only.pk, full.pk}
    assert {c.pk for c in _rows(staff_client, "driver_branch=570")} == {other.pk}
    assert blank.pk in {c.pk for c in _rows(staff_client, "")}
    assert staff_client.get(f"/admin/catalog/configuration/{blank.pk}/change/").status_code == 200
    bad = staff_client.get("/admin/catalog/configuration/?driver_branch=R%C2%B2")
    assert bad.status_code == 302 and "e=1" in bad["Location"]


def test_change_forms_load(staff_client) -> None:
    config = ConfigurationFactory()
    accelerator = AcceleratorFactory()
    assert staff_client.get(f"/admin/catalog/configuration/{config.pk}/change/").status_code == 200
    assert staff_client.get(f"/admin/catalog/accelerator/{accelerator.pk}/change/").status_code == 200
