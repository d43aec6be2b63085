"""Encoding of stored values, the Lua scripts of the Redis store, and reading replies.

Replies come in two shapes: as the parser reads them (`pool.run_pipeline`, RESP3 by default)
and through redis-py's reply callbacks (its cluster pipeline); the readers take either.
"""

from __future__ import annotations

from typing import Any

import orjson

from proxy.types import StoredCompaction

# KEYS: lock, compactions, snapshot. ARGV: token, prefix hash, compaction JSON, snapshot, ttl.
# Writes only while the caller still owns the lock: a replica paused past its lock's expiry
# cannot store a stale summary (fencing).
FENCED_SAVE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[5])
redis.call('SET', KEYS[3], ARGV[4], 'EX', ARGV[5])
return 1
"""

# KEYS: a session's archive stream. ARGV: the history (JSON), its cap, the TTL. Both or neither.
ARCHIVE = """
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', 'messages', ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
return id
"""

# KEYS: lock. ARGV: token. Deletes the lock only for its owner.
RELEASE_LOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


# KEYS: one shard's events stream. ARGV: the exclusive start (`(ID`), COUNT. The node's clock
# and the entries after the start, read at one instant: an entry added later gets an id at or
# above that time (`proxy.adapters.redis.events` merges shards on this).
READ_SHARD = """
return {redis.call('TIME'), redis.call('XRANGE', KEYS[1], ARGV[1], '+', 'COUNT', ARGV[2])}
"""


def decode_hash(raw: dict[Any, Any]) -> dict[str, str]:
    """A hash reply as text. Replies are bytes unless the client decodes them itself."""
    try:
        return {key.decode(): value.decode() for key, value in raw.items()}
    except AttributeError:
        return {_text(key): _text(value) for key, value in raw.items()}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def compaction_to_json(compaction: StoredCompaction) -> bytes:
    return orjson.dumps(
        {
            "prefix_hash": compaction.prefix_hash,
            "covers": compaction.covers,
            "replacement": list(compaction.replacement),
            "created_at": compaction.created_at,
            "archive_id": compaction.archive_id,
            "saved_chars": compaction.saved_chars,
        }
    )


def compaction_from_json(raw: bytes | str) -> StoredCompaction:
    data = orjson.loads(raw)
    return StoredCompaction(
        prefix_hash=data["prefix_hash"],
        covers=int(data["covers"]),
        replacement=tuple(data["replacement"]),
        created_at=float(data.get("created_at", 0.0)),
        archive_id=str(data.get("archive_id", "")),
        saved_chars=int(data.get("saved_chars", 0)),
    )


def read_hash_reply(reply: Any) -> dict[Any, Any]:
    """An `HGETALL` reply as a dict: RESP3 reads it as one, RESP2 as `[field, value, ...]`."""
    if isinstance(reply, dict):
        return reply
    return dict(zip(reply[::2], reply[1::2], strict=True))


def read_entries(reply: Any) -> list[tuple[str, dict[str, str]]]:
    """A stream range (`XRANGE`) as `(id, fields)` pairs, text."""
    return [(_text(entry_id), decode_hash(read_hash_reply(fields))) for entry_id, fields in reply]


def read_scored(reply: Any) -> list[tuple[str, float]]:
    """A `Z*RANGE … WITHSCORES` reply as `(member, score)` pairs: RESP3 and the callbacks give
    pairs, RESP2 a flat list."""
    if reply and not isinstance(reply[0], list | tuple):
        reply = list(zip(reply[::2], reply[1::2], strict=True))
    return [(_text(member), float(score)) for member, score in reply]
