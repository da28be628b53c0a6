"""Every catalog list answers in a fixed number of queries, however many rows it returns (issue 9, item 4).

Counted on a small catalog and again on one with several times the rows; an N+1 (a relation read per
row) makes the second count grow. ``benchmarks.load`` prints the same counts on the real catalog.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.factories import ArchitectureFactory, ConfigurationFactory, NodeFactory

pytestmark = pytest.mark.django_db

LISTS = ["architectures", "accelerators", "configurations", "nodes"]


def grow(times: int) -> None:
    """``times`` more rows of each kind, each with its own architecture, accelerator and precisions."""
    for _ in range(times):
        configuration = ConfigurationFactory(accelerator__architecture=ArchitectureFactory(precisions=["bf16", "fp8"]))
        NodeFactory(configuration=configuration, verified_usable_memory_bytes=79 * 10**9)
    ConfigurationFactory(kind="cpu", accelerator=None, host_cpu_architecture="x86_64", host_ram_bytes=2**36)


def queries(api, name: str) -> tuple[int, int]:
    """(rows returned, queries run) for one request of every row of list ``name``."""
    url = f"/api/v1/{name}/?limit=500"
    api.get(url)  # the first request of a test also reads content types and warms the throttle
    with CaptureQueriesContext(connection) as captured:
        response = api.get(url)
    assert response.status_code == 200, response.json()
    return len(response.json()["results"]), len(captured.captured_queries)


@pytest.mark.parametrize("name", LISTS)
def test_a_catalog_list_runs_the_same_queries_for_three_rows_and_for_thirty(api, name: str) -> None:
    grow(3)
    small_rows, small = queries(api, name)
    grow(27)
    large_rows, large = queries(api, name)
    assert large_rows > 2 * small_rows >= 6
    assert large == small, f"{name}: {small} queries for {small_rows} rows, {large} for {large_rows}"
    assert small <= 4  # the token, the count, the page, one prefetch at most
