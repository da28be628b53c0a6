"""What both parts share: the environment of a Django subprocess, the database set-up, process handling."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[2]
#: DRF's throttle rates, high enough that no request of the benchmark is ever a 429.
GENEROUS_RATE = "100000000/second"
#: ``API_THROTTLE_RATE`` and the scoped ``API_THROTTLE_<SCOPE>_RATE`` (estimate, recommend, job start).
RATE_NAME = re.compile(r"\b([A-Z][A-Z0-9_]*_THROTTLE(?:_[A-Z0-9]+)*_RATE)\b")


def throttle_rate_names() -> set[str]:
    """Every ``*_THROTTLE_RATE`` and ``*_THROTTLE_<SCOPE>_RATE`` variable the settings or ``.env.example``
    name, and any set here."""
    names = {"API_THROTTLE_RATE"} | {name for name in os.environ if RATE_NAME.fullmatch(name)}
    for path in (ROOT / "vramplan" / "settings.py", ROOT / ".env.example"):
        if path.is_file():
            names |= set(RATE_NAME.findall(path.read_text()))
    return names


def django_env(database_url: str, broker_url: str | None, **extra: str) -> dict[str, str]:
    """The environment of a benchmark subprocess: production-like settings (DEBUG off), this database and
    broker, generous throttle rates, and ``benchmarks.load.settings`` (the project's plus ``/bench/ping``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAKE_NVML_", "PYTEST_"))}
    env.pop("CELERY_BROKER_URL", None)
    env.update(
        DJANGO_SETTINGS_MODULE="benchmarks.load.settings",
        DATABASE_URL=database_url,
        DJANGO_DEBUG="0",
        DJANGO_SECRET_KEY=os.environ.get("DJANGO_SECRET_KEY") or "load-benchmark-only-not-a-secret",
        ALLOWED_HOSTS="127.0.0.1,localhost",
        LOG_LEVEL="WARNING",
        PYTHONPATH=str(ROOT),
    )
    if broker_url:
        env["CELERY_BROKER_URL"] = broker_url
    env.update({name: GENEROUS_RATE for name in throttle_rate_names()})
    # one account drives every connection: its recommendations run side by side, as many accounts' would
    env["VRAMPLAN_RECOMMENDATIONS_PER_ACCOUNT"] = "1000"
    env.update(extra)
    return env


def database_name(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def ensure_database(url: str) -> None:
    """Create the PostgreSQL database ``url`` names when it does not exist yet."""
    import psycopg

    parts = urlsplit(url)
    if parts.scheme not in {"postgres", "postgresql", "pgsql"}:
        raise SystemExit(f"{url!r}: the load benchmark runs against PostgreSQL (postgres://USER@HOST:PORT/NAME)")
    name = database_name(url)
    maintenance = urlunsplit((parts.scheme.replace("pgsql", "postgresql"), parts.netloc, "/postgres", "", ""))
    maintenance = maintenance.replace("postgres://", "postgresql://", 1)
    with psycopg.connect(maintenance, autocommit=True) as connection:
        if connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            connection.execute(f'CREATE DATABASE "{name}"')


_prepared: set[str] = set()


def prepare_database(url: str, broker_url: str | None) -> None:
    """Create, migrate and load the catalog into ``url``, with the CPU configuration this machine is (its workers'
    host-probe nodes match it: ``localconfiguration``); once per run, every step idempotent."""
    if url in _prepared:
        return
    ensure_database(url)
    env = django_env(url, broker_url)
    for command in (["migrate", "--no-input"], ["loadcatalog"], ["localconfiguration"]):
        run([sys.executable, "manage.py", *command], env=env, timeout=300)
    _prepared.add(url)


def run(argv: list[str], *, env: dict[str, str], timeout: float) -> str:
    """Run a command in the repository; its stdout, or exit with its output when it fails."""
    result = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result.stdout


def django_json(step: str, env: dict[str, str]) -> dict:
    """Run ``python -m benchmarks.load.django_side STEP`` and read the JSON it prints."""
    return json.loads(run([sys.executable, "-m", "benchmarks.load.django_side", step], env=env, timeout=120))


def stop(process: subprocess.Popen, timeout_s: float = 20.0) -> None:
    """SIGTERM a process started with ``start_new_session`` (its own group: it and its children only)."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=timeout_s)
    except ProcessLookupError:
        pass


def wait_until(predicate, timeout_s: float, what: str, poll_s: float = 0.2) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(poll_s)
    raise SystemExit(f"timed out after {timeout_s:.0f} s waiting for {what}")
