"""Production settings: ``manage.py check --deploy`` is clean, secrets come only from the environment.

Each check runs ``manage.py`` in a subprocess with an environment built from scratch (the caller's
``DJANGO_*``, ``SECURE_*``, ... variables are dropped), so the settings module is read exactly as a
production process would read it. ``check`` connects to no database or cache.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The variables settings.py reads; any of them in the caller's environment would leak into the check.
SETTINGS_PREFIXES = ("DJANGO_", "DATABASE_", "CELERY_", "CACHE_", "API_", "LOG_", "VRAMPLAN_", "NODE_", "SECURE_",
                     "SESSION_", "CSRF_", "ALLOWED_", "USE_X_", "DATA_UPLOAD_", "STATIC_", "ACCEPTANCE_")  # fmt: skip

PRODUCTION = {
    "DJANGO_DEBUG": "0",
    "DJANGO_SECRET_KEY": secrets.token_urlsafe(64),
    "ALLOWED_HOSTS": "vramplan.example.org",
    "CSRF_TRUSTED_ORIGINS": "https://vramplan.example.org",
    "DATABASE_URL": "postgres://vramplan@db.example.org:5432/vramplan",
    "CELERY_BROKER_URL": "redis://redis.example.org:6379/0",  # the throttle cache is shared through it
    # TLS ends at a proxy that sets X-Forwarded-Proto; the app still redirects plain HTTP and sends HSTS.
    "USE_X_FORWARDED_PROTO": "1",
    "SECURE_SSL_REDIRECT": "1",
    "SECURE_HSTS_SECONDS": "31536000",
    "SECURE_HSTS_PRELOAD": "1",
}


pytestmark = pytest.mark.slow  # each check starts manage.py in a subprocess


def manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(SETTINGS_PREFIXES)}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        env={**clean, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_with_production_settings() -> None:
    result = manage("check", "--deploy", "--fail-level", "WARNING", **PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_check_deploy_names_what_a_bare_production_environment_misses() -> None:
    """The same check fails without the TLS settings or a shared cache: it is not clean by accident."""
    bare = {k: PRODUCTION[k] for k in ("DJANGO_DEBUG", "DJANGO_SECRET_KEY", "ALLOWED_HOSTS")}
    result = manage("check", "--deploy", "--fail-level", "WARNING", **bare)
    assert result.returncode != 0
    for check in ("security.W004", "security.W008", "vramplan.W001"):  # HSTS, HTTPS redirect, per-process throttles
        assert check in result.stderr, check
    weak = manage("check", "--deploy", "--fail-level", "WARNING", **{**PRODUCTION, "DJANGO_SECRET_KEY": "short"})
    assert weak.returncode != 0 and "security.W009" in weak.stderr


def test_production_settings_without_a_secret_key_refuse_to_start() -> None:
    for key in ({"DJANGO_SECRET_KEY": ""}, {}):
        env = {k: v for k, v in PRODUCTION.items() if k != "DJANGO_SECRET_KEY"} | key
        result = manage("check", **env)
        assert result.returncode != 0
        assert "ImproperlyConfigured" in result.stderr and "DJANGO_SECRET_KEY is required" in result.stderr


def test_the_secret_key_is_the_environments_and_debug_keeps_the_embedded_default() -> None:
    """With debug off the key is exactly the variable; `make run` (DJANGO_DEBUG=1, nothing else) still starts."""
    probe = "from django.conf import settings; print(settings.SECRET_KEY, settings.CACHES['default']['BACKEND'])"
    result = manage("shell", "--no-imports", "-c", probe, **PRODUCTION)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [PRODUCTION["DJANGO_SECRET_KEY"], "vramplan.cache.RedisCache"]
    embedded = manage("shell", "--no-imports", "-c", probe, DJANGO_DEBUG="1")
    assert embedded.returncode == 0, embedded.stderr
    assert embedded.stdout.split()[1] == "django.core.cache.backends.locmem.LocMemCache"  # no server needed
