"""`StateStore` on Redis (redis.asyncio): a pool, short per-operation timeouts, a breaker.

Every operation is one pipelined round trip, bounded as a whole by `op_timeout_s` (a frozen
server accepts connections and never answers). Any Redis failure raises `StoreUnavailable` and
opens a breaker for `breaker_s`, during which calls fail at once instead of waiting on a dead
server. Once it has elapsed, one call (the probe) tries Redis while the others still fail at once;
a probe that succeeds closes the breaker, so state features resume by themselves and a dead server
costs one timeout per breaker period, not one per request in flight.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import orjson
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from proxy.adapters.redis_codec import (
    FENCED_SAVE,
    RELEASE_LOCK,
    compaction_from_json,
    compaction_to_json,
    decode_hash,
)
from proxy.adapters.redis_keys import Keys
from proxy.errors import StoreUnavailable
from proxy.types import JSON, SessionState, StoredCompaction

T = TypeVar("T")


class RedisStore:
    def __init__(
        self,
        url: str,
        *,
        key_prefix: str = "ctxproxy:",
        session_ttl_s: int = 604_800,
        op_timeout_s: float = 0.5,
        breaker_s: float = 1.0,
        events_max: int = 10_000,
        archive_max: int = 1_000,
    ) -> None:
        self._url = url
        self._op_timeout_s = op_timeout_s
        # redis-py types its replies as unions of every RESP shape; we decode at this edge.
        self._redis: Any = aioredis.Redis.from_url(
            url,
            socket_timeout=op_timeout_s,
            socket_connect_timeout=op_timeout_s,
            max_connections=64,
            retry_on_timeout=False,
        )
        self._keys = Keys(key_prefix)
        self._ttl = session_ttl_s
        self._breaker_s = breaker_s
        self._open_until = 0.0
        self._probing = False
        self._events_max = events_max
        self._archive_max = archive_max
        self._fenced_save = self._redis.register_script(FENCED_SAVE)
        self._release = self._redis.register_script(RELEASE_LOCK)

    @property
    def degraded(self) -> bool:
        return self._probing or time.monotonic() < self._open_until

    async def _guard(self, op: Callable[[], Awaitable[T]]) -> T:
        if self.degraded:
            raise StoreUnavailable("state store unavailable (breaker open)")
        probe = self._open_until > 0.0
        self._probing = probe
        try:
            async with asyncio.timeout(self._op_timeout_s):
                result = await op()
        except (RedisError, OSError, TimeoutError) as exc:
            self._open_until = time.monotonic() + self._breaker_s
            raise StoreUnavailable(f"state store unavailable: {type(exc).__name__}") from exc
        finally:
            if probe:
                self._probing = False
        self._open_until = 0.0
        return result

    async def ping(self) -> bool:
        try:
            return bool(await self._guard(self._redis.ping))
        except StoreUnavailable:
            return False

    async def load(self, tenant: str, session: str) -> SessionState:
        key = self._keys.session

        async def op() -> list[Any]:
            pipe = self._redis.pipeline(transaction=False)
            pipe.hgetall(key(tenant, session, "state"))
            pipe.hgetall(key(tenant, session, "decisions"))
            pipe.hgetall(key(tenant, session, "compactions"))
            return list(await pipe.execute())

        state, decisions, compactions = await self._guard(op)
        return SessionState(
            fields=decode_hash(state),
            decisions=decode_hash(decisions),
            compactions=tuple(compaction_from_json(v) for v in compactions.values()),
        )

    async def record_turn(
        self,
        tenant: str,
        session: str,
        *,
        fields: Mapping[str, str | int | float],
        counters: Mapping[str, int],
        decisions: Mapping[str, str],
    ) -> None:
        state = self._keys.session(tenant, session, "state")
        touched = [state, self._keys.sessions(tenant), self._keys.tenants()]

        async def op() -> None:
            pipe = self._redis.pipeline(transaction=False)
            pipe.hset(state, mapping={"tenant": tenant, "session": session, **fields})
            for name, delta in counters.items():
                pipe.hincrby(state, name, delta)
            if decisions:
                touched.append(self._keys.session(tenant, session, "decisions"))
                pipe.hset(touched[-1], mapping=dict(decisions))
            pipe.zadd(self._keys.sessions(tenant), {session: time.time()})
            pipe.sadd(self._keys.tenants(), tenant)
            for name in touched:
                pipe.expire(name, self._ttl)
            await pipe.execute()

        await self._guard(op)

    async def archive(self, tenant: str, session: str, messages_json: bytes) -> str:
        raw = self._keys.session(tenant, session, "raw")

        async def op() -> str:
            pipe = self._redis.pipeline(transaction=True)
            pipe.xadd(raw, {"messages": messages_json}, maxlen=self._archive_max, approximate=True)
            pipe.expire(raw, self._ttl)
            entry_id, _ = await pipe.execute()
            return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)

        return await self._guard(op)

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

        return await self._guard(op)

    async def acquire_lock(self, tenant: str, session: str, *, ttl_ms: int) -> str | None:
        token = secrets.token_hex(16)
        lock = self._keys.session(tenant, session, "lock")

        async def op() -> bool:
            return bool(await self._redis.set(lock, token, nx=True, px=ttl_ms))

        return token if await self._guard(op) else None

    async def release_lock(self, tenant: str, session: str, token: str) -> None:
        lock = self._keys.session(tenant, session, "lock")

        async def op() -> None:
            await self._release(keys=[lock], args=[token])

        await self._guard(op)

    async def put_output(self, tenant: str, output_id: str, text: str) -> None:
        async def op() -> None:
            await self._redis.set(self._keys.output(tenant, output_id), text, ex=self._ttl)

        await self._guard(op)

    async def get_output(self, tenant: str, output_id: str) -> str | None:
        async def op() -> bytes | None:
            found: bytes | None = await self._redis.get(self._keys.output(tenant, output_id))
            return found

        found = await self._guard(op)
        return None if found is None else found.decode()

    async def emit_event(self, event: Mapping[str, str]) -> None:
        events = self._keys.events()

        async def op() -> None:
            pipe = self._redis.pipeline(transaction=False)
            pipe.xadd(events, dict(event), maxlen=self._events_max, approximate=True)
            pipe.expire(events, self._ttl)
            await pipe.execute()

        await self._guard(op)

    async def read_events(
        self, last_id: str, *, block_ms: int, count: int
    ) -> list[tuple[str, dict[str, str]]]:
        # A blocking read needs its own connection whose timeout outlasts the block.
        reader: Any = aioredis.Redis.from_url(self._url, socket_timeout=block_ms / 1000 + 1)
        try:
            found = await reader.xread(
                {self._keys.events(): last_id}, count=count, block=block_ms or None
            )
        except (RedisError, OSError) as exc:
            raise StoreUnavailable(f"state store unavailable: {type(exc).__name__}") from exc
        finally:
            await reader.aclose()
        return [
            (entry_id.decode(), decode_hash(fields))
            for _, entries in found or []
            for entry_id, fields in entries
        ]

    async def list_sessions(self, tenant: str | None, *, limit: int) -> list[dict[str, str]]:
        async def op() -> list[dict[str, str]]:
            tenants = (
                [tenant]
                if tenant
                else sorted(t.decode() for t in await self._redis.smembers(self._keys.tenants()))
            )
            pipe = self._redis.pipeline(transaction=False)
            for name in tenants:
                pipe.zrevrange(self._keys.sessions(name), 0, limit - 1)
            ranked = await pipe.execute()
            pipe = self._redis.pipeline(transaction=False)
            for name, sessions in zip(tenants, ranked, strict=True):
                for sid in sessions:
                    pipe.hgetall(self._keys.session(name, sid.decode(), "state"))
            rows = [decode_hash(h) for h in await pipe.execute() if h]
            rows.sort(key=lambda r: float(r.get("updated_at", 0)), reverse=True)
            return rows[:limit]

        return await self._guard(op)

    async def session_detail(self, tenant: str, session: str) -> JSON | None:
        key = self._keys.session

        async def op() -> list[Any]:
            pipe = self._redis.pipeline(transaction=False)
            pipe.hgetall(key(tenant, session, "state"))
            pipe.hgetall(key(tenant, session, "compactions"))
            pipe.xlen(key(tenant, session, "raw"))
            pipe.strlen(key(tenant, session, "snapshot"))
            return list(await pipe.execute())

        state, compactions, archived, snapshot = await self._guard(op)
        if not state:
            return None
        return {
            "state": decode_hash(state),
            "compactions": [orjson.loads(v) for v in compactions.values()],
            "archive_entries": int(archived),
            "snapshot_bytes": int(snapshot),
        }

    async def close(self) -> None:
        await self._redis.aclose()
