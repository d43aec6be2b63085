"""Encoding of stored values and the two Lua scripts of the Redis store."""

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

# KEYS: lock. ARGV: token. Deletes the lock only for its owner.
RELEASE_LOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
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
