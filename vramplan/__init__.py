"""vramplan: will this workload fit on that hardware, and how do you know?"""

from .celery import app as celery_app

__all__ = ("celery_app",)
