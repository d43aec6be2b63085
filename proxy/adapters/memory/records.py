"""The embedded store's Responses records: responses served and the summaries behind compaction
handles (`proxy.ports.ResponseStore`), each kept for the session TTL, within a size budget.

A record holds a whole conversation's items, so the store must not keep every one a
long-running process ever saw: an expired record is dropped, and past `max_bytes` in all the
oldest go first. Either way its id is then unknown, as an expired one is with Redis.
"""

from __future__ import annotations

from typing import NamedTuple

MAX_BYTES = 256 * 1024 * 1024
"""The default budget: bytes of records held at once, over all tenants."""

Key = tuple[str, str, str]
"""(tenant, kind, id)."""


class _Kept(NamedTuple):
    value: bytes
    expires_at: float


class MemoryRecords:
    def __init__(self, *, ttl_s: float, max_bytes: int = MAX_BYTES) -> None:
        self._ttl_s = ttl_s
        self._max_bytes = max_bytes
        self._bytes = 0
        self._kept: dict[Key, _Kept] = {}  # oldest first (insertion order)

    def put(self, key: Key, value: bytes, *, now: float) -> None:
        """Keep `value` until `now` + the TTL; a record put again is renewed (as newest)."""
        self._drop(key)
        self._kept[key] = _Kept(value, now + self._ttl_s)
        self._bytes += len(value)
        self._evict(now)

    def get(self, key: Key, *, now: float) -> bytes | None:
        found = self._kept.get(key)
        if found is None or found.expires_at <= now:
            return None
        return found.value

    @property
    def bytes_held(self) -> int:
        return self._bytes

    def _drop(self, key: Key) -> None:
        gone = self._kept.pop(key, None)
        if gone is not None:
            self._bytes -= len(gone.value)

    def _evict(self, now: float) -> None:
        """Drop the oldest while over budget or expired (one TTL for all: the oldest expire
        first)."""
        while self._kept:
            key = next(iter(self._kept))
            if self._bytes <= self._max_bytes and self._kept[key].expires_at > now:
                return
            self._drop(key)
