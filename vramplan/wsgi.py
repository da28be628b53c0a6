"""WSGI entry point (gunicorn vramplan.wsgi)."""

import gc
import os

from django.conf import settings
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "vramplan.settings")

application = get_wsgi_application()


def tune_garbage_collector(gen0_threshold: int) -> None:
    """Leave what start-up built (modules, settings, URL patterns) out of every later collection
    (``gc.freeze``), and collect the young generation every ``gen0_threshold`` net new container objects
    instead of every 700 (``settings.WEB_GC_GEN0_THRESHOLD``; 0 keeps Python's thresholds). Cyclic
    garbage waits at most that many objects longer, a few MB; requests pay for fewer collections."""
    gc.collect()
    gc.freeze()
    if gen0_threshold > 0:
        _, gen1, gen2 = gc.get_threshold()
        gc.set_threshold(gen0_threshold, gen1, gen2)


tune_garbage_collector(settings.WEB_GC_GEN0_THRESHOLD)
