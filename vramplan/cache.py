"""The shared cache backend: Django's Redis cache, minus one hazard.

The default cache lives in Celery's broker database when ``CELERY_BROKER_URL`` is Redis (see
``settings.CACHES``). Django's ``RedisCache.clear()`` is ``FLUSHDB``, which would also drop every queued
job message and kombu's queue bindings; this one deletes only the keys under its ``KEY_PREFIX``.
"""

from __future__ import annotations

import re

from django.core.cache.backends.redis import RedisCache as DjangoRedisCache

_GLOB_SPECIAL = re.compile(r"([*?\[\]\\])")


class RedisCache(DjangoRedisCache):
    """Django's Redis cache whose ``clear()`` removes this cache's keys only (``KEY_PREFIX:*``)."""

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
