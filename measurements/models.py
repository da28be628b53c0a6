"""Orders, acceptance jobs, registered programs and measurements.

The database is the source of truth for jobs, not the broker: a job is a row whose status a worker
claims atomically, a reaper re-queues it when its node goes silent, and a measurement is an immutable
row attached to its order (and job). Orders live here rather than in ``catalog`` because an order
binds a workload (``budgets``) to a configuration (``catalog``), and the catalog depends on neither.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from budgets.models import Workload
from catalog.models import Configuration, Node

from .choices import FailureKind, JobStatus, MeasurementSource, OrderStatus


class OwnedQuerySet(models.QuerySet):
    owner_path = "owner"

    def visible_to(self, user) -> OwnedQuerySet:
        """Owners see their own, staff see all: another user's row is a 404."""
        return self if user.is_staff else self.filter(**{self.owner_path: user})


class OrderQuerySet(OwnedQuerySet):
    owner_path = "owner"


class Order(models.Model):
    """A workload ordered on a configuration; a measurement on it decides it."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="orders")
    workload = models.ForeignKey(Workload, on_delete=models.PROTECT, related_name="orders")
    configuration = models.ForeignKey(Configuration, on_delete=models.PROTECT, related_name="orders")
    status = models.CharField(max_length=24, choices=OrderStatus.choices, default=OrderStatus.DRAFT)
    budget = models.JSONField(help_text="The budget the order was placed with (the contract's object).")
    min_headroom_fraction = models.FloatField(help_text="From the workload's acceptance criteria.")
    max_ms_per_output_token = models.FloatField(null=True, blank=True)
    decision = models.JSONField(null=True, blank=True, help_text="The sentence and its numbers.")
    recommended_verdict = models.CharField(
        max_length=16, blank=True, help_text="The recommender's verdict for this configuration when it was ordered."
    )
    recommended_reasons = models.JSONField(
        default=list, blank=True, help_text="Its reasons then: [{rule, message, action}, ...]."
    )
    override_reason = models.TextField(
        blank=True, help_text="Why an `unsupported` configuration was ordered anyway (required for one)."
    )
    decided_by = models.ForeignKey(
        "Measurement", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    upload_token_hash = models.CharField(max_length=64, blank=True, editable=False)
    upload_token_created_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = OrderQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                name="order_headroom_fraction_range",
                condition=Q(min_headroom_fraction__gte=0) & Q(min_headroom_fraction__lt=1),
            ),
            models.CheckConstraint(name="order_status_valid", condition=Q(status__in=OrderStatus.values)),
        ]
        indexes = [models.Index(fields=["owner", "-created_at"])]

    def __str__(self) -> str:
        return f"#{self.pk} ({self.workload} on {self.configuration})"


class RegisteredProgram(models.Model):
    """A program staff allow acceptance jobs to run: an argv template with named placeholders.

    Placeholders (``{max_model_len}``) are filled per argument from the validated workload, never
    through a shell; users choose a program by slug, they never send a command.
    """

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=128)
    description = models.TextField(blank=True)
    argv_template = models.JSONField(
        help_text='A list of strings, e.g. ["python3", "-m", "pkg", "--len", "{max_model_len}"].'
    )
    allowed_configurations = models.ManyToManyField(Configuration, related_name="programs", blank=True)
    time_limit_seconds = models.PositiveIntegerField(default=3600)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(
                name="program_time_limit_range",
                condition=Q(time_limit_seconds__gte=1) & Q(time_limit_seconds__lte=7 * 86_400),
            )
        ]

    def __str__(self) -> str:
        return self.slug


class JobQuerySet(OwnedQuerySet):
    owner_path = "order__owner"


class AcceptanceJob(models.Model):
    """One acceptance run of an order on a node of its configuration: a row, claimed atomically."""

    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="jobs")
    program = models.ForeignKey(RegisteredProgram, null=True, blank=True, on_delete=models.PROTECT, related_name="jobs")
    expandable_segments = models.BooleanField(
        default=False, help_text="Run with PYTORCH_ALLOC_CONF=expandable_segments:True."
    )
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.QUEUED)
    failure_kind = models.CharField(max_length=16, choices=FailureKind.choices, blank=True)
    error = models.TextField(blank=True)
    attempt = models.PositiveSmallIntegerField(default=0, help_text="Deliveries claimed so far.")
    max_attempts = models.PositiveSmallIntegerField(default=3)
    time_limit_seconds = models.PositiveIntegerField(default=3600)
    progress_phase = models.CharField(max_length=32, blank=True)
    progress_percent = models.FloatField(default=0)
    node = models.ForeignKey(Node, null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs")
    cancel_requested = models.BooleanField(default=False)
    queued_at = models.DateTimeField(auto_now_add=True)
    dispatched_at = models.DateTimeField(null=True, blank=True, help_text="Last time its message was sent.")
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="Last progress from the running worker.")
    finished_at = models.DateTimeField(null=True, blank=True)
    launch = models.JSONField(
        default=dict,
        blank=True,
        help_text="The recommended launch its program runs, as recorded when it started: the recommender's entry for "
        "the order's configuration (verdict, plan, launch command), the placeholder values filled from it and the "
        "budget of that plan; empty for the synthetic run or a program that takes no engine setting.",
    )

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-queued_at", "-id"]
        constraints = [
            models.CheckConstraint(name="job_status_valid", condition=Q(status__in=JobStatus.values)),
            models.CheckConstraint(
                name="job_progress_percent_range", condition=Q(progress_percent__gte=0) & Q(progress_percent__lte=100)
            ),
            models.CheckConstraint(name="job_max_attempts_positive", condition=Q(max_attempts__gte=1)),
            # One job at a time per node: at most one running row names a node.
            models.UniqueConstraint(fields=["node"], condition=Q(status="running"), name="job_one_running_per_node"),
        ]
        indexes = [models.Index(fields=["status", "node"])]

    def __str__(self) -> str:
        return f"job {self.pk} ({self.status})"


class MeasurementQuerySet(OwnedQuerySet):
    owner_path = "order__owner"


class Measurement(models.Model):
    """An immutable measured run attached to an order: every view, the conditions, and the comparison."""

    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="measurements")
    job = models.OneToOneField(
        AcceptanceJob, null=True, blank=True, on_delete=models.SET_NULL, related_name="measurement"
    )
    source = models.CharField(max_length=8, choices=MeasurementSource.choices)
    upload_key = models.CharField(max_length=64, help_text="The run id: posting the same run twice stores it once.")
    node = models.ForeignKey(Node, null=True, blank=True, on_delete=models.SET_NULL, related_name="measurements")
    outcome = models.CharField(max_length=16)
    device_used_peak_bytes = models.BigIntegerField(null=True, blank=True)
    framework_allocated_peak_bytes = models.BigIntegerField(null=True, blank=True)
    framework_reserved_peak_bytes = models.BigIntegerField(null=True, blank=True)
    host_rss_peak_bytes = models.BigIntegerField(null=True, blank=True)
    document = models.JSONField(help_text="The whole measurement document (vramplan-measurement/1).")
    budget = models.JSONField(null=True, blank=True, help_text="The budget it is compared with.")
    ratios = models.JSONField(default=dict, blank=True, help_text="measured / estimated per view.")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = MeasurementQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["order", "upload_key"], name="measurement_once_per_run"),
            *(
                models.CheckConstraint(name=f"measurement_{name}_non_negative", condition=Q(**{f"{name}__gte": 0}))
                for name in (
                    "device_used_peak_bytes",
                    "framework_allocated_peak_bytes",
                    "framework_reserved_peak_bytes",
                    "host_rss_peak_bytes",
                )
            ),
        ]

    def __str__(self) -> str:
        return f"measurement {self.pk} ({self.outcome})"

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None and not kwargs.get("force_insert"):
            raise ValueError("measurements are immutable: record a new one instead")
        super().save(*args, **kwargs)

    @property
    def provenance(self) -> str:
        """``node_verified`` (an acceptance job's run on a registered node), ``reviewed_upload`` or ``upload``
        (reported by the order's owner, not reviewed by staff)."""
        if self.source == MeasurementSource.JOB:
            return "node_verified"
        return "reviewed_upload" if hasattr(self, "review") else "upload"

    @property
    def peaks(self) -> dict[str, int | None]:
        return {
            "device_used": self.device_used_peak_bytes,
            "framework_reserved": self.framework_reserved_peak_bytes,
            "framework_allocated": self.framework_allocated_peak_bytes,
            "host_rss": self.host_rss_peak_bytes,
        }


class MeasurementReview(models.Model):
    """A staff member's review of an uploaded measurement: from then on it calibrates for every viewer, not only
    for its owner (``measurements.calibration``, provenance). The measurement itself stays immutable."""

    measurement = models.OneToOneField(Measurement, on_delete=models.CASCADE, related_name="review")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    note = models.TextField(blank=True, help_text="What was checked (the command line it ran, the hardware).")
    reviewed_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"review of measurement {self.measurement_id}"
