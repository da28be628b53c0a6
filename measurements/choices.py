"""Choices for orders, acceptance jobs and measurements, in one place (STYLE.md §5)."""

from django.db import models


class OrderStatus(models.TextChoices):
    DRAFT = "draft", "Draft"
    ACCEPTANCE_PENDING = "acceptance_pending", "Acceptance pending"
    ACCEPTED = "accepted", "Accepted"
    REJECTED = "rejected", "Rejected"
    CONFIRMED = "confirmed", "Confirmed"
    CANCELLED = "cancelled", "Cancelled"


class JobStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


class FailureKind(models.TextChoices):
    OOM = "oom", "Out of memory (did not fit)"
    ERROR = "error", "Error"
    TIMEOUT = "timeout", "Past its time limit"
    INTERRUPTED = "interrupted", "Interrupted (node lost, attempts used up)"
    NO_NODE = "no_node", "No live node of the configuration"
    CANCELLED = "cancelled", "Cancelled"


class MeasurementSource(models.TextChoices):
    JOB = "job", "Acceptance job"
    UPLOAD = "upload", "Uploaded (vramplan-measure)"
