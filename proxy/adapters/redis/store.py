"""`StateStore` on Redis (redis.asyncio): a pool, short per-operation timeouts, a breaker.

Every operation is one pipelined round trip, run through the `Breaker` of
`proxy.adapters.redis.breaker` (its docstring tells what a failure does); any Redis failure
raises `StoreUnavailable`. The compactor's writes: the archive (a capped stream per session), the
session lock, and the fenced save (`codec.FENCED_SAVE`), which writes nothing and returns False
once `lock_token` no longer holds the lock. The operator's reads are in `admin`.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain
from typing import Any

import redis.asyncio as aioredis

from proxy.adapters.redis import admin
from proxy.adapters.redis.breaker import Breaker
from proxy.adapters.redis.codec import (
    FENCED_SAVE,
    RELEASE_LOCK,
    compaction_from_json,
    compaction_to_json,
    decode_hash,
)
from proxy.adapters.redis.facts import VERSION, RedisFacts
from proxy.adapters.redis.keys import Keys
from proxy.adapters.redis.pool import Command, open_pool, read_hash_reply, run_pipeline
from proxy.errors import StoreUnavailable
from proxy.logs import redacted_url
from proxy.memory.ledger import Scope
from proxy.types import JSON, SessionState, StoredCompaction

MAX_CONNECTIONS = 64
"""Connections to Redis per process; as many store operations run at once, the rest queue."""
SESSION_HASHES = ("state", "decisions", "compactions")
"""The hashes a session's turn is loaded from, in `load`'s order."""


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
        # redis-py types its replies as unions of every RESP shape; we decode at this edge.
        # No socket timeout: the breaker bounds every operation as a whole (`op_timeout_s`), and a
        # per-read one would arm a timer for each reply of a pipeline (a dozen per request). A
        # read cut by the breaker's timeout drops its connection (redis-py disconnects on any
        # exception mid-read), so no reply is left for the next command to misread.
        self._pool = open_pool(
            url,
            socket_timeout=None,
            socket_connect_timeout=op_timeout_s,
            max_connections=MAX_CONNECTIONS,
            retry_on_timeout=False,
        )
        self._redis: Any = aioredis.Redis.from_pool(self._pool)
        self._keys = Keys(key_prefix)
        self._ttl = session_ttl_s
        self._breaker = Breaker(
            op_timeout_s=op_timeout_s,
            breaker_s=breaker_s,
            max_concurrent=MAX_CONNECTIONS,
            name=f"Redis at {redacted_url(url)}",
        )
        self._events_max = events_max
        self._archive_max = archive_max
        self._fenced_save = self._redis.register_script(FENCED_SAVE)
        self._release = self._redis.register_script(RELEASE_LOCK)
        self._facts = RedisFacts(self._redis, self._keys, self._breaker, session_ttl_s=self._ttl)

    @property
    def degraded(self) -> bool:
        return self._breaker.degraded

    async def ping(self) -> bool:
        try:
            return bool(await self._breaker.call(self._redis.ping))
        except StoreUnavailable:
            return False

    async def load(self, tenant: str, session: str, *, memory: Scope | None = None) -> SessionState:
        key = self._keys.session
        commands: list[Command] = [("HGETALL", key(tenant, session, p)) for p in SESSION_HASHES]
        facts = ""
        if memory is not None:  # the facts' version only: they are cached while it holds
            facts = self._facts.key(tenant, session if memory == "session" else None)
            commands.append(("HGET", facts, VERSION))
        replies = await self._breaker.call(lambda: run_pipeline(self._pool, commands))
        state, decisions, compactions = map(read_hash_reply, replies[:3])
        return SessionState(
            fields=decode_hash(state),
            decisions=decode_hash(decisions),
            compactions=tuple(compaction_from_json(v) for v in compactions.values()),
            memory=await self._facts.current(facts, replies[3]) if facts else (),
        )

    async def add_facts(
        self, tenant: str, owner: str | None, lines: Sequence[str], *, max_lines: int
    ) -> int:
        return await self._facts.add(tenant, owner, lines, max_lines=max_lines)

    async def read_facts(self, tenant: str, owner: str | None) -> tuple[str, ...]:
        return await self._facts.read(tenant, owner)

    async def forget_facts(self, tenant: str, owner: str | None, pattern: str) -> int:
        return await self._facts.forget(tenant, owner, pattern)

    async def record_turn(
        self,
        tenant: str,
        session: str,
        *,
        fields: Mapping[str, str | int | float],
        counters: Mapping[str, int],
        decisions: Mapping[str, str],
        events: Sequence[Mapping[str, str]] = (),
    ) -> None:
        keys = self._keys
        state = keys.session(tenant, session, "state")
        commands: list[Command] = [
            ("HSET", state, *_pairs({"tenant": tenant, "session": session, **fields}))
        ]
        commands += [("HINCRBY", state, name, delta) for name, delta in counters.items()]
        touched = [state, keys.sessions(tenant), keys.tenants()]
        if decisions:
            touched.append(keys.session(tenant, session, "decisions"))
            commands.append(("HSET", touched[-1], *_pairs(decisions)))
        commands.append(("ZADD", keys.sessions(tenant), time.time(), session))
        commands.append(("SADD", keys.tenants(), tenant))
        if events:  # in the same round trip (an event costs one otherwise)
            touched.append(keys.events())
            trim = ("XADD", touched[-1], "MAXLEN", "~", self._events_max, "*")
            commands += [(*trim, *_pairs(event)) for event in events]
        commands += [("EXPIRE", name, self._ttl) for name in touched]
        await self._breaker.call(lambda: run_pipeline(self._pool, commands))

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

    async def put_output(self, tenant: str, output_id: str, text: str) -> None:
        async def op() -> None:
            await self._redis.set(self._keys.output(tenant, output_id), text, ex=self._ttl)

        await self._breaker.call(op)

    async def get_output(self, tenant: str, output_id: str) -> str | None:
        async def op() -> bytes | None:
            found: bytes | None = await self._redis.get(self._keys.output(tenant, output_id))
            return found

        found = await self._breaker.call(op)
        return None if found is None else found.decode()

    async def emit_event(self, event: Mapping[str, str]) -> None:
        events = self._keys.events()
        commands: list[Command] = [
            ("XADD", events, "MAXLEN", "~", self._events_max, "*", *_pairs(event)),
            ("EXPIRE", events, self._ttl),
        ]
        await self._breaker.call(lambda: run_pipeline(self._pool, commands))

    async def read_events(
        self, last_id: str, *, block_ms: int, count: int
    ) -> list[tuple[str, dict[str, str]]]:
        return await admin.read_events(
            self._url, self._keys, last_id, block_ms=block_ms, count=count
        )

    async def list_sessions(self, tenant: str | None, *, limit: int) -> list[dict[str, str]]:
        return await self._breaker.call(
            lambda: admin.list_sessions(self._redis, self._keys, tenant, limit=limit)
        )

    async def session_detail(self, tenant: str, session: str) -> JSON | None:
        replies = await self._breaker.call(
            lambda: admin.fetch_session_detail(self._redis, self._keys, tenant, session)
        )
        return admin.session_detail_from(replies)

    async def close(self) -> None:
        await self._redis.aclose()


def _pairs(mapping: Mapping[str, str | int | float]) -> Iterable[str | int | float]:
    """`{field: value}` as the flat `field value ...` arguments of `HSET` and `XADD`."""
    return chain.from_iterable(mapping.items())
