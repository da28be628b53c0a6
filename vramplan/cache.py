"""The shared cache backend: Django's Redis cache, minus one hazard, plus one atomic counter.

The default cache lives in Celery's broker database when ``CELERY_BROKER_URL`` is Redis (see
``settings.CACHES``). Django's ``RedisCache.clear()`` is ``FLUSHDB``, which would also drop every queued
job message and kombu's queue bindings; this one deletes only the keys under its ``KEY_PREFIX``.

``count_in_window`` is what the API's rate limits and the sign-in limit count with (``vramplan.throttling``,
``vramplan.login_limit``): one Redis round trip, atomic. Django's ``incr`` is two commands (``EXISTS``, then
``INCR``): a key that expires between them comes back from ``INCR`` without a time to live, and a count that
never expires refuses its user for good. ``peek_in_window`` reads a count without adding to it;
``uncount_in_window`` takes one back (a job start that started nothing).

Django makes a new Redis client object for every call; this one keeps one per connection pool.
"""

from __future__ import annotations

import re
from typing import Any

from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient

_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")

#: Count one more event in the window at KEYS[1], which opens (with a life of ARGV[1] ms) at its first event;
#: answer the count and the milliseconds the window has left. A key found without a life (written by
#: anything else) is given one, so no count outlives a window by more than one window.
_COUNT_IN_WINDOW = """
local n = redis.call('INCR', KEYS[1])
local left = redis.call('PTTL', KEYS[1])
if n == 1 or left < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  left = tonumber(ARGV[1])
end
return {n, left}
"""

#: The count at KEYS[1] and the milliseconds its window has left, counting nothing (0 and -2: no window).
_PEEK_IN_WINDOW = """
return {tonumber(redis.call('GET', KEYS[1]) or '0'), redis.call('PTTL', KEYS[1])}
"""

#: One event fewer at KEYS[1] while its window is open (DECR keeps the key's time to live).
_UNCOUNT_IN_WINDOW = """
if tonumber(redis.call('GET', KEYS[1]) or '0') > 0 then
  return redis.call('DECR', KEYS[1])
end
return 0
"""


class _KeptClients(RedisCacheClient):
    """Django's Redis client maker, keeping one ``redis.Redis`` per connection pool: Django builds a new one for
    every cache call (``get_client``), each building its table of response callbacks anew, and a recommendation
    request (throttled, counted one at a time) makes five calls. A ``redis.Redis`` is safe to share between threads
    (it takes a connection from its pool per command), and its pool notices a fork. ``_get_connection_pool`` and
    ``_client`` are Django's own (django/core/cache/backends/redis.py), not in its type stubs."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, Any] = {}

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        pool = self._get_connection_pool(write)  # type: ignore[attr-defined]  # kept by Django, one per server
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients.setdefault(id(pool), self._client(connection_pool=pool))  # type: ignore[attr-defined]
        return client


class RedisCache(DjangoRedisCache):
    """Django's Redis cache whose ``clear()`` removes this cache's keys only (``KEY_PREFIX:*``), with its clients
    kept (``_KeptClients``)."""

    def __init__(self, server: str, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = _KeptClients

    def clear(self) -> None:
        if not self.key_prefix:
            super().clear()
            return
        client = self._cache.get_client(None, write=True)
        pattern = _GLOB_SPECIAL.sub(r"\\\1", self.key_prefix) + ":*"
        batch: list[bytes] = []
        for key in client.scan_iter(match=pattern, count=1000):
            batch.append(key)
            if len(batch) >= 1000:
                client.delete(*batch)
                batch.clear()
        if batch:
            client.delete(*batch)

    def count_in_window(self, key: str, window_s: int) -> tuple[int, float]:
        """One more event under ``key`` in its ``window_s``-second window; (events so far in the window,
        seconds until it closes). Atomic: any number of processes counting at once are all counted."""
        redis_key = self.make_and_validate_key(key)
        client = self._cache.get_client(redis_key, write=True)
        count, left_ms = client.eval(_COUNT_IN_WINDOW, 1, redis_key, int(window_s * 1000))
        return int(count), int(left_ms) / 1000.0

    def peek_in_window(self, key: str) -> tuple[int, float]:
        """``count_in_window``'s (count, seconds left) for ``key`` without counting; (0, 0.0) with no window."""
        redis_key = self.make_and_validate_key(key)
        client = self._cache.get_client(redis_key)
        count, left_ms = client.eval(_PEEK_IN_WINDOW, 1, redis_key)
        return int(count), max(0, int(left_ms)) / 1000.0

    def uncount_in_window(self, key: str) -> None:
        """One event fewer under ``key`` while its window is open (``count_in_window`` taken back)."""
        redis_key = self.make_and_validate_key(key)
        self._cache.get_client(redis_key, write=True).eval(_UNCOUNT_IN_WINDOW, 1, redis_key)
