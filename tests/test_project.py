"""Project-level checks: the OpenAPI schema validates, settings fail fast, services are the real ones."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection

from tests.conftest import skip_or_fail

ROOT = Path(__file__).resolve().parent.parent


def test_openapi_schema_validates_without_warnings(tmp_path) -> None:
    out = tmp_path / "openapi.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    text = out.read_text()
    for path in ("/api/v1/configurations/", "/api/v1/accelerators/", "/api/v1/nodes/"):
        assert path in text
    for code in ("'400'", "'401'", "'403'", "'404'"):
        assert code in text


@pytest.mark.django_db
def test_docs_page_needs_no_cdn(admin_client) -> None:
    page = admin_client.get("/api/docs/").content.decode()
    assert "swagger-ui" in page
    assert "cdn." not in page and "unpkg" not in page and "jsdelivr" not in page


def _settings_error(**env: str) -> str:
    prefixes = ("DJANGO_", "DATABASE_", "CELERY_", "API_", "LOG_", "VRAMPLAN_", "NODE_")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django, os; os.environ['DJANGO_SETTINGS_MODULE']='vramplan.settings'; django.setup()",
        ],
        env={**clean, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0, "settings accepted a bad value"
    return result.stderr


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"DJANGO_DEBUG": "0"}, "DJANGO_SECRET_KEY"),
        ({"DJANGO_DEBUG": "banana"}, "DJANGO_DEBUG"),
        ({"DJANGO_DEBUG": "1", "DATABASE_URL": "mysql2://nowhere/x"}, "DATABASE_URL"),
        ({"DJANGO_DEBUG": "1", "CELERY_BROKER_URL": "amqp://guest@localhost//"}, "CELERY_BROKER_URL"),
        ({"DJANGO_DEBUG": "1", "ALLOWED_HOSTS": "a,,b"}, "ALLOWED_HOSTS"),
        ({"DJANGO_DEBUG": "1", "API_THROTTLE_RATE": "banana"}, "API_THROTTLE_RATE"),
        ({"DJANGO_DEBUG": "1", "LOG_LEVEL": "loud"}, "LOG_LEVEL"),
        ({"DJANGO_DEBUG": "1", "VRAMPLAN_FIXTURES_DIR": "/nowhere"}, "VRAMPLAN_FIXTURES_DIR"),
        ({"DJANGO_DEBUG": "1", "NODE_HEARTBEAT_SECONDS": "1"}, "NODE_HEARTBEAT_SECONDS"),
    ],
)
@pytest.mark.slow
def test_bad_settings_fail_at_start_naming_the_variable(env, variable) -> None:
    assert variable in _settings_error(**env)


@pytest.mark.services
def test_database_is_postgresql_when_configured() -> None:
    if not os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")):
        skip_or_fail("DATABASE_URL does not point at PostgreSQL")
    assert connection.vendor == "postgresql"


@pytest.mark.services
def test_redis_broker_answers() -> None:
    url = os.environ.get("CELERY_BROKER_URL", "")
    if not url.startswith("redis://"):
        skip_or_fail("CELERY_BROKER_URL does not point at Redis")
    import redis

    assert redis.Redis.from_url(url).ping()


def test_no_module_of_the_measuring_half_is_over_500_lines() -> None:
    """The measuring services stay split by sub-domain (orders, jobs, nodes, evidence, states), none a hub again."""
    package = Path(__file__).resolve().parents[1] / "measurements"
    sizes = {p.relative_to(package).as_posix(): len(p.read_text().splitlines()) for p in package.rglob("*.py")}
    assert sizes and {name: n for name, n in sizes.items() if n > 500} == {}
