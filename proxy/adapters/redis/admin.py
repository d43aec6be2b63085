"""The operator's reads of the Redis store: the event stream, session listings, one session.

Used by `RedisStore` (`proxy.adapters.redis.store`), which runs `list_sessions` and
`fetch_session_detail` under its breaker; `read_events` blocks on a connection of its own.
"""

from __future__ import annotations

from typing import Any

import orjson
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from proxy.adapters.redis.codec import decode_hash
from proxy.adapters.redis.keys import Keys
from proxy.errors import StoreUnavailable
from proxy.logs import redacted_url
from proxy.types import JSON


async def read_events(
    url: str, keys: Keys, last_id: str, *, block_ms: int, count: int
) -> list[tuple[str, dict[str, str]]]:
    """Up to `count` events after `last_id`, waiting up to `block_ms` for one (0: no wait, as
    the embedded store); raises `StoreUnavailable` on a Redis or OS error."""
    # A blocking read needs its own connection whose timeout outlasts the block.
    reader: Any = aioredis.Redis.from_url(url, socket_timeout=block_ms / 1000 + 1)
    try:
        found = await reader.xread({keys.events(): last_id}, count=count, block=block_ms or None)
    except (RedisError, OSError) as exc:
        where = redacted_url(url)
        raise StoreUnavailable(f"Redis at {where} unavailable: {type(exc).__name__}") from exc
    finally:
        await reader.aclose()
    return [
        (entry_id.decode(), decode_hash(fields))
        for _, entries in found or []
        for entry_id, fields in entries
    ]


async def list_sessions(
    redis: Any, keys: Keys, tenant: str | None, *, limit: int
) -> list[dict[str, str]]:
    """The `limit` most recently updated sessions' state, of one tenant or of all."""
    tenants = (
        [tenant] if tenant else sorted(t.decode() for t in await redis.smembers(keys.tenants()))
    )
    pipe = redis.pipeline(transaction=False)
    for name in tenants:
        pipe.zrevrange(keys.sessions(name), 0, limit - 1)
    ranked = await pipe.execute()
    pipe = redis.pipeline(transaction=False)
    for name, sessions in zip(tenants, ranked, strict=True):
        for sid in sessions:
            pipe.hgetall(keys.session(name, sid.decode(), "state"))
    rows = [decode_hash(h) for h in await pipe.execute() if h]
    rows.sort(key=lambda r: float(r.get("updated_at", 0)), reverse=True)
    return rows[:limit]


async def fetch_session_detail(redis: Any, keys: Keys, tenant: str, session: str) -> list[Any]:
    """One round trip: the raw replies `session_detail_from` reads."""
    pipe = redis.pipeline(transaction=False)
    pipe.hgetall(keys.session(tenant, session, "state"))
    pipe.hgetall(keys.session(tenant, session, "compactions"))
    pipe.xlen(keys.session(tenant, session, "raw"))
    pipe.strlen(keys.session(tenant, session, "snapshot"))
    return list(await pipe.execute())


def session_detail_from(replies: list[Any]) -> JSON | None:
    """State, compactions and archive/snapshot sizes; None for an unknown session."""
    state, compactions, archived, snapshot = replies
    if not state:
        return None
    return {
        "state": decode_hash(state),
        "compactions": [orjson.loads(v) for v in compactions.values()],
        "archive_entries": int(archived),
        "snapshot_bytes": int(snapshot),
    }
