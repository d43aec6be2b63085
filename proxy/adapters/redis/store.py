"""`StateStore` on Redis (redis.asyncio): one server, a Sentinel set or a Cluster, with short
per-operation timeouts and a breaker.

Every operation is one call of the `Wire` (`proxy.adapters.redis.wire`): batches of commands,
each batch in one cluster slot, all sent at once (one round trip on one server), run through the
`Breaker` of `proxy.adapters.redis.breaker` (its docstring tells what a failure does); any Redis
failure raises `StoreUnavailable`. A request's record is two batches: the session's slot, and
its shard's (events, sessions index; `keys`). The compactor's writes: the archive (a capped
stream per session), the session lock, and the fenced save (`codec.FENCED_SAVE`), which writes
nothing and returns False once `lock_token` no longer holds the lock. Learned facts (`facts`,
one hash per owner), Responses records and the handle secret are single-key batches too; a
load's facts version (`P{t}:memory`, another slot) is its own batch beside the session's, in the
same round trip. The operator's reads are in `admin` and `events`.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain
from typing import Any

from proxy.adapters.redis import admin, events
from proxy.adapters.redis.breaker import Breaker
from proxy.adapters.redis.codec import (
    ARCHIVE,
    FENCED_SAVE,
    RELEASE_LOCK,
    compaction_from_json,
    compaction_to_json,
    decode_hash,
    read_hash_reply,
)
from proxy.adapters.redis.facts import VERSION, RedisFacts
from proxy.adapters.redis.keys import SHARDS, Keys, shard_of
from proxy.adapters.redis.pool import Command
from proxy.adapters.redis.wire import open_wire
from proxy.errors import StoreUnavailable
from proxy.logs import redacted_url
from proxy.memory.ledger import Scope
from proxy.ports import RecordKind
from proxy.settings import parse_store_url
from proxy.types import JSON, SessionState, StoredCompaction

MAX_CONNECTIONS = 64
"""Connections to Redis per process (per node of a cluster); as many store operations run at
once, the rest queue."""
SESSION_HASHES = ("state", "decisions", "compactions")
"""The hashes a session's turn is loaded from, in `load`'s order."""
FAILOVER_BREAKER_S = 0.25
"""The breaker's period on a cluster or a Sentinel set."""
MAX_UNRELEASED = 1_000
"""Locks remembered for release at the session's next compaction (a bound, not a queue)."""


