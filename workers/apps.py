from django.apps import AppConfig


class WorkersConfig(AppConfig):
    """Celery tasks and the node agent; the probes and runner beneath it are pure Python."""

    name = "workers"
    verbose_name = "Workers and nodes"
