"""The project's settings with one change, for the load benchmark only: ``/bench/ping`` exists (``urls``).

Used as ``DJANGO_SETTINGS_MODULE=benchmarks.load.settings`` by the gunicorn the benchmark starts; the
product's own settings and URLs are untouched.
"""

from vramplan.settings import *  # noqa: F403

ROOT_URLCONF = "benchmarks.load.urls"
