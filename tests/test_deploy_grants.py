"""deploy/postgres/grants.sql and node-role.sql, run the way the README tells an operator, then used.

A scratch database of its own (a unique name; dropped, with its roles, at the end) is created for an owner
role as ``init.sh`` does, migrated and given the catalog by that owner (as the web's ``migrate`` and
``loadcatalog`` do). It is locked down beyond PostgreSQL's defaults — PUBLIC may neither connect to it nor
use schema ``public`` — so that ``CONNECT`` and ``USAGE`` in grants.sql are needed too, not granted twice.
Then ``psql ... -f grants.sql`` as the superuser (twice: the second run, as after a later migration, must
take back what the file's first version granted too), ``psql ... -f node-role.sql``, and:

* a real ``celery worker`` logged in as the node's own role registers its node, claims a queued acceptance
  job, reports progress, stores the measurement and decides the order, heartbeats when asked, and runs
  beat's reaper and heartbeat dispatch (node workers consume the default queue in production);
* a GPU node's heartbeat (an 8-GPU NVML inventory, matched against the GPU catalog) runs as that role too;
* that role is refused users, API tokens, sessions and the admin log, every catalog write but ``catalog_node``,
  new orders and jobs, changes to a stored measurement, deletes, and creating tables.

A failed query in the worker's log (FAILURE_SIGNS) fails the first test at once, with the log; so does
removing any privilege grants.sql gives but the catalog reads its comment names as unused.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from django.conf import settings
from psycopg import sql

from tests.conftest import skip_or_fail
from tests.workers.conftest import REPO_ROOT, clean_env
from tests.workers.realworker import (
    PIDBOX_EXCHANGE,
    Worker,
    delete_queue_keys,
    drop_orphan_deadline,
    require_services,
    spawn_worker,
)
from workers import tasks

pytestmark = [pytest.mark.services, pytest.mark.slow]  # a scratch database, psql, a real Celery worker

GRANTS_SQL = "deploy/postgres/grants.sql"
NODE_ROLE_SQL = "deploy/postgres/node-role.sql"
GROUP_ROLE = "vramplan_node"  # grants.sql's group role, which each node's login role joins
WAIT_S = 90.0
FINAL = {"succeeded", "failed", "cancelled"}
#: In a worker's log, each of these means a query failed: a refused privilege, an unreadable table (no USAGE on
#: the schema reads as "relation ... does not exist"), a failed registration or task.
FAILURE_SIGNS = ("permission denied", "does not exist", "registration at worker start failed", "raised unexpected",
                 "Traceback")  # fmt: skip


@dataclass(frozen=True)
class Server:
    """The PostgreSQL server of the test settings, as its (super)user."""

    host: str
    port: str
    user: str
    password: str

    def url(self, user: str, password: str, database: str) -> str:
        return f"postgres://{quote(user, safe='')}:{quote(password, safe='')}@{self.host}:{self.port}/{database}"

    def connect(self, database: str = "postgres") -> psycopg.Connection[Any]:
        return psycopg.connect(host=self.host, port=self.port, user=self.user, password=self.password or None,
                               dbname=database, autocommit=True)  # fmt: skip

    def psql(self, database: str, script: str, **env: str) -> subprocess.CompletedProcess[str]:
        """``psql -U SUPERUSER -d DATABASE -v ON_ERROR_STOP=1 -f SCRIPT``: the README's command, word for word
        but the names (the server and password come from the environment, as psql reads them)."""
        server = {"PGHOST": self.host, "PGPORT": self.port, "PGPASSWORD": self.password, "PSQLRC": os.devnull}
        return subprocess.run(
            ["psql", "-U", self.user, "-d", database, "-v", "ON_ERROR_STOP=1", "-f", script],
            cwd=REPO_ROOT, env={**os.environ, **server, **env}, capture_output=True, text=True, timeout=60,
            check=False,
        )  # fmt: skip


@dataclass(frozen=True)
class Deployment:
    server: Server
    database: str
    owner_url: str  # what the web uses (it owns the tables)
    node_role: str
    node_url: str  # what one GPU node's worker uses

    def query(self, statement: str, *params: Any) -> list[tuple[Any, ...]]:
        """Rows of ``statement``, read as the owner (what the web would see)."""
        with psycopg.connect(self.owner_url, autocommit=True) as conn:
            return conn.execute(statement, params).fetchall()

    def query_one(self, statement: str, *params: Any) -> tuple[Any, ...] | None:
        rows = self.query(statement, *params)
        return rows[0] if rows else None


def _server() -> Server:
    db = settings.DATABASES["default"]
    return Server(host=db.get("HOST") or "127.0.0.1", port=str(db.get("PORT") or 5432), user=db["USER"] or "postgres",
                  password=db.get("PASSWORD") or "")  # fmt: skip


def _manage(url: str, *args: str) -> None:
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO_ROOT, env=_django_env(url), capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, f"manage.py {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"


def _django_env(database_url: str, **extra: str) -> dict[str, str]:
    return clean_env(
        DJANGO_SETTINGS_MODULE=os.environ.get("DJANGO_SETTINGS_MODULE", "vramplan.settings"),
        DATABASE_URL=database_url,
        CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
        **extra,
    )


@pytest.fixture(scope="module")
def deployed() -> Iterator[Deployment]:
    """A migrated database with the catalog, grants.sql run in it, and one node role from node-role.sql."""
    require_services()
    if shutil.which("psql") is None:
        skip_or_fail("psql (the PostgreSQL client) is not on PATH")
    server = _server()
    with server.connect() as conn:
        if not conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()[0]:
            skip_or_fail(f"grants.sql runs as the superuser, and DATABASE_URL's user {server.user!r} is not one")
        group_existed = bool(conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (GROUP_ROLE,)).fetchall())
    tag = uuid.uuid4().hex[:10]
    database, owner, node_role = f"grants_{tag}", f"grants_{tag}_owner", f"grants_{tag}_node"
    owner_password, node_password = secrets.token_hex(24), secrets.token_hex(24)
    try:
        with server.connect() as conn:  # init.sh's owner role and database
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(owner),
                                                                           sql.Literal(owner_password)))  # fmt: skip
            conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(database), sql.Identifier(owner)))
            conn.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(sql.Identifier(database)))
        with server.connect(database) as conn:
            conn.execute("REVOKE ALL ON SCHEMA public FROM PUBLIC")
        owner_url = server.url(owner, owner_password, database)
        _manage(owner_url, "migrate", "--no-input")
        _manage(owner_url, "loadcatalog")
        _manage(owner_url, "localconfiguration")  # the CPU configuration this machine's worker matches

        granted = server.psql(database, GRANTS_SQL)
        assert granted.returncode == 0, f"{GRANTS_SQL} failed:\n{granted.stdout}\n{granted.stderr}"
        with server.connect(database) as conn:  # what the file's first version also granted; taken back below
            group = sql.Identifier(GROUP_ROLE)
            conn.execute(sql.SQL("GRANT INSERT ON measurements_order, measurements_acceptancejob TO {}").format(group))
            conn.execute(sql.SQL("GRANT UPDATE ON measurements_measurement TO {}").format(group))
        granted = server.psql(database, GRANTS_SQL)  # again, as after a later migration
        assert granted.returncode == 0, f"{GRANTS_SQL} failed the second time:\n{granted.stdout}\n{granted.stderr}"
        created = server.psql(database, NODE_ROLE_SQL, NODE_DB_USER=node_role, NODE_DB_PASSWORD=node_password)
        assert created.returncode == 0, f"{NODE_ROLE_SQL} failed:\n{created.stdout}\n{created.stderr}"

        yield Deployment(server, database, owner_url, node_role, server.url(node_role, node_password, database))
    finally:
        with server.connect() as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))
            for role in (node_role, owner):
                conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
            if not group_existed:  # grants.sql created it; kept while another database's grants name it
                with contextlib.suppress(psycopg.errors.DependentObjectsStillExist):
                    conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(GROUP_ROLE)))


# --- a real worker, logged in as the node's role ------------------------------------------------------------


class NodeWorker(Worker):
    """A real worker (``tests.workers.realworker.Worker``) whose database login is the node's role."""

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait(self, what: str, ready: Callable[[], Any], timeout_s: float = WAIT_S) -> Any:
        """``ready()``'s first true value; fails at once on a refused query, or when the worker exits."""
        deadline = time.monotonic() + timeout_s
        while True:
            log = self.log()
            if sign := next((sign for sign in FAILURE_SIGNS if sign in log), None):
                pytest.fail(f"{sign!r} in the worker's log while waiting for {what}:\n{log}")
            if self.process.poll() is not None:
                pytest.fail(f"the worker exited with {self.process.returncode} before {what}:\n{log}")
            value = ready()
            if value:
                return value
            if time.monotonic() > deadline:
                pytest.fail(f"no {what} after {timeout_s:.0f} s; worker log:\n{log}")
            time.sleep(0.25)

    def succeeded(self, task: str) -> int:
        """How many times the log says ``task`` succeeded."""
        return sum(1 for line in self.log().splitlines() if f"Task {task}[" in line and "] succeeded in " in line)


