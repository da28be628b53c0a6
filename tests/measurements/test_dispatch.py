"""``acceptance_jobs_dispatch``: which waiting job goes to which free node, and what a dispatch costs.

A dispatch runs after every finished job; with hundreds of jobs waiting it must not ask the database about
each of them.
"""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from catalog.models import Configuration, Node
from measurements import jobs, services
from measurements.models import AcceptanceJob, Order

from .helpers import TINY_CPU_WORKLOAD, cpu_configuration

pytestmark = pytest.mark.django_db


def order_on(api, configuration: Configuration) -> Order:
    workload = api.post("/api/v1/workloads/", TINY_CPU_WORKLOAD, format="json").json()
    order = api.post("/api/v1/orders/", {"workload": workload["id"], "configuration": configuration.slug},
                     format="json").json()  # fmt: skip
    return Order.objects.get(pk=order["id"])


def waiting_jobs(order: Order, count: int) -> list[AcceptanceJob]:
    """``count`` queued jobs nobody has, oldest first."""
    return [AcceptanceJob.objects.create(order=order) for _ in range(count)]


def second_configuration() -> Configuration:
    first = Configuration.objects.get(slug="cpu-test")
    first.pk = None
    first.slug, first.name = "cpu-test-2", "CPU only (second test shape)"
    first.save()
    return first


def live_node(name: str, configuration: Configuration) -> Node:
    return Node.objects.create(name=name, configuration=configuration, last_heartbeat_at=timezone.now())


def dispatch_queries() -> tuple[int, int]:
    with CaptureQueriesContext(connection) as queries:
        sent = services.acceptance_jobs_dispatch()
    return sent, len(queries.captured_queries)


def test_one_free_node_gets_the_oldest_job_and_the_cost_does_not_grow_with_the_queue(api) -> None:
    configuration = cpu_configuration()
    order = order_on(api, configuration)
    costs = []
    for waiting in (5, 60):
        AcceptanceJob.objects.all().delete()
        Node.objects.all().delete()
        jobs = waiting_jobs(order, waiting)
        node = live_node("n1", configuration)
        sent, queries = dispatch_queries()
        assert sent == 1
        assert list(AcceptanceJob.objects.exclude(node=None).values_list("pk", "node")) == [(jobs[0].pk, node.pk)]
        costs.append(queries)
    assert costs[0] == costs[1], f"queries with 5 and 60 waiting jobs: {costs}"


def test_with_every_node_busy_a_dispatch_reads_no_waiting_job(api) -> None:
    configuration = cpu_configuration()
    order = order_on(api, configuration)
    busy = live_node("n1", configuration)
    AcceptanceJob.objects.create(order=order, status="running", node=busy, attempt=1)
    costs = []
    for waiting in (5, 60):
        waiting_jobs(order, waiting)
        sent, queries = dispatch_queries()
        assert sent == 0
        costs.append(queries)
    assert costs[0] == costs[1], f"queries with 5 and 65 waiting jobs: {costs}"
    assert AcceptanceJob.objects.filter(status="queued", node=None).count() == 65


def test_a_free_node_is_not_held_up_by_older_jobs_of_another_configuration(api) -> None:
    first = cpu_configuration()
    second = second_configuration()
    busy = live_node("a1", first)
    older = order_on(api, first)
    AcceptanceJob.objects.create(order=older, status="running", node=busy, attempt=1)
    waiting_jobs(older, 10)
    newer = waiting_jobs(order_on(api, second), 1)[0]
    free = live_node("b1", second)

    assert services.acceptance_jobs_dispatch() == 1
    newer.refresh_from_db()
    assert newer.node == free
    assert AcceptanceJob.objects.filter(order=older, status="queued", node=None).count() == 10


def test_two_free_nodes_take_the_two_oldest_jobs_one_each(api) -> None:
    configuration = cpu_configuration()
    jobs = waiting_jobs(order_on(api, configuration), 3)
    nodes = [live_node("n1", configuration), live_node("n2", configuration)]
    live_node("n3", second_configuration())  # free, but of another configuration: no job for it

    assert services.acceptance_jobs_dispatch() == 2
    given = dict(AcceptanceJob.objects.exclude(node=None).values_list("pk", "node"))
    assert given == {jobs[0].pk: nodes[0].pk, jobs[1].pk: nodes[1].pk}


def test_a_silent_node_gets_no_job(api) -> None:
    configuration = cpu_configuration()
    jobs = waiting_jobs(order_on(api, configuration), 2)
    Node.objects.create(
        name="n1", configuration=configuration, last_heartbeat_at=timezone.now() - timezone.timedelta(hours=1)
    )

    assert services.acceptance_jobs_dispatch() == 0
    assert AcceptanceJob.objects.get(pk=jobs[0].pk).node is None


