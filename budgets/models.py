"""Stored workloads and their latest budget. The estimate itself lives in the pure ``budgets.engine``."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class WorkloadTask(models.TextChoices):
    INFERENCE = "inference", "Inference"
    TRAINING = "training", "Training"
    CUSTOM = "custom", "Custom"


class WorkloadQuerySet(models.QuerySet):
    def visible_to(self, user) -> WorkloadQuerySet:
        """Owners see their own workloads, staff see all: another user's workload is a 404."""
        return self if user.is_staff else self.filter(owner=user)


class Workload(models.Model):
    """A workload description as the user sent it (validated), and the budget last estimated for it."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="workloads")
    name = models.CharField(max_length=200)
    task = models.CharField(max_length=16, choices=WorkloadTask.choices)
    model_label = models.CharField(max_length=200, blank=True, help_text="Preset id or model type, for lists.")
    description = models.JSONField(help_text="The workload in the v1 contract, with defaults filled in.")
    budget = models.JSONField(null=True, blank=True, help_text="The latest budget (the contract's object).")
    peak_bytes = models.BigIntegerField(null=True, blank=True, help_text="Expected per-device peak (bytes).")
    device_count = models.PositiveIntegerField(default=1)
    estimated_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = WorkloadQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                name="workload_peak_non_negative", condition=Q(peak_bytes__isnull=True) | Q(peak_bytes__gte=0)
            ),
            models.CheckConstraint(name="workload_devices_positive", condition=Q(device_count__gte=1)),
        ]
        indexes = [models.Index(fields=["owner", "-created_at"])]

    def __str__(self) -> str:
        return self.name