@pytest.fixture
def node_worker(deployed: Deployment, tmp_path: Path) -> Iterator[NodeWorker]:
    """``celery -A vramplan worker`` with the node's own DATABASE_URL and a random DJANGO_SECRET_KEY of its own."""
    tag = uuid.uuid4().hex[:10]
    name, queue, log_path = f"grants-{tag}", f"grants.{tag}", tmp_path / "worker.log"
    env = _django_env(deployed.node_url, VRAMPLAN_NODE_NAME=name, DJANGO_SECRET_KEY=secrets.token_urlsafe(50))
    env.pop("VRAMPLAN_JOB_USER", None)
    worker = NodeWorker(name, queue, spawn_worker(name, queue, env, log_path), log_path)
    yield worker
    worker.stop()
    nodes = {name, *(row[0] for row in deployed.query("SELECT name FROM catalog_node"))}  # name: even unregistered
    delete_queue_keys(queue, *(tasks.node_queue(node) for node in sorted(nodes)))
    drop_orphan_deadline(PIDBOX_EXCHANGE)
    print(f"--- log of worker {name} (exit {worker.process.returncode}) ---\n{worker.log()}")


# What the web side does, as the owner: a customer places an order for the node's configuration and starts an
# acceptance job (dispatched to the node's queue); a node that went silent holds a job whose attempts are used up.
OWNER_SIDE = """
import json, sys
from datetime import timedelta
import django
django.setup()
from django.contrib.auth import get_user_model
from django.utils import timezone
from budgets.services import workload_create
from catalog.models import Node
from catalog.services import node_create
from measurements import services
from measurements.models import AcceptanceJob
from tests.measurements.helpers import TINY_CPU_WORKLOAD

node = Node.objects.get(name=sys.argv[1])
user = get_user_model().objects.create_user(username="grants-customer", password="grants-password-123")
workload = workload_create(owner=user, data=TINY_CPU_WORKLOAD)
order = services.order_create(owner=user, workload=workload, configuration=node.configuration)
job = services.acceptance_job_start(order)

long_ago = timezone.now() - timedelta(days=1)
gone = node_create(name=sys.argv[1] + "-gone", configuration=node.configuration, probe="host", hostname="gone",
                   inventory=node.inventory, device_count=0, last_heartbeat_at=long_ago)
other = services.order_create(owner=user, workload=workload, configuration=node.configuration)
stale = AcceptanceJob.objects.create(order=other, node=gone, status="running", attempt=3, max_attempts=3,
                                     started_at=long_ago, heartbeat_at=long_ago, dispatched_at=long_ago)
print(json.dumps({"order": order.pk, "job": job.pk, "status": job.status, "error": job.error, "stale": stale.pk}))
"""

