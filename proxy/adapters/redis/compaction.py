"""The compactor's side of the Redis store: the archive, the fenced save and the session lock.

`CompactionWrites` is a mixin base of `RedisStore` (`proxy.adapters.redis.store`), which sets
the attributes declared below; it adds no call layer. Each method is one round trip under the
store's `Breaker`, so any Redis failure raises `StoreUnavailable`. `save_compaction` writes
nothing (returns False) once `lock_token` no longer holds the lock.
"""

from __future__ import annotations

import secrets
from typing import Any

from proxy.adapters.redis.breaker import Breaker
from proxy.adapters.redis.codec import compaction_to_json
from proxy.adapters.redis.keys import Keys
from proxy.types import StoredCompaction


class CompactionWrites:
    _redis: Any
    _keys: Keys
    _ttl: int
    _breaker: Breaker
    _archive_max: int
    _fenced_save: Any
    _release: Any

    async def archive(self, tenant: str, session: str, messages_json: bytes) -> str:
        raw = self._keys.session(tenant, session, "raw")

        async def op() -> str:
            pipe = self._redis.pipeline(transaction=True)
            pipe.xadd(raw, {"messages": messages_json}, maxlen=self._archive_max, approximate=True)
            pipe.expire(raw, self._ttl)
            entry_id, _ = await pipe.execute()
            return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)

        return await self._breaker.call(op)

    async def save_compaction(
        self,
        tenant: str,
        session: str,
        compaction: StoredCompaction,
        *,
        snapshot_json: bytes,
        lock_token: str,
    ) -> bool:
        keys = [
            self._keys.session(tenant, session, kind)
            for kind in ("lock", "compactions", "snapshot")
        ]
        args: list[str | bytes | int] = [
            lock_token,
            compaction.prefix_hash,
            compaction_to_json(compaction),
            snapshot_json,
            self._ttl,
        ]

        async def op() -> bool:
            return bool(await self._fenced_save(keys=keys, args=args))

        return await self._breaker.call(op)

    async def acquire_lock(self, tenant: str, session: str, *, ttl_ms: int) -> str | None:
        token = secrets.token_hex(16)
        lock = self._keys.session(tenant, session, "lock")

        async def op() -> bool:
            return bool(await self._redis.set(lock, token, nx=True, px=ttl_ms))

        return token if await self._breaker.call(op) else None

    async def release_lock(self, tenant: str, session: str, token: str) -> None:
        lock = self._keys.session(tenant, session, "lock")

        async def op() -> None:
            await self._release(keys=[lock], args=[token])

        await self._breaker.call(op)
