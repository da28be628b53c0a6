"""The measuring half's one write path for views, tasks, admin and commands, by sub-domain:

- ``orders``: placing an order, its status, its upload token;
- ``jobs``: acceptance jobs from start to end, dispatched to live nodes (``nodes``) through the sender the workers
  app registers, so nothing here imports the workers' Celery side;
- ``evidence``: measurements stored once per run, the decisions they make, and the calibration records they give;
- ``states``: both state machines, each written through its table (``acceptance``);
- ``errors``: what a request the current state does not allow is refused with.

This module only names them for callers; each lives in its own module.
"""

from __future__ import annotations

from .errors import ConcurrentStart, ServiceError, validation_message
from .evidence import (
    PROVENANCE_LABELS,
    calibration_records,
    measurement_record,
    order_decide,
    review_uploads,
    stored_budget,
    summary_of,
    trusted_measurements,
    workload_summary,
)
from .jobs import (
    ClaimedJob,
    acceptance_job_cancel,
    acceptance_job_claim,
    acceptance_job_fail,
    acceptance_job_finish,
    acceptance_job_progress,
    acceptance_job_start,
    acceptance_jobs_dispatch,
    acceptance_jobs_reap,
    program_validate_template,
    set_job_sender,
)
from .nodes import heartbeat_period_s, live_nodes, node_usable_memory_bytes, stale_after_s
from .orders import (
    order_cancel,
    order_confirm,
    order_create,
    order_need_bytes,
    order_upload_token_issue,
    order_upload_token_matches,
    upload_token_refusal,
)
from .states import job_transition, order_transition

__all__ = [
    "PROVENANCE_LABELS",
    "ClaimedJob",
    "ConcurrentStart",
    "ServiceError",
    "acceptance_job_cancel",
    "acceptance_job_claim",
    "acceptance_job_fail",
    "acceptance_job_finish",
    "acceptance_job_progress",
    "acceptance_job_start",
    "acceptance_jobs_dispatch",
    "acceptance_jobs_reap",
    "calibration_records",
    "heartbeat_period_s",
    "job_transition",
    "live_nodes",
    "measurement_record",
    "node_usable_memory_bytes",
    "order_cancel",
    "order_confirm",
    "order_create",
    "order_decide",
    "order_need_bytes",
    "order_transition",
    "order_upload_token_issue",
    "order_upload_token_matches",
    "program_validate_template",
    "review_uploads",
    "set_job_sender",
    "stale_after_s",
    "stored_budget",
    "summary_of",
    "trusted_measurements",
    "upload_token_refusal",
    "validation_message",
    "workload_summary",
]
