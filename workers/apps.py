from django.apps import AppConfig


class WorkersConfig(AppConfig):
    """Celery tasks and the node agent; the probes and runner beneath it are pure Python."""

    name = "workers"
    verbose_name = "Workers and nodes"

    def ready(self) -> None:
        # the measuring services send a job to its node through the sender registered here, so that they import
        # nothing of the Celery side (import-linter: "The measuring services do not import the workers' Celery side")
        from measurements.jobs import set_job_sender
        from workers.tasks import acceptance_job_send

        set_job_sender(acceptance_job_send)
