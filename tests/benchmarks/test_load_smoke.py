"""``python -m benchmarks.load`` end to end, made small: one second of wrk on ``/bench/ping`` under gunicorn,
the query counts of the catalog lists, and five tiny acceptance jobs drained by two real Celery workers, each
job running the staff program the benchmark registers (``loadbench-tiny``) in a real, sampled child.

Runs against this test's PostgreSQL database and Redis broker (skipped without them, failed under
REQUIRE_SERVICES=1), and needs ``wrk``. About half a minute (the workers' start, the migrations' check).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
import redis
from django.conf import settings
from django.db import connection

from benchmarks.load.__main__ import parse
from benchmarks.load.common import GENEROUS_RATE, django_env
from benchmarks.load.django_side import TINY_PROGRAM_SLUG
from measurements.models import AcceptanceJob, Measurement
from tests.conftest import skip_or_fail

pytestmark = [pytest.mark.services, pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[2]
NUMBER = r"([0-9]+(?:\.[0-9]+)?)"


def require_services() -> None:
    if connection.vendor != "postgresql":
        skip_or_fail(f"the database is {connection.vendor}, not PostgreSQL (set DATABASE_URL=postgres://...)")
    broker = settings.CELERY_BROKER_URL
    if not broker.startswith(("redis://", "rediss://")):
        skip_or_fail(f"CELERY_BROKER_URL is {broker.split('://')[0]}://, not Redis (set redis://HOST:PORT/DB)")
    try:
        redis.Redis.from_url(broker, socket_connect_timeout=3).ping()
    except redis.RedisError as exc:
        skip_or_fail(f"Redis at CELERY_BROKER_URL is not reachable ({exc})")
    if shutil.which("wrk") is None:
        skip_or_fail("wrk is not installed (apt-get install wrk)")


def database_url() -> str:
    """The URL of the database this test runs in (pytest-django's ``test_<name>``), for the benchmark."""
    db = connection.settings_dict
    credentials = quote(db["USER"] or "", safe="") + (":" + quote(db["PASSWORD"], safe="") if db["PASSWORD"] else "")
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgres://{credentials}@{db['HOST'] or 'localhost'}{port}/{quote(db['NAME'], safe='')}"


def test_the_load_benchmark_runs_small_and_reports_no_errors(transactional_db, tmp_path: Path) -> None:
    require_services()
    database = database_url()
    report = tmp_path / "load.json"
    argv = [sys.executable, "-m", "benchmarks.load", "--database-url", database, "--jobs-database-url", database,
            "--broker-url", settings.CELERY_BROKER_URL, "--duration", "1", "--endpoints", "ping",
            "--gunicorn-workers", "2", "--jobs", "5", "--job-workers", "2", "--jobs-timeout", "240",
            "--json", str(report)]  # fmt: skip
    result = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=480, check=False)
    output = result.stdout
    assert result.returncode == 0, f"exit {result.returncode}\n{output}\n{result.stderr[-3000:]}"

    ping = re.search(rf"^ping\s+GET /bench/ping\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+(\d+)\s+{NUMBER}", output, re.M)
    assert ping, output
    rps, p50, p99, errors, ratio = ping.groups()
    assert float(rps) > 0 and 0 < float(p50) <= float(p99)
    assert int(errors) == 0 and float(ratio) == 1.0
    calibration = re.search(r"^Calibration of the benchmark user's recommendations \((\d+) measurements, (\d+) records",
                            output, re.M)  # fmt: skip
    assert calibration and int(calibration.group(1)) == 100 and int(calibration.group(2)) > 0, output
    assert re.search(r"^Garbage collections per ranking: threshold 700: [0-9.]+ young", output, re.M), output
    # another account's requests beside the benchmark user's training recommendations: answered, and refused for
    # the benchmark user beyond one at a time
    held = re.search(r"^Another account beside .*\((\d+) ms each; (\d+) sent on \d+ connections, (\d+) answered 429.*"
                     r" (\d+) errors: (within|OUTSIDE)", output, re.M)  # fmt: skip
    assert held, output
    assert int(held.group(1)) > 0 and int(held.group(3)) > 0 and int(held.group(4)) == 0
    for name in ("architectures", "accelerators", "configurations", "nodes"):
        counts = re.search(rf"^{name}\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+within \(constant\)$", output, re.M)
        assert counts, f"{name}: {output}"
        small_rows, small, large_rows, large = map(int, counts.groups())
        assert large_rows > small_rows >= 1 and small == large
    jobs = re.search(r"jobs/s ([0-9.]+).*\n.*final states: queued 0, running 0, succeeded 5, failed 0, cancelled 0\n"
                     r"\s+lost 0  duplicated 0  decision inconsistent 0", output)  # fmt: skip
    assert jobs, output
    assert float(jobs.group(1)) > 0
    assert f"per program: {TINY_PROGRAM_SLUG}: 5" in output, output

    figures = json.loads(report.read_text())
    assert [e["errors"] for e in figures["http"]["endpoints"]] == [0]
    assert figures["jobs"]["states"]["succeeded"] == 5
    assert sum(figures["jobs"]["per_node"].values()) == 5 and len(figures["jobs"]["per_node"]) <= 2
    assert figures["jobs"]["program"] == "tiny" and figures["jobs"]["per_program"] == {TINY_PROGRAM_SLUG: 5}

    # Each job ran the registered program in a sampled child: one measurement, its command, what it held.
    jobs_run = AcceptanceJob.objects.filter(program__slug=TINY_PROGRAM_SLUG)
    assert jobs_run.count() == 5 and set(jobs_run.values_list("status", flat=True)) == {"succeeded"}
    measurements = Measurement.objects.filter(job__in=jobs_run)
    assert measurements.count() == 5
    for measurement in measurements:
        assert measurement.outcome == "succeeded" and measurement.document["command"][1] == "-c"
        assert measurement.host_rss_peak_bytes >= 16 << 20  # the program holds 16 MiB
        assert measurement.order.decided_by_id == measurement.pk


def test_the_jobs_part_runs_the_tiny_program_unless_told_synthetic() -> None:
    common = ["--database-url", "postgres://u@h:5432/db", "--broker-url", "redis://h:6379/0"]
    assert parse(common).program == "tiny"
    assert parse([*common, "--program", "synthetic"]).program == "synthetic"
    with pytest.raises(SystemExit):
        parse([*common, "--program", "vllm"])


def test_the_benchmark_lifts_every_throttle_rate_the_settings_read() -> None:
    """Every scope's rate, as the settings read it in the benchmark's environment, is the generous one: a
    scope left at its default would turn the run into a count of 429s (the recommend scope once did)."""
    env = django_env("postgres://u@h:5432/db", None)
    code = ("import json, django; django.setup(); from django.conf import settings; "
            "print(json.dumps(settings.REST_FRAMEWORK['DEFAULT_THROTTLE_RATES']))")  # fmt: skip
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                            timeout=120, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    rates = json.loads(result.stdout)
    assert {"user", "estimate", "recommend", "job_start"} <= set(rates)
    assert set(rates.values()) == {GENEROUS_RATE}, rates
