"""The example deployment in deploy/ agrees with what vramplan reads.

deploy/compose.yaml and deploy/systemd/*.service are parsed here: every service they need is there,
every environment variable they give a vramplan process is one vramplan reads (vramplan/settings.py,
vramplan/celery.py), secrets come from outside the files, each worker names its node, and there is
exactly one beat.
"""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest
import yaml
from django.conf import settings

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
APP_SERVICES = {"web", "worker", "beat"}
SECRET_NAME = re.compile(r"SECRET|PASSWORD|TOKEN|PASSWD|_KEY$", re.IGNORECASE)
URL_WITH_CREDENTIALS = re.compile(r"^[a-z]+://(\$\{[^}]*\}|[^:/@$]+):(\$\{[^}]*\}|[^@]+)@")
INTERPOLATION = re.compile(r"\$\{([A-Z][A-Z0-9_]*)(?::?[-?][^}]*)?\}")
ONLY_INTERPOLATION = re.compile(r"^\$\{[A-Z][A-Z0-9_]*(?::?[-?][^}]*)?\}$")


def variables_read(path: Path) -> set[str]:
    """Names of environment variables a module reads: env.str("X"), env_bool("X"), os.environ.get("X"), ..."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)):
            continue
        name, func = node.args[0].value, ast.unparse(node.func)
        if not isinstance(name, str) or not re.fullmatch(r"[A-Z][A-Z0-9_]*", name):
            continue
        if re.fullmatch(r"env(\.\w+|_\w+)|os\.environ\.(get|setdefault)|os\.getenv", func):
            names.add(name)
    return names


ALLOWED = variables_read(REPO / "vramplan" / "settings.py") | variables_read(REPO / "vramplan" / "celery.py")


def compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def command(service: dict) -> list[str]:
    cmd = service.get("command", [])
    return shlex.split(cmd) if isinstance(cmd, str) else [str(part) for part in cmd]


def env_file(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if line and not line.startswith("#"))
    return {key: value for key, value in pairs}


def unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """A systemd unit as {section: {key: [values, in order]}} (keys such as EnvironmentFile repeat)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None, f"{path.name}: {line!r} outside a section"
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def test_the_allowed_set_is_what_the_settings_read() -> None:
    assert {"DJANGO_SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "VRAMPLAN_NODE_NAME"} <= ALLOWED
    assert "DJANGO_SETTINGS_MODULE" in ALLOWED  # vramplan/celery.py
    assert "POSTGRES_PASSWORD" not in ALLOWED


# --- compose ----------------------------------------------------------------------------------------------


def test_compose_has_every_service_it_needs() -> None:
    services = compose()["services"]
    assert {"web", "worker", "beat", "postgres", "redis"} <= set(services)
    for name, service in services.items():
        assert service.get("restart") in {"always", "unless-stopped", "on-failure"}, name


def test_compose_gives_vramplan_only_variables_it_reads() -> None:
    for name in APP_SERVICES:
        environment = compose()["services"][name]["environment"]
        assert isinstance(environment, dict), f"{name}: environment as a mapping"
        unknown = set(environment) - ALLOWED
        assert not unknown, f"{name} sets {sorted(unknown)}, which vramplan never reads"
        assert "env_file" not in compose()["services"][name], f"{name}: one env file would hand it every secret"


def test_compose_secrets_come_from_the_env_file_and_stay_per_service() -> None:
    services = compose()["services"]
    for name, service in services.items():
        for key, value in (service.get("environment") or {}).items():
            value = str(value)
            if SECRET_NAME.search(key):
                assert ONLY_INTERPOLATION.match(value), f"{name}: {key} is written in compose.yaml"
            credentials = URL_WITH_CREDENTIALS.match(value)
            if credentials:
                assert ONLY_INTERPOLATION.match(credentials.group(2)), f"{name}: a password in {key}"
    # each process gets its own credentials: no two services share a broker user or a database role
    users: dict[str, str] = {}
    for name in APP_SERVICES:
        for key in ("DATABASE_URL", "CELERY_BROKER_URL"):
            value = services[name]["environment"].get(key)
            if value:
                user = URL_WITH_CREDENTIALS.match(value)
                assert user, f"{name}: {key} has no user of its own"
                users.setdefault((key, user.group(1)), []).append(name)
    shared = {key: names for key, names in users.items() if len(names) > 1}
    assert not shared, f"credentials shared between services: {shared}"
    secret_keys = [services[name]["environment"]["DJANGO_SECRET_KEY"] for name in APP_SERVICES]
    assert len(set(secret_keys)) == len(secret_keys), "the web's signing key must stay on the web"


def test_compose_env_example_defines_every_variable_compose_uses() -> None:
    used = set(INTERPOLATION.findall((DEPLOY / "compose.yaml").read_text()))
    example = env_file(DEPLOY / "env.example")
    assert used == set(example), f"missing: {sorted(used - set(example))}; unused: {sorted(set(example) - used)}"
    filled = {key for key, value in example.items() if SECRET_NAME.search(key) and value}
    assert not filled, f"env.example carries values for {sorted(filled)}"


def test_the_worker_names_its_node_reserves_gpus_and_runs_one_job_at_a_time() -> None:
    worker = compose()["services"]["worker"]
    argv = command(worker)
    assert argv[:4] == ["celery", "-A", "vramplan", "worker"], argv
    assert "VRAMPLAN_NODE_NAME" in worker["environment"]
    assert "${VRAMPLAN_NODE_NAME" in argv[argv.index("--hostname") + 1]
    assert argv[argv.index("--concurrency") + 1] == "1"
    assert not {"-B", "--beat"} & set(argv), "a worker with an embedded beat would be a second beat"
    assert worker["environment"].get("VRAMPLAN_JOB_USER"), "jobs must not run as the worker's user"
    devices = worker["deploy"]["resources"]["reservations"]["devices"]
    assert any("gpu" in device.get("capabilities", []) for device in devices)


def test_there_is_exactly_one_beat() -> None:
    services = compose()["services"]
    beats = [name for name, service in services.items() if command(service)[:4] == ["celery", "-A", "vramplan", "beat"]]
    assert beats == ["beat"]
    assert services["beat"].get("deploy", {}).get("replicas", 1) == 1
    for name, service in services.items():
        assert not {"-B", "--beat"} & set(command(service)), name
    assert "DATABASE_URL" not in services["beat"]["environment"], "beat only sends messages"


def test_the_web_runs_the_projects_wsgi_application_under_gunicorn() -> None:
    web = " ".join(command(compose()["services"]["web"]))
    module, _, attribute = settings.WSGI_APPLICATION.rpartition(".")
    assert f"gunicorn {module}:{attribute}" in web
    assert "migrate --no-input" in web


# --- systemd ---------------------------------------------------------------------------------------------

UNITS = ["vramplan-web.service", "vramplan-worker@.service", "vramplan-beat.service"]


@pytest.mark.parametrize("name", UNITS)
def test_each_unit_runs_as_a_user_restarts_and_keeps_secrets_out(name: str) -> None:
    service = unit(DEPLOY / "systemd" / name)["Service"]
    assert len(service["ExecStart"]) == 1 and service["ExecStart"][0].startswith("/"), service.get("ExecStart")
    assert service["Restart"][0] in {"always", "on-failure"}
    assert service["User"][0]
    assert service.get("EnvironmentFile"), "secrets come from an EnvironmentFile, not the unit"
    for assignment in service.get("Environment", []):
        for pair in shlex.split(assignment):
            key, _, value = pair.partition("=")
            assert key in ALLOWED, f"{name}: {key} is not a variable vramplan reads"
            assert not SECRET_NAME.search(key), f"{name}: {key} belongs in the EnvironmentFile"
            assert not URL_WITH_CREDENTIALS.match(value), f"{name}: credentials in {key}"


def test_the_units_run_the_right_processes() -> None:
    web = unit(DEPLOY / "systemd" / "vramplan-web.service")["Service"]["ExecStart"][0]
    module, _, attribute = settings.WSGI_APPLICATION.rpartition(".")
    assert f"gunicorn {module}:{attribute}" in web

    worker = unit(DEPLOY / "systemd" / "vramplan-worker@.service")["Service"]
    argv = shlex.split(worker["ExecStart"][0])
    assert argv[1:4] == ["-A", "vramplan", "worker"] and argv[0].endswith("/celery")
    assert "VRAMPLAN_NODE_NAME=%i" in worker["Environment"], "the instance name is the node's name"
    assert any("%i" in path for path in worker["EnvironmentFile"]), "each node has its own credentials file"
    assert argv[argv.index("--concurrency") + 1] == "1"
    assert not {"-B", "--beat"} & set(argv)

    beat = shlex.split(unit(DEPLOY / "systemd" / "vramplan-beat.service")["Service"]["ExecStart"][0])
    assert beat[1:4] == ["-A", "vramplan", "beat"]
    assert not (DEPLOY / "systemd" / "vramplan-beat@.service").exists(), "one beat: not a template"


@pytest.mark.parametrize("name", ["vramplan.env.example", "node.env.example"])
def test_the_systemd_env_examples_set_only_settings_and_no_secrets(name: str) -> None:
    values = env_file(DEPLOY / "systemd" / name)
    assert set(values) <= ALLOWED, sorted(set(values) - ALLOWED)
    for key, value in values.items():
        if SECRET_NAME.search(key):
            assert not value, f"{name}: {key} has a value"
        credentials = URL_WITH_CREDENTIALS.match(value)
        if credentials:
            assert credentials.group(2) == "PASSWORD", f"{name}: {key} carries a password"