class RedisStore:
    def __init__(
        self,
        url: str,
        *,
        key_prefix: str = "ctxproxy:",
        session_ttl_s: int = 604_800,
        op_timeout_s: float = 0.5,
        breaker_s: float | None = None,
        events_max: int = 10_000,
        archive_max: int = 1_000,
    ) -> None:
        """`url`: any Redis URL `proxy.settings.parse_store_url` accepts. `breaker_s`: how long
        the breaker stays open after a failure; by default 1 s on one server, and 0.25 s on a
        cluster or a Sentinel set, where a failure is mostly a failover to follow soon (a dead
        node refuses at once: a probe costs little)."""
        # redis-py types its replies as unions of every RESP shape; we decode at this edge. A
        # read cut by the breaker's timeout drops its connection (redis-py disconnects on any
        # exception mid-read), so no reply is left for the next command to misread.
        address = parse_store_url(url)
        if breaker_s is None:
            breaker_s = 1.0 if address.kind == "redis" else FAILOVER_BREAKER_S
        self._wire = open_wire(
            address,
            op_timeout_s=op_timeout_s,
            breaker_s=breaker_s,
            max_connections=MAX_CONNECTIONS,
        )
        self._unreleased: dict[str, str] = {}
        """Locks this process took and could not release, by key: their tokens."""
        self._keys = Keys(key_prefix)
        self._ttl = session_ttl_s
        self._breaker = Breaker(
            op_timeout_s=op_timeout_s,
            breaker_s=breaker_s,
            max_concurrent=MAX_CONNECTIONS,
            name=f"Redis at {redacted_url(url)}",
        )
        self._shard_max = max(1, events_max // SHARDS)
        self._archive_max = archive_max
        self._facts = RedisFacts(self._run, self._keys, session_ttl_s=self._ttl)

    @property
    def degraded(self) -> bool:
        return self._breaker.degraded

    async def ping(self) -> bool:
        try:
            return await self._breaker.call(self._wire.ping)
        except StoreUnavailable:
            return False

    async def _run(self, *batches: Sequence[Command]) -> list[list[Any]]:
        return await self._breaker.call(lambda: self._wire.run(batches))

    async def load(self, tenant: str, session: str, *, memory: Scope | None = None) -> SessionState:
        key = self._keys.session
        batches: list[list[Command]] = [
            [("HGETALL", key(tenant, session, p)) for p in SESSION_HASHES]
        ]
        facts = ""
        if memory is not None:  # the facts' version only: they are cached while it holds
            # A tenant's facts are in another slot: their own batch, in the same round trip.
            facts = self._facts.key(tenant, session if memory == "session" else None)
            batches.append([("HGET", facts, VERSION)])
        replies = await self._breaker.call(lambda: self._load(batches))
        state, decisions, compactions = map(read_hash_reply, replies[0])
        version = replies[1] if facts else []
        return SessionState(
            fields=decode_hash(state),
            decisions=decode_hash(decisions),
            compactions=tuple(compaction_from_json(v) for v in compactions.values()),
            memory=await self._facts.current(facts, version[0]) if version else (),
        )

    async def _load(self, batches: Sequence[Sequence[Command]]) -> list[list[Any]]:
        """The session's replies, and the facts' version's, or [] for it when its node is out
        (on a cluster: the request keeps its session's state, without the facts)."""
        own, *version = await self._wire.run_each(batches)
        if isinstance(own, Exception):
            raise own
        return [own, *([] if isinstance(v, Exception) else v for v in version)]

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
        own: list[Command] = [
            ("HSET", state, *_pairs({"tenant": tenant, "session": session, **fields}))
        ]
        own += [("HINCRBY", state, name, delta) for name, delta in counters.items()]
        touched = [state]
        if decisions:
            touched.append(keys.session(tenant, session, "decisions"))
            own.append(("HSET", touched[-1], *_pairs(decisions)))
        own += [("EXPIRE", name, self._ttl) for name in touched]
        # The sessions index and the events (in the same round trip: an event costs one
        # otherwise) go to the session's shard, in another slot than its own keys.
        shard = shard_of(tenant, session)
        index, tenants = keys.sessions(shard, tenant), keys.tenants(shard)
        shared: list[Command] = [
            ("ZADD", index, time.time(), session),
            ("EXPIRE", index, self._ttl),
            ("SADD", tenants, tenant),
            ("EXPIRE", tenants, self._ttl),
            *self._event_commands(shard, events),
        ]
        await self._run(own, shared)

    def _event_commands(self, shard: int, events: Sequence[Mapping[str, str]]) -> list[Command]:
        if not events:
            return []
        stream = self._keys.events(shard)
        trim = ("XADD", stream, "MAXLEN", "~", self._shard_max, "*")
        return [*((*trim, *_pairs(event)) for event in events), ("EXPIRE", stream, self._ttl)]

    async def archive(self, tenant: str, session: str, messages_json: bytes) -> str:
        raw = self._keys.session(tenant, session, "raw")
        args = (messages_json, self._archive_max, self._ttl)
        [[entry_id]] = await self._run([("EVAL", ARCHIVE, 1, raw, *args)])
        return bytes(entry_id).decode()

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
        args = (
            lock_token,
            compaction.prefix_hash,
            compaction_to_json(compaction),
            snapshot_json,
            self._ttl,
        )
        [[saved]] = await self._run([("EVAL", FENCED_SAVE, len(keys), *keys, *args)])
        return bool(saved)

    async def acquire_lock(self, tenant: str, session: str, *, ttl_ms: int) -> str | None:
        """The lock, after releasing the one this process could not release (Redis was
        unreachable then: a failover) if it still stands, in the same round trip."""
        token = secrets.token_hex(16)
        lock = self._keys.session(tenant, session, "lock")
        batch: list[Command] = [("SET", lock, token, "NX", "PX", ttl_ms)]
        stale = self._unreleased.get(lock)
        if stale is not None:
            batch.insert(0, ("EVAL", RELEASE_LOCK, 1, lock, stale))
        [replies] = await self._run(batch)
        self._unreleased.pop(lock, None)
        return token if replies[-1] else None

    async def release_lock(self, tenant: str, session: str, token: str) -> None:
        lock = self._keys.session(tenant, session, "lock")
        try:
            await self._run([("EVAL", RELEASE_LOCK, 1, lock, token)])
        except StoreUnavailable:
            if len(self._unreleased) < MAX_UNRELEASED:
                self._unreleased[lock] = token
            raise

    async def put_output(self, tenant: str, output_id: str, text: str) -> None:
        await self._run([("SET", self._keys.output(tenant, output_id), text, "EX", self._ttl)])

    async def get_output(self, tenant: str, output_id: str) -> str | None:
        [[found], [legacy]] = await self._run(
            [("GET", self._keys.output(tenant, output_id))],
            [("GET", self._keys.legacy_output(tenant, output_id))],
        )
        text = found if found is not None else legacy
        return None if text is None else bytes(text).decode()

    async def put_record(self, tenant: str, kind: RecordKind, record_id: str, value: bytes) -> None:
        key = self._keys.record(tenant, kind, record_id)
        await self._run([("SET", key, value, "EX", self._ttl)])

    async def get_record(self, tenant: str, kind: RecordKind, record_id: str) -> bytes | None:
        [[found]] = await self._run([("GET", self._keys.record(tenant, kind, record_id))])
        return None if found is None else bytes(found)

    async def handle_secret(self, candidate: bytes) -> bytes:
        key = self._keys.handle_secret()  # one key: one slot in a cluster too
        [[_, kept]] = await self._run([("SET", key, candidate, "NX"), ("GET", key)])
        return bytes(kept)

    async def emit_event(self, event: Mapping[str, str]) -> None:
        shard = shard_of(event.get("tenant", ""), event.get("session", ""))
        await self._run(self._event_commands(shard, [event]))

    async def read_events(
        self, last_id: str, *, block_ms: int, count: int
    ) -> list[tuple[str, dict[str, str]]]:
        """Every shard's events after `last_id`, merged in id order (`events.wait_for`)."""
        return await events.wait_for(self._read_shards, last_id, block_ms=block_ms, count=count)

    async def _read_shards(self, after: str, count: int) -> list[events.ShardRead]:
        return await self._breaker.call(
            lambda: events.read_once(self._wire, self._keys, after, count)
        )

    async def list_sessions(self, tenant: str | None, *, limit: int) -> list[dict[str, str]]:
        return await self._breaker.call(
            lambda: admin.list_sessions(self._wire, self._keys, tenant, limit=limit)
        )

    async def session_detail(self, tenant: str, session: str) -> JSON | None:
        replies = await self._breaker.call(
            lambda: admin.fetch_session_detail(self._wire, self._keys, tenant, session)
        )
        return admin.session_detail_from(replies)

    async def close(self) -> None:
        await self._wire.close()


def _pairs(mapping: Mapping[str, str | int | float]) -> Iterable[str | int | float]:
    """`{field: value}` as the flat `field value ...` arguments of `HSET` and `XADD`."""
    return chain.from_iterable(mapping.items())
