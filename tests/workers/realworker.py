"""A real ``celery worker`` process for tests: Redis broker, the test's PostgreSQL database, its own queue;
and a real ``celery beat`` process sending the project's schedule to such a worker's queue.

Skipped when CELERY_BROKER_URL is not Redis or the database is not PostgreSQL; with
REQUIRE_SERVICES=1 those fail instead.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import quote

import pytest
import redis
from django.conf import settings
from django.db import connection

from catalog.models import Node
from tests.conftest import skip_or_fail
from workers import tasks

from .conftest import REPO_ROOT, clean_env

NODE_TIMEOUT_S = 60.0


def require_services() -> None:
    broker = settings.CELERY_BROKER_URL
    if not broker.startswith(("redis://", "rediss://")):
        skip_or_fail(f"CELERY_BROKER_URL is {broker.split('://')[0]}://, not Redis (set redis://HOST:PORT/DB)")
    if connection.vendor != "postgresql":
        skip_or_fail(f"the database is {connection.vendor}, not PostgreSQL (set DATABASE_URL=postgres://...)")
    try:
        redis.Redis.from_url(broker, socket_connect_timeout=3).ping()
    except redis.RedisError as exc:
        skip_or_fail(f"Redis at CELERY_BROKER_URL is not reachable ({exc})")


def _settings_module() -> str:
    """The settings module for a subprocess (``settings.SETTINGS_MODULE`` is None under pytest-django's
    ``settings`` fixture)."""
    return settings.SETTINGS_MODULE or os.environ["DJANGO_SETTINGS_MODULE"]


def _test_database_url() -> str:
    """DATABASE_URL of the database this test runs in (pytest-django's ``test_<name>``) for the worker."""
    db = connection.settings_dict
    credentials = quote(db["USER"] or "", safe="")
    if db.get("PASSWORD"):
        credentials += ":" + quote(db["PASSWORD"], safe="")
    host = db["HOST"] or "localhost"
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgres://{credentials}@{host}{port}/{quote(db['NAME'], safe='')}"


BINDING_DEADLINES_KEY = "_kombu.binding_deadlines"  # kombu's sorted set: exchange → when its bindings go
PIDBOX_EXCHANGE = "celery.pidbox"  # remote control: a worker's mailbox queue is bound there, and expires


def redis_keys(queue: str) -> set[bytes]:
    """The keys kombu keeps for ``queue``: its lists (one per priority), ``_kombu.binding*.<queue>``."""
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    return {key for key in broker.scan_iter(match=f"*{queue}*") if queue.encode() in key}


def delete_queue_keys(*queues: str) -> None:
    """Remove every trace ``queues`` left in Redis, including their exchanges' binding deadlines.

    Each queue here has a direct exchange of the same name (Celery's and ``node_queue_declaration``'s).
    """
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    for queue in queues:
        for key in redis_keys(queue):
            broker.delete(key)
        broker.zrem(BINDING_DEADLINES_KEY, queue)
    left = {queue: redis_keys(queue) for queue in queues if redis_keys(queue)}
    assert not left, f"Redis keys left behind: {left}"


def drop_orphan_deadline(exchange: str) -> None:
    """Forget ``exchange``'s binding deadline once no binding table is left for it (as kombu's sweep would)."""
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    if not broker.exists(f"_kombu.binding.{exchange}"):
        broker.zrem(BINDING_DEADLINES_KEY, exchange)


@dataclass
class Worker:
    node_name: str
    queue: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_node(self, timeout_s: float = NODE_TIMEOUT_S) -> Node:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            node = Node.objects.filter(name=self.node_name).first()
            if node is not None:
                return node
            if self.process.poll() is not None:
                pytest.fail(f"the worker exited with {self.process.returncode}:\n{self.log()}")
            time.sleep(0.25)
        pytest.fail(f"no Node {self.node_name!r} after {timeout_s:.0f} s; worker log:\n{self.log()}")

    def kill(self) -> None:
        """SIGKILL the worker (its process group): no warm shutdown, no ack, as a crashed node."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=15)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)  # the worker's own session: it and its children only
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=15)


def spawn_worker(node_name: str, queue: str, env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    """``celery -A vramplan worker`` for node ``node_name`` on ``queue`` (solo, one task at a time), in its own
    session, its output in ``log_path``."""
    with log_path.open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "vramplan", "worker", "--pool=solo", "--concurrency=1",
             f"--queues={queue}", f"--hostname={node_name}@%h", "--without-gossip", "--without-mingle",
             "--without-heartbeat", "--loglevel=INFO"],
            cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip


@pytest.fixture
def start_worker(transactional_db, tmp_path: Path) -> Iterator[Callable[..., Worker]]:
    """Start ``celery -A vramplan worker`` on a queue of its own, with the test's database and broker.

    The worker is always stopped at teardown; its log is printed there, which pytest shows on failure.
    """
    require_services()
    workers: list[Worker] = []

    def start(node_name: str | None = None, broker_url: str | None = None, **extra_env: str) -> Worker:
        """A worker; ``node_name`` again for a restart of the same node, ``broker_url`` for a private Redis."""
        tag = uuid.uuid4().hex[:10]
        node_name, queue = node_name or f"itest-{tag}", f"itest.{tag}"
        log_path = tmp_path / f"worker-{tag}.log"
        env = clean_env(
            DJANGO_SETTINGS_MODULE=_settings_module(),
            DATABASE_URL=_test_database_url(),
            CELERY_BROKER_URL=broker_url or settings.CELERY_BROKER_URL,
            VRAMPLAN_NODE_NAME=node_name,
            **extra_env,
        )
        worker = Worker(node_name, queue, spawn_worker(node_name, queue, env, log_path), log_path)
        workers.append(worker)
        return worker

    yield start

    for worker in workers:
        worker.stop()
        delete_queue_keys(worker.queue, tasks.node_queue(worker.node_name))
    if workers:
        drop_orphan_deadline(PIDBOX_EXCHANGE)
        print(f"--- log of worker {worker.node_name} (exit {worker.process.returncode}) ---\n{worker.log()}")


# ``celery beat`` with this project's app and schedule, publishing what it sends to ``argv[1]`` (a test
# worker's own queue) instead of the shared default queue; ``argv[2]`` is its schedule file.
BEAT_MAIN = (
    "import sys\nfrom vramplan.celery import app\napp.conf.task_default_queue = sys.argv[1]\n"
    "sys.exit(app.start(['beat', '--schedule', sys.argv[2], '--max-interval', '1', '--loglevel', 'INFO']))\n"
)
_BEAT_SEND = re.compile(r"^\[(?P<at>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}): INFO/MainProcess\] "
                        r"Scheduler: Sending due task (?P<entry>\S+) ")  # fmt: skip


@dataclass
class Beat:
    """A ``celery beat`` process; restartable (its schedule file stays), its log kept across restarts."""

    queue: str
    env: dict[str, str]
    schedule_path: Path
    log_path: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-c", BEAT_MAIN, self.queue, str(self.schedule_path)],
                cwd=REPO_ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip

    def stop(self) -> None:
        """SIGTERM, as systemd stops it: beat saves its schedule and exits."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=15)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def sends(self) -> dict[str, list[datetime]]:
        """When beat sent each schedule entry, from its log (this machine's local time, naive)."""
        sent: dict[str, list[datetime]] = {}
        for line in self.log().splitlines():
            if match := _BEAT_SEND.match(line):
                at = datetime.strptime(match["at"], "%Y-%m-%d %H:%M:%S,%f")
                sent.setdefault(match["entry"], []).append(at)
        return sent

    def wait_for_sends(self, entry: str, count: int, timeout_s: float) -> list[datetime]:
        """Wait until beat has sent ``entry`` at least ``count`` times in all; its send times."""
        deadline = time.monotonic() + timeout_s
        while len(self.sends().get(entry, [])) < count:
            if self.process is not None and self.process.poll() is not None:
                pytest.fail(f"celery beat exited with {self.process.returncode}:\n{self.log()}")
            if time.monotonic() > deadline:
                pytest.fail(f"beat sent {entry} fewer than {count} times in {timeout_s:.0f} s:\n{self.log()}")
            time.sleep(0.25)
        return self.sends()[entry]


@pytest.fixture
def start_beat(transactional_db, tmp_path: Path) -> Iterator[Callable[..., Beat]]:
    """Start ``celery beat`` sending to a test worker's queue, with the test's database and broker; stopped
    at teardown, its log printed there."""
    require_services()
    beats: list[Beat] = []

    def start(worker: Worker, **extra_env: str) -> Beat:
        tag = uuid.uuid4().hex[:10]
        env = clean_env(DJANGO_SETTINGS_MODULE=_settings_module(), DATABASE_URL=_test_database_url(),
                        CELERY_BROKER_URL=settings.CELERY_BROKER_URL, **extra_env)  # fmt: skip
        beat = Beat(queue=worker.queue, env=env, schedule_path=tmp_path / f"beat-{tag}-schedule",
                    log_path=tmp_path / f"beat-{tag}.log")  # fmt: skip
        beats.append(beat)
        beat.start()
        return beat

    yield start

    for beat in beats:
        beat.stop()
        print(f"--- log of celery beat ({beat.queue}) ---\n{beat.log()}")
