"""Two job starts that read a draft order together: one job, and the other a clear answer that spends none of
the job-start quota (issue 16, finding 7: the second failed on the draft → acceptance_pending transition the
first had already made, a 409 that named a transition, and it counted against the quota)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from django.utils import timezone

from budgets.services import workload_create
from catalog.models import Node
from measurements import services
from measurements.models import AcceptanceJob, Order
from tests.test_throttling import rates

from .helpers import TINY_CPU_WORKLOAD, cpu_configuration


@pytest.fixture
def order(user) -> Order:
    configuration = cpu_configuration()
    Node.objects.create(name="n1", configuration=configuration, last_heartbeat_at=timezone.now())
    workload = workload_create(owner=user, data=TINY_CPU_WORKLOAD)
    return services.order_create(owner=user, workload=workload, configuration=configuration)


@pytest.mark.django_db
def test_a_start_on_a_status_read_before_another_start_is_refused_clearly(order) -> None:
    first, second = Order.objects.get(pk=order.pk), Order.objects.get(pk=order.pk)  # both read "draft"
    services.acceptance_job_start(first)
    with pytest.raises(services.ConcurrentStart, match="became 'acceptance_pending' while this job was being started"):
        services.acceptance_job_start(second)
    assert AcceptanceJob.objects.filter(order=order).count() == 1
    assert services.acceptance_job_start(Order.objects.get(pk=order.pk)).status == "queued"  # read afresh: fine


@pytest.mark.django_db
def test_the_losing_request_answers_409_and_keeps_its_job_start_quota(api, order, monkeypatch) -> None:
    real_start = services.acceptance_job_start

    def another_request_wins_first(stale: Order, **kwargs):
        monkeypatch.setattr(services, "acceptance_job_start", real_start)
        real_start(Order.objects.get(pk=stale.pk))  # the concurrent request, committed while this one ran
        return real_start(stale, **kwargs)

    monkeypatch.setattr(services, "acceptance_job_start", another_request_wins_first)
    url = f"/api/v1/orders/{order.pk}/acceptance-jobs/"
    with rates(job_start="1/minute"):
        lost = api.post(url, {}, format="json")
        assert lost.status_code == 409, lost.json()
        assert "nothing was started" in lost.json()["detail"]
        assert AcceptanceJob.objects.filter(order=order).count() == 1
        assert api.post(url, {}, format="json").status_code == 202  # the refused start spent no quota
        assert api.post(url, {}, format="json").status_code == 429


@pytest.mark.django_db(transaction=True)
def test_concurrent_starts_on_a_draft_order_make_one_job_and_no_transition_error(order) -> None:
    stale = [Order.objects.get(pk=order.pk) for _ in range(4)]
    barrier, answers = threading.Barrier(len(stale)), []

    def start(o: Order) -> None:
        barrier.wait()
        try:
            answers.append(services.acceptance_job_start(o).status)
        except services.ServiceError as exc:
            answers.append(type(exc).__name__)
        finally:
            connection.close()

    threads = [threading.Thread(target=start, args=(o,)) for o in stale]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(answers) == ["ConcurrentStart"] * 3 + ["queued"]
    assert AcceptanceJob.objects.filter(order=order).count() == 1
    assert Order.objects.get(pk=order.pk).status == "acceptance_pending"
