"""The job state machine under the faults a worker meets: late results, bad documents, dead workers."""

from __future__ import annotations

import pytest

from measurements import services
from measurements.models import AcceptanceJob, Measurement

from .helpers import claimed_job, measurement_document

pytestmark = pytest.mark.django_db


@pytest.fixture
def running(api):
    """A job claimed by node n1 (attempt 1)."""
    return claimed_job(api)


def test_a_late_result_of_a_reaped_attempt_does_not_end_the_next_one(running) -> None:
    claimed, node = running
    assert services.acceptance_jobs_reap(stale_s=0)["requeued"] == 1  # the node looked silent
    again = services.acceptance_job_claim(claimed.job_id, node.name)
    assert again is not None and again.attempt == 2

    late = services.acceptance_job_finish(claimed.job_id, node.name, 1, measurement_document())
    assert late is None and not Measurement.objects.exists()
    assert services.acceptance_job_progress(claimed.job_id, node.name, 1, "decode", 50) is True  # stop, old run
    assert services.acceptance_job_progress(claimed.job_id, node.name, 2, "decode", 50) is False
    assert services.acceptance_job_finish(claimed.job_id, node.name, 2, measurement_document()) is not None
    assert AcceptanceJob.objects.get().status == "succeeded"


def test_an_invalid_document_ends_the_job_with_the_reason_instead_of_looping(running) -> None:
    claimed, node = running
    bad = measurement_document(duration_seconds=float("-1"))
    assert services.acceptance_job_finish(claimed.job_id, node.name, claimed.attempt, bad) is None
    job = AcceptanceJob.objects.get()
    assert (job.status, job.failure_kind) == ("failed", "error")
    assert "duration_seconds" in job.error


def test_a_cancelled_job_whose_worker_died_ends_cancelled_not_queued(api, running) -> None:
    claimed, _ = running
    assert api.post(f"/api/v1/acceptance-jobs/{claimed.job_id}/cancel/").json()["cancel_requested"] is True
    services.acceptance_jobs_reap(stale_s=0)
    job = AcceptanceJob.objects.get()
    assert (job.status, job.failure_kind) == ("cancelled", "cancelled")


def test_a_busy_node_gets_no_second_job_even_from_a_second_dispatcher(api, running) -> None:
    order_id = AcceptanceJob.objects.get().order_id
    second = api.post(f"/api/v1/orders/{order_id}/acceptance-jobs/", {}, format="json").json()
    assert second["node"] is None
    assert services.acceptance_jobs_dispatch() == 0
    assert AcceptanceJob.objects.get(pk=second["id"]).node is None


def test_every_job_status_change_follows_the_job_table(running) -> None:
    claimed, node = running
    job = AcceptanceJob.objects.get()
    assert services.acceptance_job_finish(claimed.job_id, node.name, claimed.attempt, measurement_document())
    job.refresh_from_db()
    assert job.status == "succeeded"
    # a final job changes no more, whoever asks: the table says what is allowed
    with pytest.raises(services.ServiceError, match="a job that is 'succeeded' cannot become 'running'; allowed: none"):
        services.job_transition(job, "running")
    job.refresh_from_db()
    assert job.status == "succeeded"


def test_the_job_table_covers_every_status_and_ends_in_final_ones() -> None:
    from measurements.acceptance import JOB_TRANSITIONS
    from measurements.choices import JobStatus

    assert set(JOB_TRANSITIONS) == set(JobStatus.values)
    assert all(new in JobStatus.values for targets in JOB_TRANSITIONS.values() for new in targets)
    assert {s for s, targets in JOB_TRANSITIONS.items() if not targets} == {"succeeded", "failed", "cancelled"}
