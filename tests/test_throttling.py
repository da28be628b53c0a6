"""Rate limits on the expensive endpoints, counted in one cache that every web process shares.

In-process tests check each scope (which endpoints and methods it counts, per user) and the 429 (a
``Retry-After`` header and the same seconds in the detail). ``test_three_gunicorn_workers_share_one_count``
proves the sharing the in-process tests cannot: three gunicorn worker processes on loopback, against
this test database and Redis, let exactly the configured number of one user's concurrent requests through.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.test import override_settings
from django.utils import timezone
from rest_framework.authtoken.models import Token

from catalog.models import Node
from tests.conftest import skip_or_fail
from tests.measurements.helpers import TINY_CPU_WORKLOAD, cpu_configuration

ROOT = Path(__file__).resolve().parent.parent
RETRY = re.compile(r"Expected available in (\d+) seconds?\.")


def rates(**scoped: str):
    """override_settings with some rates changed (the throttles read them per request)."""
    framework: dict[str, Any] = settings.REST_FRAMEWORK
    return override_settings(
        REST_FRAMEWORK={**framework, "DEFAULT_THROTTLE_RATES": {**framework["DEFAULT_THROTTLE_RATES"], **scoped}}
    )


def assert_throttled(response: Any, limit_s: int) -> int:
    """A 429 that says when to retry, in the header and the detail alike; returns the seconds."""
    assert response.status_code == 429, (response.status_code, response.content[:200])
    seconds = int(response["Retry-After"])
    assert 1 <= seconds <= limit_s
    match = RETRY.search(response.json()["detail"])
    assert match and int(match.group(1)) == seconds, response.json()
    return seconds


@pytest.fixture(autouse=True)
def _fresh_counts() -> None:
    cache.clear()  # only this cache's keys, also on the broker's Redis database (vramplan.cache)


@pytest.mark.django_db
def test_estimates_are_limited_per_user_and_other_endpoints_are_not(api, other_api) -> None:
    with rates(estimate="3/minute"):
        answers = [api.post("/api/v1/estimate", TINY_CPU_WORKLOAD, format="json") for _ in range(3)]
        assert [a.status_code for a in answers] == [200, 200, 200]
        assert_throttled(api.post("/api/v1/estimate", TINY_CPU_WORKLOAD, format="json"), 60)
        assert_throttled(api.post("/api/v1/estimate", {}, format="json"), 60)  # counted before the body is read
        # Storing a workload runs the same estimate: the same scope; reading does not.
        assert_throttled(api.post("/api/v1/workloads/", TINY_CPU_WORKLOAD, format="json"), 60)
        assert api.get("/api/v1/workloads/").status_code == 200
        assert api.get("/api/v1/model-presets/").status_code == 200
        # Another user has their own count.
        assert other_api.post("/api/v1/estimate", TINY_CPU_WORKLOAD, format="json").status_code == 200
        assert other_api.post("/api/v1/workloads/", TINY_CPU_WORKLOAD, format="json").status_code == 201


@pytest.mark.django_db
def test_both_recommendation_endpoints_share_the_recommend_scope(api, other_api) -> None:
    workload = api.post("/api/v1/workloads/", TINY_CPU_WORKLOAD, format="json").json()
    with rates(recommend="2/hour"):
        assert api.post("/api/v1/recommend", TINY_CPU_WORKLOAD, format="json").status_code == 200
        assert api.get(f"/api/v1/workloads/{workload['id']}/recommendations/").status_code == 200
        seconds = assert_throttled(api.post("/api/v1/recommend", TINY_CPU_WORKLOAD, format="json"), 3600)
        assert seconds > 3000  # the window is an hour, opened a moment ago
        assert_throttled(api.get(f"/api/v1/workloads/{workload['id']}/recommendations/"), 3600)
        assert api.post("/api/v1/estimate", TINY_CPU_WORKLOAD, format="json").status_code == 200
        assert other_api.post("/api/v1/recommend", TINY_CPU_WORKLOAD, format="json").status_code == 200


@pytest.mark.django_db
def test_job_starts_are_limited_and_listing_the_jobs_is_not(api) -> None:
    configuration = cpu_configuration()
    Node.objects.create(name="n1", configuration=configuration, last_heartbeat_at=timezone.now())
    workload = api.post("/api/v1/workloads/", TINY_CPU_WORKLOAD, format="json").json()
    order = api.post("/api/v1/orders/", {"workload": workload["id"], "configuration": configuration.slug},
                     format="json").json()  # fmt: skip
    url = f"/api/v1/orders/{order['id']}/acceptance-jobs/"
    with rates(job_start="2/minute"):
        assert [api.post(url, {}, format="json").status_code for _ in range(2)] == [202, 202]
        assert_throttled(api.post(url, {}, format="json"), 60)
        assert [api.get(url).status_code for _ in range(3)] == [200, 200, 200]
        assert api.get(url).json()["count"] == 2  # the refused start queued nothing


@pytest.mark.django_db
def test_the_api_wide_user_limit_still_applies(api) -> None:
    with rates(user="2/minute"):
        assert [api.get("/api/v1/model-presets/").status_code for _ in range(2)] == [200, 200]
        assert_throttled(api.get("/api/v1/configurations/"), 60)


def _guess_upload_token(anon_api, order_id: int, forwarded: str | None, remote: str = "127.0.0.1") -> int:
    extra = {"HTTP_X_FORWARDED_FOR": forwarded} if forwarded is not None else {}
    token = f"Upload vpu_{uuid.uuid4().hex}"  # a guess: never the order's token
    response = anon_api.post(f"/api/v1/orders/{order_id}/measurements/", {}, format="json",
                             HTTP_AUTHORIZATION=token, REMOTE_ADDR=remote, **extra)  # fmt: skip
    return response.status_code


@pytest.mark.django_db
def test_a_new_x_forwarded_for_per_request_does_not_escape_the_anonymous_count(anon_api) -> None:
    # issue 16, finding 3: with DRF's NUM_PROXIES unset, the whole header was the client's identity
    with rates(user="3/minute"):
        codes = [_guess_upload_token(anon_api, 1, f"10.9.{i}.1") for i in range(5)]
        assert codes == [401, 401, 401, 429, 429]
        assert _guess_upload_token(anon_api, 1, None, remote="192.0.2.7") == 401  # another address: its own count


@pytest.mark.django_db
def test_behind_trusted_proxies_each_client_is_counted_by_the_address_the_proxy_saw(anon_api) -> None:
    framework: dict[str, Any] = settings.REST_FRAMEWORK
    with override_settings(REST_FRAMEWORK={**framework, "NUM_PROXIES": 1,
                                           "DEFAULT_THROTTLE_RATES": {**framework["DEFAULT_THROTTLE_RATES"],
                                                                      "user": "2/minute"}}):  # fmt: skip
        # nginx ($proxy_add_x_forwarded_for) appends the address it saw to whatever the client sent
        first = [_guess_upload_token(anon_api, 1, f"forged-{i}, 198.51.100.1") for i in range(3)]
        assert first == [401, 401, 429]
        assert _guess_upload_token(anon_api, 1, "198.51.100.2") == 401  # one bucket per client, not per proxy


def _settings_probe(**env: str) -> subprocess.CompletedProcess[str]:
    prefixes = ("DJANGO_", "DATABASE_", "CELERY_", "CACHE_", "API_", "VRAMPLAN_")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    code = (
        "import django, json, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'vramplan.settings'; django.setup();"
        "from django.conf import settings; c = settings.CACHES['default'];"
        "print(json.dumps([c['BACKEND'], c.get('LOCATION'), c.get('KEY_PREFIX')]))"
    )
    return subprocess.run([sys.executable, "-c", code], env={**clean, "DJANGO_DEBUG": "1", **env}, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)  # fmt: skip


@pytest.mark.slow
def test_the_cache_follows_cache_url_then_the_redis_broker_then_process_memory() -> None:
    def cache_of(**env: str) -> list[Any]:
        result = _settings_probe(**env)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout.splitlines()[-1])

    broker = "redis://127.0.0.1:6379/7"
    assert cache_of(CACHE_URL="redis://cache.example.org:6380/2", CELERY_BROKER_URL=broker) == [
        "vramplan.cache.RedisCache", "redis://cache.example.org:6380/2", "vramplan-cache"]  # fmt: skip
    assert cache_of(CACHE_URL="redis://cache.example.org:6380/2?key_prefix=site-a")[2] == "site-a"
    assert cache_of(CELERY_BROKER_URL=broker, CACHE_KEY_PREFIX="blue") == ["vramplan.cache.RedisCache", broker, "blue"]
    assert cache_of()[0] == "django.core.cache.backends.locmem.LocMemCache"  # the embedded default: no server
    bad = _settings_probe(CACHE_URL="mongodb://x/1")
    assert bad.returncode != 0 and "CACHE_URL" in bad.stderr
    for variable in ("API_THROTTLE_ESTIMATE_RATE", "API_THROTTLE_RECOMMEND_RATE", "API_THROTTLE_JOB_START_RATE"):
        bad = _settings_probe(**{variable: "lots"})
        assert bad.returncode != 0 and variable in bad.stderr


def _broker_redis():
    url = os.environ.get("CELERY_BROKER_URL", "")
    if not url.startswith("redis://"):
        skip_or_fail("CELERY_BROKER_URL does not point at Redis")
    import redis

    return url, redis.Redis.from_url(url)


@pytest.mark.services
def test_clearing_the_cache_leaves_the_brokers_keys_alone() -> None:
    _, client = _broker_redis()
    assert settings.CACHES["default"]["BACKEND"] == "vramplan.cache.RedisCache"
    foreign = f"queue-like-{uuid.uuid4().hex}"
    client.set(foreign, "a message", ex=60)
    cache.set("mine", 1, 60)
    assert cache.get("mine") == 1
    cache.clear()
    assert cache.get("mine") is None
    assert client.get(foreign) == b"a message"  # FLUSHDB would have dropped it
    client.delete(foreign)


@pytest.mark.services
def test_the_cache_keeps_one_redis_client_and_it_works_from_many_threads() -> None:
    """Django builds a ``redis.Redis`` per cache call; this cache keeps one per connection pool, shared by threads."""
    _broker_redis()
    clients = {id(cache._cache.get_client(None)), id(cache._cache.get_client("k", write=True))}
    assert len(clients) == 1
    keys = [f"kept-{uuid.uuid4().hex}-{n}" for n in range(64)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda k: cache.set(k, k, 60), keys))
        assert list(pool.map(cache.get, keys)) == keys
    cache.delete_many(keys)


# --- the counter itself, on both kinds of cache ------------------------------------------------------------


def _counters() -> list[tuple[str, Any]]:
    from django.core.cache.backends.locmem import LocMemCache

    kinds: list[tuple[str, Any]] = [("process memory", LocMemCache(f"throttle-{uuid.uuid4().hex}", {}))]
    if settings.CACHES["default"]["BACKEND"] == "vramplan.cache.RedisCache":
        kinds.append(("redis", cache))
    return kinds


@pytest.mark.parametrize("kind", ["process memory", "redis"])
def test_concurrent_counts_are_all_counted_and_the_window_closes_on_time(kind: str) -> None:
    from vramplan.throttling import count_in_window

    counters = dict(_counters())
    if kind not in counters:
        skip_or_fail("the default cache is not Redis (set CELERY_BROKER_URL=redis://...)")
    counter = counters[kind]
    key = f"count-test-{uuid.uuid4().hex}"
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda _: count_in_window(counter, key, 2, time.time()), range(200)))
    assert sorted(count for count, _ in answers) == list(range(1, 201))  # none lost, none counted twice
    assert all(0 < left <= 2 for _, left in answers)
    time.sleep(2.1)
    count, left = count_in_window(counter, key, 2, time.time())
    assert count == 1 and left > 1.5  # a new window, opened by this request


@pytest.mark.services
@pytest.mark.django_db
def test_a_count_left_without_a_life_refuses_for_one_window_not_for_good(api) -> None:
    """Django's Redis ``incr`` is EXISTS then INCR: a key that expires between them is recreated by INCR
    with no time to live. Such a count must close like any window, not refuse its user forever."""
    _, client = _broker_redis()
    user = Token.objects.get(key=api._credentials["HTTP_AUTHORIZATION"].split()[1]).user
    key = cache.make_and_validate_key(f"throttle_estimate_u{user.pk}")
    client.set(key, 10**6)  # far over the limit, no expiry
    with rates(estimate="5/second"):
        assert_throttled(api.post("/api/v1/estimate", TINY_CPU_WORKLOAD, format="json"), 1)
        time.sleep(1.2)
        assert api.post("/api/v1/estimate", TINY_CPU_WORKLOAD, format="json").status_code == 200


# --- three processes, one count ---------------------------------------------------------------------------

WORKERS = 3
LIMIT = 5
REQUESTS = 15


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _database_url() -> str:
    db = connection.settings_dict
    password = f":{db['PASSWORD']}" if db["PASSWORD"] else ""
    return f"postgres://{db['USER']}{password}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def _post(url: str, token: str) -> tuple[int, dict[str, str], dict[str, Any]]:
    request = urllib.request.Request(
        url,
        data=json.dumps(TINY_CPU_WORKLOAD).encode(),
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.loads(error.read())


@pytest.mark.services
@pytest.mark.slow
def test_three_gunicorn_workers_share_one_count(transactional_db, django_user_model, tmp_path) -> None:
    if connection.vendor != "postgresql":
        skip_or_fail("DATABASE_URL does not point at PostgreSQL")
    broker, _ = _broker_redis()
    user = django_user_model.objects.create_user(username="loaded")
    token = Token.objects.create(user=user).key  # committed: the gunicorn workers read it
    port = _free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("API_", "CACHE_"))},
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "gunicorn-throttle-test-" + uuid.uuid4().hex,
        "ALLOWED_HOSTS": "127.0.0.1",
        "DATABASE_URL": _database_url(),  # the test database, by name
        "CELERY_BROKER_URL": broker,  # → the shared Redis cache
        "CACHE_KEY_PREFIX": f"throttle-test-{uuid.uuid4().hex}",  # nothing left from another run
        "API_THROTTLE_ESTIMATE_RATE": f"{LIMIT}/hour",
    }
    log, errors = tmp_path / "access.log", tmp_path / "gunicorn.log"
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "vramplan.wsgi:application", "--preload", "--workers", str(WORKERS),
         "--bind", f"127.0.0.1:{port}", "--access-logfile", str(log), "--access-logformat", "%(p)s %(m)s %(U)s %(s)s",
         "--error-logfile", str(errors)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while errors.read_text().count("Booting worker") < WORKERS if errors.exists() else True:
            assert server.poll() is None and time.monotonic() < deadline, errors.read_text() if errors.exists() else ""
            time.sleep(0.2)
        url = f"http://127.0.0.1:{port}/api/v1/estimate"
        with ThreadPoolExecutor(max_workers=2 * WORKERS) as pool:  # concurrent: every worker takes some
            answers = list(pool.map(lambda _: _post(url, token), range(REQUESTS)))
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)

    codes = Counter(code for code, _, _ in answers)
    assert codes == {200: LIMIT, 429: REQUESTS - LIMIT}, codes
    for code, headers, body in answers:
        if code == 429:
            seconds = int(headers["Retry-After"])
            assert 3000 < seconds <= 3600
            assert f"Expected available in {seconds} seconds." in body["detail"]
    # Which process served what: with a count per process, these workers would have let through
    # sum(min(n, LIMIT)) requests; the shared count held it at LIMIT.
    served = Counter(line.split()[0] for line in log.read_text().splitlines() if " POST /api/v1/estimate " in line)
    assert sum(served.values()) == REQUESTS
    assert len(served) >= 2, served
    assert sum(min(n, LIMIT) for n in served.values()) > LIMIT, served
