"""Per-user rate limits, counted in the shared cache (``settings.CACHES``) so every web process sees one count.

- ``UserThrottle`` (scope ``user``, ``API_THROTTLE_RATE``): every API request, as before;
- ``EstimateThrottle`` (``estimate``, ``API_THROTTLE_ESTIMATE_RATE``): POST /estimate and POST /workloads/,
  which run the budget engine;
- ``RecommendThrottle`` (``recommend``, ``API_THROTTLE_RECOMMEND_RATE``): recommendations, which judge every
  catalog configuration;
- ``JobStartThrottle`` (``job_start``, ``API_THROTTLE_JOB_START_RATE``): POST /orders/{id}/acceptance-jobs/,
  which queues work on a GPU node;
- ``one_at_a_time``: recommendations also run one at a time per account (a rate counts requests, not the seconds
  each one holds a worker).

DRF's ``SimpleRateThrottle`` reads a list from the cache, appends and writes it back: two processes
that read together both write, and one request is lost, so N workers can let through up to N times the
rate. Here a window is one counter, opened by a user's first request, that allows ``N`` requests until it
expires ``period`` seconds later; it is counted atomically (``count_in_window``: one Lua script on Redis,
``add`` and ``incr`` in process memory), so concurrent requests from any number of processes are counted
exactly. A refused request answers 429 with ``Retry-After``: the seconds until the
window closes.

An anonymous request is counted by its client address (``client_address``): REMOTE_ADDR, unless
``VRAMPLAN_TRUSTED_PROXIES`` (DRF's ``NUM_PROXIES``) says how many proxies in front append to
``X-Forwarded-For``. DRF without ``NUM_PROXIES`` takes the whole header as the address, so a client that
sends a new header with each request is never counted.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.core import checks
from django.core.cache import cache
from rest_framework.exceptions import Throttled
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle


class ScopedUserThrottle(SimpleRateThrottle):
    """``DEFAULT_THROTTLE_RATES[scope]`` requests per user (per client address when anonymous), for the
    HTTP methods in ``methods`` (all when None)."""

    scope = "user"
    methods: frozenset[str] | None = None

    def __init__(self) -> None:  # the rate is read per request: override_settings and env changes apply
        self.rate = self.get_rate()
        self.num_requests, self.duration = self.parse_rate(self.rate)
        self.retry_after_s = 1.0

    def get_rate(self) -> str:
        return str(api_settings.DEFAULT_THROTTLE_RATES[self.scope])

    def get_ident(self, request) -> str:
        return client_address(request)

    def get_cache_key(self, request, view) -> str | None:
        if self.methods is not None and request.method not in self.methods:
            return None
        user = request.user
        ident = f"u{user.pk}" if user and user.is_authenticated else f"a{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}

    def allow_request(self, request, view) -> bool:
        key = self.get_cache_key(request, view)
        if key is None or self.num_requests is None or self.duration is None:
            return True
        count, left_s = count_in_window(self.cache, key, self.duration, self.timer())
        if count <= self.num_requests:
            return True
        self.retry_after_s = max(1.0, left_s)
        return False

    def wait(self) -> float:
        return float(math.ceil(self.retry_after_s))

    def refund(self, request, view) -> None:
        """Take back the count of ``request``, whose answer did no work (a job start another request won)."""
        key = self.get_cache_key(request, view)
        if key is not None:
            uncount_in_window(self.cache, key)


class UserThrottle(ScopedUserThrottle):
    scope = "user"


class EstimateThrottle(ScopedUserThrottle):
    scope = "estimate"
    methods = frozenset({"POST"})


class RecommendThrottle(ScopedUserThrottle):
    scope = "recommend"


class JobStartThrottle(ScopedUserThrottle):
    scope = "job_start"
    methods = frozenset({"POST"})


def client_address(request: Any) -> str:
    """The client's address: REMOTE_ADDR, or with ``N`` = ``VRAMPLAN_TRUSTED_PROXIES`` proxies in front, the
    ``N``-th address from the end of ``X-Forwarded-For`` (each trusted proxy appends the address it saw; what
    the client wrote itself comes before them and is never used)."""
    meta = request.META
    remote = str(meta.get("REMOTE_ADDR") or "")
    trusted = int(api_settings.NUM_PROXIES or 0)
    forwarded = [a.strip() for a in str(meta.get("HTTP_X_FORWARDED_FOR") or "").split(",") if a.strip()]
    if trusted == 0 or not forwarded:
        return remote
    return forwarded[-min(trusted, len(forwarded))]


def count_in_window(cache: Any, key: str, duration: int, now: float) -> tuple[int, float]:
    """One more request under ``key`` in its window of ``duration`` seconds, opened by its first request:
    (requests so far in the window, seconds until it closes). The shared Redis cache does it in one atomic
    round trip (``vramplan.cache.RedisCache.count_in_window``); any other cache with two keys created by
    ``add`` and counted by ``incr`` (atomic in process memory, ``make run``'s cache)."""
    counter = getattr(cache, "count_in_window", None)
    if counter is not None:
        count, left_s = counter(key, duration)
        return int(count), float(left_s)
    count_key, opened_key = f"{key}:n", f"{key}:t"
    cache.add(opened_key, now, duration)
    cache.add(count_key, 0, duration)
    try:
        count = int(cache.incr(count_key))
    except ValueError:  # the window expired between add and incr: this request opens the next one
        cache.set(opened_key, now, duration)
        cache.set(count_key, 1, duration)
        count = 1
    opened = cache.get(opened_key) if count > 1 else now
    return count, (opened if opened is not None else now) + duration - now


def uncount_in_window(cache: Any, key: str) -> None:
    """One event fewer under ``key`` in its open window (none when it has closed); its end stays where it was."""
    uncounter = getattr(cache, "uncount_in_window", None)
    if uncounter is not None:
        uncounter(key)
        return
    try:
        if int(cache.get(f"{key}:n") or 0) > 0:
            cache.decr(f"{key}:n")
    except ValueError:  # the window closed meanwhile: nothing left to take back
        pass


def peek_in_window(cache: Any, key: str, duration: int, now: float) -> tuple[int, float]:
    """``count_in_window`` without counting: (events so far in ``key``'s window, seconds until it closes);
    (0, 0.0) when no window is open."""
    peek = getattr(cache, "peek_in_window", None)
    if peek is not None:
        count, left_s = peek(key)
        return int(count), float(left_s)
    count = cache.get(f"{key}:n")
    if not count:
        return 0, 0.0
    opened = cache.get(f"{key}:t")
    return int(count), max(0.0, (opened if opened is not None else now) + duration - now)


def forget_window(cache: Any, key: str) -> None:
    """Close ``key``'s window now (both shapes ``count_in_window`` stores it in)."""
    cache.delete_many([key, f"{key}:n", f"{key}:t"])


def throttles(*scoped: type[ScopedUserThrottle]) -> list[Any]:
    """A view's throttle classes: the API-wide ones (``DEFAULT_THROTTLE_CLASSES``) plus ``scoped``."""
    return [*api_settings.DEFAULT_THROTTLE_CLASSES, *scoped]


@checks.register(checks.Tags.security, deploy=True)
def check_shared_throttle_cache(app_configs, **kwargs) -> list[checks.CheckMessage]:
    """``check --deploy``: throttles counted in process memory let each gunicorn worker allow the full rate."""
    backend = settings.CACHES.get("default", {}).get("BACKEND", "")
    if backend.endswith(("LocMemCache", "DummyCache")):
        return [
            checks.Warning(
                f"The default cache is {backend.rsplit('.', 1)[-1]}: API rate limits are counted per process, "
                "so every web worker allows the full rate.",
                hint="Set CACHE_URL (e.g. redis://HOST:6379/1) or a redis:// CELERY_BROKER_URL.",
                id="vramplan.W001",
            )
        ]
    return []


#: How long a request of a kind that runs one at a time holds its user's slot at most: past it the slot is free again
#: even if the process that took it died mid-request (a recommendation of a training workload over the full catalog
#: takes 2-7 s, issue 16's report; seconds).
ONE_AT_A_TIME_HOLD_S = 120


@contextmanager
def one_at_a_time(request: Any, kind: str) -> Iterator[None]:
    """At most one request of ``kind`` in flight per user (per client address when anonymous), over every process
    sharing the default cache: an expensive request (a recommendation judges every catalog configuration, seconds
    for a training workload) cannot hold several of the server's workers at once, so one user's long requests leave
    the others' answered (issue 16, finding 9). The slot is taken with the cache's atomic ``add`` and freed when the
    request ends, whatever its answer; a second request meanwhile is a 429 that says why."""
    user = getattr(request, "user", None)
    ident = f"u{user.pk}" if user is not None and user.is_authenticated else f"a{client_address(request)}"
    slots = max(1, int(getattr(settings, "VRAMPLAN_RECOMMENDATIONS_PER_ACCOUNT", 1)))
    key = None
    for slot in range(slots):  # the first free slot, taken atomically
        candidate = f"vramplan:one-at-a-time:{kind}:{ident}:{slot}"
        if cache.add(candidate, 1, timeout=ONE_AT_A_TIME_HOLD_S):
            key = candidate
            break
    if key is None:
        running = f"Another {kind} of yours is" if slots == 1 else f"{slots} other {kind}s of yours are"
        raise Throttled(
            wait=1,
            detail=f"{running} still running: {slots} at a time per account (VRAMPLAN_RECOMMENDATIONS_PER_ACCOUNT),"
            " so that one account's long requests cannot hold every server worker. Send this one again when one"
            " has answered.",
        )
    try:
        yield
    finally:
        cache.delete(key)
