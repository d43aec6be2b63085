"""Chained hashes of a client history, to recognise a prefix that a stored summary describes.

`h(0) = sha256(salt)`, `h(i) = sha256(h(i-1) || canonical(message i-1))`; the hash of the first
`k` messages identifies exactly those messages in that order. Canonical JSON sorts keys, so a
client that reorders keys still matches; any edit to a message changes every later hash.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

import orjson

from proxy.types import Message, StoredCompaction


def message_digest(message: Message) -> bytes:
    return orjson.dumps(message, option=orjson.OPT_SORT_KEYS)


def prefix_hashes(messages: Iterable[Message], *, salt: str, limit: int | None = None) -> list[str]:
    """Hex hashes of every prefix: element `k-1` identifies the first `k` messages."""
    current = hashlib.sha256(salt.encode()).digest()
    out: list[str] = []
    for index, message in enumerate(messages):
        if limit is not None and index >= limit:
            break
        current = hashlib.sha256(current + message_digest(message)).digest()
        out.append(current.hex())
    return out


def prefix_hash(messages: Sequence[Message], covers: int, *, salt: str) -> str:
    """Hash of the first `covers` messages (`covers` >= 1)."""
    return prefix_hashes(messages, salt=salt, limit=covers)[covers - 1]


def longest_matching(
    messages: Sequence[Message], compactions: Sequence[StoredCompaction], *, salt: str
) -> StoredCompaction | None:
    """The stored compaction covering the longest prefix of `messages`, or None.

    A compaction whose prefix is longer than the history, or whose hash differs (an edited
    history), does not match.
    """
    usable = [c for c in compactions if 0 < c.covers <= len(messages)]
    if not usable:
        return None
    hashes = prefix_hashes(messages, salt=salt, limit=max(c.covers for c in usable))
    best: StoredCompaction | None = None
    for compaction in usable:
        if hashes[compaction.covers - 1] == compaction.prefix_hash and (
            best is None or compaction.covers > best.covers
        ):
            best = compaction
    return best


def history_salt(tenant: str, client_system: Sequence[Message]) -> str:
    """The salt of a conversation's chain: its tenant and the client's own system messages.

    A changed system prompt is a different conversation, so its summaries no longer match.
    """
    return _salt(tenant, _system_digest(client_system))


def _system_digest(client_system: Sequence[Message]) -> bytes:
    return b"".join(message_digest(m) for m in client_system)


def _salt(tenant: str, system: bytes) -> str:
    return f"{tenant}\x00{hashlib.sha256(system).hexdigest()}"


def lineage(tenant: str, client_system: Sequence[Message], history: Sequence[Message]) -> str:
    """A short id of a conversation: its salt and first message. Usage of another lineage that
    shares a session id (a sub-agent, an edited history) never triggers compaction here."""
    first = message_digest(history[0]) if history else b""
    return _lineage(tenant, _system_digest(client_system), first)


def _lineage(tenant: str, system: bytes, first: bytes) -> str:
    """`lineage` from the canonical JSON of the system messages and of the first message
    (`b""`: no history; a message's JSON is never empty)."""
    salt = _salt(tenant, system)
    if not first:
        return salt[-16:]
    chained = hashlib.sha256(hashlib.sha256(salt.encode()).digest() + first)
    return chained.hexdigest()[:16]  # prefix_hash(history, 1, salt=salt)[:16], in one step


_EDGE = 64
"""Bytes from each end of a digest that, with its length, key `LineageMemo`."""


class LineageMemo:
    """`lineage` remembered per tenant, client system messages and first message.

    Agents send a long system prompt, and the same first message, with every request: their
    canonical JSON is still built each time (cheap), but neither hashed by sha256 again nor by
    Python (a fresh bytes object has no cached hash): an entry is keyed by the tenant and the
    lengths and first and last `_EDGE` bytes of both, and holds both, which must equal the ones
    looked up (a memcmp). Another conversation with the same key replaces the entry.

    Holds at most `max_bytes` of digests, dropping the least recently used. Not thread-safe
    (one event loop).
    """

    def __init__(self, *, max_bytes: int = 4_000_000) -> None:
        if max_bytes < 1:
            raise ValueError("LineageMemo max_bytes must be at least 1")
        self._max_bytes = max_bytes
        self._bytes = 0
        self._entries: dict[tuple[str | int | bytes, ...], tuple[bytes, bytes, str]] = {}

    def lineage(
        self, tenant: str, client_system: Sequence[Message], history: Sequence[Message]
    ) -> str:
        """`lineage(tenant, client_system, history)`."""
        system = _system_digest(client_system)
        first = message_digest(history[0]) if history else b""
        key = (
            tenant, len(system), system[:_EDGE], system[-_EDGE:],
            len(first), first[:_EDGE], first[-_EDGE:],
        )  # fmt: skip
        entry = self._entries.pop(key, None)
        if entry is not None and entry[0] == system and entry[1] == first:
            self._entries[key] = entry
            return entry[2]
        if entry is not None:
            self._bytes -= len(entry[0]) + len(entry[1])
        line = _lineage(tenant, system, first)
        size = len(system) + len(first)
        if size <= self._max_bytes:
            self._make_room(size)
            self._entries[key] = (system, first, line)
            self._bytes += size
        return line

    def _make_room(self, size: int) -> None:
        while self._entries and self._bytes + size > self._max_bytes:
            system, first, _ = self._entries.pop(next(iter(self._entries)))
            self._bytes -= len(system) + len(first)
