"""The embedded store's persisted tool outputs: kept for the session TTL, within a size budget.

Outputs are large by definition (only tool results over `persist_over_chars` are persisted), so
the store must not keep every one a long-running process ever saw: an expired output is
dropped, and past `max_chars` in all the oldest go first. Either way its id answers 404 after,
as an expired one does with Redis.
"""

from __future__ import annotations

from typing import NamedTuple

MAX_CHARS = 256 * 1024 * 1024
"""The default budget: characters of output text held at once, over all tenants."""


class _Stored(NamedTuple):
    text: str
    expires_at: float


class MemoryOutputs:
    def __init__(self, *, ttl_s: float, max_chars: int = MAX_CHARS) -> None:
        self._ttl_s = ttl_s
        self._max_chars = max_chars
        self._chars = 0
        self._stored: dict[tuple[str, str], _Stored] = {}  # oldest first (insertion order)

    def put(self, tenant: str, output_id: str, text: str, *, now: float) -> None:
        """Keep `text` until `now` + the TTL; storing an id again renews it (as newest)."""
        key = (tenant, output_id)
        self._drop(key)
        self._stored[key] = _Stored(text, now + self._ttl_s)
        self._chars += len(text)
        self._evict(now)

    def get(self, tenant: str, output_id: str, *, now: float) -> str | None:
        found = self._stored.get((tenant, output_id))
        if found is None or found.expires_at <= now:
            return None
        return found.text

    @property
    def chars(self) -> int:
        """Characters of output text held now."""
        return self._chars

    def _drop(self, key: tuple[str, str]) -> None:
        gone = self._stored.pop(key, None)
        if gone is not None:
            self._chars -= len(gone.text)

    def _evict(self, now: float) -> None:
        """Drop the oldest while over budget or expired (the TTL is the same for all, so the
        oldest expire first)."""
        while self._stored:
            key = next(iter(self._stored))
            if self._chars <= self._max_chars and self._stored[key].expires_at > now:
                return
            self._drop(key)