# A GPU node's heartbeat, as the node's role: an 8 × H100 inventory matched against the GPU catalog.
GPU_HEARTBEAT = """
import json, sys
import django
django.setup()
from tests.workers.inventories import gpu, nvml_inventory
from workers.services import node_heartbeat_record

for _ in range(2):  # its first heartbeat creates the node, the next one updates it
    node = node_heartbeat_record(sys.argv[1], nvml_inventory(*(gpu(i) for i in range(8))))
print(json.dumps({"probe": node.probe, "device_count": node.device_count}))
"""


def _python(script: str, database_url: str, *args: str) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-c", script, *args], cwd=REPO_ROOT, env=_django_env(database_url), capture_output=True,
        text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, f"the script failed:\n{result.stdout}\n{result.stderr}"
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_worker_logged_in_as_its_node_role_does_all_a_node_does(deployed: Deployment, node_worker) -> None:
    node_id, configuration_id = node_worker.wait(
        "the node's registration", lambda: deployed.query_one("SELECT id, configuration_id FROM catalog_node "
                                                              "WHERE name = %s", node_worker.node_name)
    )  # fmt: skip
    assert configuration_id is not None, "the host-probe node matches this machine's CPU configuration"

    placed = _python(OWNER_SIDE, deployed.owner_url, node_worker.node_name)
    assert placed["status"] == "queued", placed["error"]

    def job() -> tuple[Any, ...] | None:
        rows = deployed.query("SELECT status, error, attempt, node_id FROM measurements_acceptancejob WHERE id = %s",
                              placed["job"])  # fmt: skip
        return rows[0] if rows[0][0] in FINAL else None

    status, error, attempt, ran_on = node_worker.wait("the job's end", job)
    assert (status, attempt, ran_on) == ("succeeded", 1, node_id), error
    node_worker.wait("the task's end", lambda: node_worker.succeeded("workers.tasks.acceptance_job_run"))
    [(measurement, measured_on, source)] = deployed.query(
        "SELECT id, node_id, source FROM measurements_measurement WHERE job_id = %s", placed["job"]
    )
    assert (measured_on, source) == (node_id, "job")
    [(order_status, decided_by)] = deployed.query(
        "SELECT status, decided_by_id FROM measurements_order WHERE id = %s", placed["order"]
    )
    assert (order_status, decided_by) == ("accepted", measurement)

    # A heartbeat through the node's own queue (beat's dispatcher sends these) updates its row.
    [(heard_at,)] = deployed.query("SELECT last_heartbeat_at FROM catalog_node WHERE id = %s", node_id)
    tasks.node_heartbeat.apply_async(queue=tasks.node_queue_declaration(node_worker.node_name))
    node_worker.wait("a newer heartbeat", lambda: deployed.query(
        "SELECT 1 FROM catalog_node WHERE id = %s AND last_heartbeat_at > %s", node_id, heard_at))  # fmt: skip

    # Beat's periodic tasks go to the default queue, which node workers consume: the reaper ends the gone
    # node's job (its attempts are used up), the dispatcher sends heartbeats.
    tasks.acceptance_jobs_reap.apply_async(queue=node_worker.queue)
    tasks.node_heartbeat_dispatch.apply_async(queue=node_worker.queue)
    node_worker.wait("the reaper's verdict", lambda: deployed.query(
        "SELECT 1 FROM measurements_acceptancejob WHERE id = %s AND status = 'failed' AND failure_kind = 'interrupted'",
        placed["stale"]))  # fmt: skip
    node_worker.wait("the heartbeat dispatch", lambda: node_worker.succeeded("workers.tasks.node_heartbeat_dispatch"))

    # A GPU node's heartbeat: matching NVML's devices against the GPU catalog.
    gpu_node = _python(GPU_HEARTBEAT, deployed.node_url, f"{node_worker.node_name}-gpu")
    assert gpu_node == {"probe": "nvml", "device_count": 8}

    log = node_worker.log()
    for sign in FAILURE_SIGNS:
        assert sign not in log, f"{sign!r} in the worker's log:\n{log}"


