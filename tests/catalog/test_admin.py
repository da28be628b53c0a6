"""The catalog admin: pages load, memory shows in GB and GiB, and query counts do not grow with rows."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

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
def staff_client(client, admin_user):  # type: ignore[no-untyped-def]
    client.force_login(admin_user)
    return client


def _queries(client, url: str) -> int:  # type: ignore[no-untyped-def]
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200, url
    return len(ctx.captured_queries)


@pytest.mark.parametrize("url", CHANGELISTS)
def test_changelist_query_count_is_constant_as_rows_grow(staff_client, url) -> None:  # type: ignore[no-untyped-def]
    NodeFactory.create_batch(2)
    few = _queries(staff_client, url)
    # Ten times the rows, each on its own accelerator, architecture and configuration.
    NodeFactory.create_batch(20)
    many = _queries(staff_client, url)
    assert many == few, f"{url}: {few} queries with few rows, {many} with many"


def test_changelists_load_the_real_catalog_and_show_both_units(staff_client, catalog) -> None:  # type: ignore[no-untyped-def]
    for url in CHANGELISTS:
        assert staff_client.get(url).status_code == 200, url
    page = staff_client.get("/admin/catalog/configuration/?memory_band=80-160").content.decode()
    assert " GB (" in page and " GiB)" in page
    accelerators = staff_client.get("/admin/catalog/accelerator/?q=H100").content.decode()
    assert "H100" in accelerators and "source" in accelerators


@pytest.mark.parametrize(
    "query",
    ["memory_band=lt24", "memory_band=160plus", "driver_branch=550", "kind__exact=cpu", "q=H200"],
)
def test_configuration_filters_work(staff_client, catalog, query) -> None:  # type: ignore[no-untyped-def]
    assert staff_client.get(f"/admin/catalog/configuration/?{query}").status_code == 200


def test_change_forms_load(staff_client) -> None:  # type: ignore[no-untyped-def]
    config = ConfigurationFactory()
    accelerator = AcceleratorFactory()
    assert staff_client.get(f"/admin/catalog/configuration/{config.pk}/change/").status_code == 200
    assert staff_client.get(f"/admin/catalog/accelerator/{accelerator.pk}/change/").status_code == 200