@pytest.mark.django_db(transaction=True)
def test_two_dispatchers_at_once_each_give_out_a_job(api) -> None:
    """A dispatcher locks only the jobs it gives out: while one holds its transaction open, another (a second
    worker's finished job) gives the next waiting job to the node that just came free."""
    configuration = cpu_configuration()
    jobs = waiting_jobs(order_on(api, configuration), 5)
    first_node = live_node("n1", configuration)
    dispatched, release = threading.Event(), threading.Event()
    given: list[int] = []

    def first_dispatcher() -> None:
        try:
            with transaction.atomic():
                given.append(services.acceptance_jobs_dispatch())
                dispatched.set()
                release.wait(timeout=30)  # the transaction stays open, its rows locked
        finally:
            connection.close()  # this thread's own connection

    thread = threading.Thread(target=first_dispatcher)
    thread.start()
    try:
        assert dispatched.wait(timeout=30)
        second_node = live_node("n2", configuration)
        assert services.acceptance_jobs_dispatch() == 1
        assert AcceptanceJob.objects.get(pk=jobs[1].pk).node == second_node
    finally:
        release.set()
        thread.join(timeout=30)
    assert given == [1]
    assert AcceptanceJob.objects.get(pk=jobs[0].pk).node == first_node
    assert AcceptanceJob.objects.filter(node=None).count() == 3


@pytest.mark.django_db(transaction=True)
def test_a_claim_waits_for_a_dispatcher_that_holds_its_row_instead_of_dropping_the_delivery(api) -> None:
    """A dispatcher's locking read of waiting jobs can keep a row locked to the end of its transaction
    without taking it; the node's worker, delivered that job meanwhile, must still claim it."""
    configuration = cpu_configuration()
    (job,) = waiting_jobs(order_on(api, configuration), 1)
    node = live_node("n1", configuration)
    assert services.acceptance_jobs_dispatch() == 1
    locked, release = threading.Event(), threading.Event()

    def dispatcher_holding_the_row() -> None:
        try:
            with transaction.atomic():
                list(AcceptanceJob.objects.select_for_update().filter(pk=job.pk))
                locked.set()
                release.wait(timeout=30)
        finally:
            connection.close()

    thread = threading.Thread(target=dispatcher_holding_the_row)
    thread.start()
    try:
        assert locked.wait(timeout=30)
        threading.Timer(0.5, release.set).start()
        claimed = services.acceptance_job_claim(job.pk, node.name)
    finally:
        release.set()
        thread.join(timeout=30)
    assert claimed is not None and claimed.attempt == 1
    assert AcceptanceJob.objects.get(pk=job.pk).status == "running"


@pytest.mark.django_db(transaction=True)
def test_a_dispatcher_whose_free_node_was_taken_meanwhile_gives_its_job_to_a_node_that_came_free(
    api, monkeypatch
) -> None:
    """Dispatcher A reads n1 free and locks the oldest job J1; n2's job ends; dispatcher B, skipping J1,
    gives J2 to n1. A must give J1 to n2, not leave it waiting for the next dispatch."""
    configuration = cpu_configuration()
    order = order_on(api, configuration)
    first, second = waiting_jobs(order, 2)
    n1, n2 = live_node("n1", configuration), live_node("n2", configuration)
    running = AcceptanceJob.objects.create(order=order, status="running", node=n2, attempt=1)
    paused, go = threading.Event(), threading.Event()
    real = jobs._lock_free_node

    def pausing(candidates, busy):
        if threading.current_thread().name == "dispatcher-a" and not paused.is_set():
            paused.set()
            go.wait(timeout=30)
        return real(candidates, busy)

    monkeypatch.setattr(jobs, "_lock_free_node", pausing)
    given: list[int] = []

    def dispatcher_a() -> None:
        try:
            given.append(services.acceptance_jobs_dispatch())
        finally:
            connection.close()

    thread = threading.Thread(target=dispatcher_a, name="dispatcher-a")
    thread.start()
    try:
        assert paused.wait(timeout=30)
        AcceptanceJob.objects.filter(pk=running.pk).update(status="succeeded")
        assert services.acceptance_jobs_dispatch() == 1  # dispatcher B
    finally:
        go.set()
        thread.join(timeout=30)
    assert given == [1]
    assert dict(AcceptanceJob.objects.filter(pk__in=[first.pk, second.pk]).values_list("pk", "node")) == {
        first.pk: n2.pk,
        second.pk: n1.pk,
    }