DENIED = [
    # Nothing about people: users, their API tokens, sessions, what staff did in the admin.
    ("SELECT * FROM auth_user", "auth_user"),
    ("SELECT * FROM authtoken_token", "authtoken_token"),
    ("SELECT * FROM django_session", "django_session"),
    ("SELECT * FROM django_admin_log", "django_admin_log"),
    ("UPDATE auth_user SET is_staff = true", "auth_user"),
    # No catalog writes but its node's row.
    ("UPDATE catalog_accelerator SET marketed_memory_bytes = marketed_memory_bytes * 2", "catalog_accelerator"),
    ("UPDATE catalog_configuration SET driver_version = ''", "catalog_configuration"),
    ("INSERT INTO catalog_vendor DEFAULT VALUES", "catalog_vendor"),
    ("DELETE FROM catalog_architecture", "catalog_architecture"),
    ("UPDATE catalog_cudatoolkit SET min_driver_linux = ''", "catalog_cudatoolkit"),
    ("UPDATE measurements_registeredprogram SET argv_template = '[\"sh\"]'", "measurements_registeredprogram"),
    ("UPDATE budgets_workload SET name = ''", "budgets_workload"),
    # No orders or jobs of its own making, no stored measurement changed (re-running grants.sql took back
    # what its first version granted).
    ("INSERT INTO measurements_order DEFAULT VALUES", "measurements_order"),
    ("INSERT INTO measurements_acceptancejob DEFAULT VALUES", "measurements_acceptancejob"),
    ("UPDATE measurements_measurement SET outcome = 'succeeded'", "measurements_measurement"),
    # No deletes where it may write.
    ("DELETE FROM catalog_node", "catalog_node"),
    ("DELETE FROM measurements_measurement", "measurements_measurement"),
    ("TRUNCATE measurements_acceptancejob", "measurements_acceptancejob"),
]


def test_a_node_role_reads_no_people_and_writes_no_catalog(deployed: Deployment) -> None:
    refused: dict[str, str] = {}
    with psycopg.connect(deployed.node_url, autocommit=True) as conn:
        assert conn.execute("SELECT current_user").fetchone() == (deployed.node_role,)
        [(accelerators,)] = conn.execute("SELECT count(*) FROM catalog_accelerator").fetchall()
        assert accelerators > 0, "the node reads the catalog"
        for statement, table in DENIED:
            with pytest.raises(psycopg.errors.InsufficientPrivilege) as denied:
                conn.execute(statement)
            refused[statement] = str(denied.value)
            assert f"permission denied for table {table}" in str(denied.value)
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied for schema public"):
            conn.execute("CREATE TABLE public.node_scratch (id integer)")
        [(creates_roles, creates_databases, superuser)] = conn.execute(
            "SELECT rolcreaterole, rolcreatedb, rolsuper FROM pg_roles WHERE rolname = current_user"
        ).fetchall()
    assert (creates_roles, creates_databases, superuser) == (False, False, False)
    assert len(refused) == len(DENIED)
