"""The operator's reads of the Redis store: session listings and one session.

Used by `RedisStore` (`proxy.adapters.redis.store`), which runs them under its breaker. A
listing reads the sessions index of every shard (one batch a shard), then the state of the most
recent sessions (one batch a session, each in its own slot); one session's detail is one batch.
"""

from __future__ import annotations

import heapq
from typing import Any

import orjson

from proxy.adapters.redis.codec import decode_hash, read_hash_reply, read_scored
from proxy.adapters.redis.keys import SHARDS, Keys
from proxy.adapters.redis.wire import Wire
from proxy.types import JSON


async def list_sessions(
    wire: Wire, keys: Keys, tenant: str | None, *, limit: int
) -> list[dict[str, str]]:
    """`SessionViews.list_sessions`: the `limit` most recent of every shard's index, then
    their state."""
    if tenant is None:
        found = await wire.run([[("SMEMBERS", keys.tenants(n))] for n in range(SHARDS)])
        tenants = sorted({_text(t) for [members] in found for t in members})
    else:
        tenants = [tenant]
    if not tenants:
        return []
    ranked = await wire.run(
        [
            [("ZREVRANGE", keys.sessions(n, name), 0, limit - 1, "WITHSCORES") for name in tenants]
            for n in range(SHARDS)
        ]
    )
    scored = [
        (score, name, session)
        for shard in ranked
        for name, reply in zip(tenants, shard, strict=True)
        for session, score in read_scored(reply)
    ]
    recent = heapq.nlargest(limit, scored)
    states = await wire.run(
        [[("HGETALL", keys.session(name, sid, "state"))] for _, name, sid in recent]
    )
    rows = [decode_hash(read_hash_reply(state)) for [state] in states]
    rows = [row for row in rows if row]
    rows.sort(key=lambda r: float(r.get("updated_at", 0)), reverse=True)
    return rows


async def fetch_session_detail(wire: Wire, keys: Keys, tenant: str, session: str) -> list[Any]:
    """One round trip: the raw replies `session_detail_from` reads."""
    [replies] = await wire.run(
        [
            [
                ("HGETALL", keys.session(tenant, session, "state")),
                ("HGETALL", keys.session(tenant, session, "compactions")),
                ("XLEN", keys.session(tenant, session, "raw")),
                ("STRLEN", keys.session(tenant, session, "snapshot")),
            ]
        ]
    )
    return replies


def session_detail_from(replies: list[Any]) -> JSON | None:
    """`SessionViews.session_detail` read from `fetch_session_detail`'s replies, with the
    snapshot's size too."""
    state, compactions, archived, snapshot = replies
    if not state:
        return None
    return {
        "state": decode_hash(read_hash_reply(state)),
        "compactions": [orjson.loads(v) for v in read_hash_reply(compactions).values()],
        "archive_entries": int(archived),
        "snapshot_bytes": int(snapshot),
    }


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
