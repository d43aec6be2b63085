"""Memos of `proxy.history` answers, one set per tenant stack: agents resend their long system
prompt and whole history with every request, and hashing them again costs more than comparing.

A freshly decoded request has no cached hash anywhere, so an entry is keyed by lengths and a few
edge bytes of the canonical JSON (cheap to hash), and holds that JSON, which must equal the one
looked up (a memcmp, many times cheaper than sha256). Every answer is therefore the function's
own; another conversation with the same key just replaces the entry. Both memos are LRUs bounded
by the bytes they hold. Not thread-safe (one event loop).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from proxy.history import (
    best_matching,
    chained,
    lineage_of,
    message_digest,
    salt_of,
    system_digest,
    usable_compactions,
)
from proxy.identity import derived_id, first_user_digest
from proxy.types import Message, StoredCompaction

_EDGE = 64
"""Bytes from each end of a digest that, with its length, key an entry."""

_Key = tuple[str | int | bytes, ...]
_V = TypeVar("_V")


def _edges(data: bytes) -> tuple[int, bytes, bytes]:
    return len(data), data[:_EDGE], data[-_EDGE:]


class _Entries(Generic[_V]):
    """Key -> (the digests it was computed from, the answer); at most `max_bytes` of digests."""

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 1:
            raise ValueError("a history memo's max_bytes must be at least 1")
        self._max_bytes = max_bytes
        self.size = 0
        self._entries: dict[_Key, tuple[Sequence[bytes], int, _V]] = {}

    def get(self, key: _Key, digests: Sequence[bytes]) -> _V | None:
        """The answer stored for `key` if it was computed from equal `digests`."""
        entry = self._entries.pop(key, None)
        if entry is None:
            return None
        if entry[0] != digests:
            self.size -= entry[1]
            return None
        self._entries[key] = entry  # now the most recently used
        return entry[2]

    def put(self, key: _Key, digests: Sequence[bytes], answer: _V) -> None:
        size = sum(map(len, digests))
        if size > self._max_bytes:
            return
        while self._entries and self.size + size > self._max_bytes:
            self.size -= self._entries.pop(next(iter(self._entries)))[1]
        self._entries[key] = (digests, size, answer)
        self.size += size

    def __len__(self) -> int:
        return len(self._entries)


class SystemDigests:
    """`system_digest` of the last system messages asked about, by identity: a request's session
    id, lineage and stored-summary match all ask about the same tuple (the client's messages are
    never mutated; the tuple is held, so its identity cannot be reused by another)."""

    def __init__(self) -> None:
        self._last: tuple[Sequence[Message], bytes] = ((), b"")

    def of(self, client_system: Sequence[Message]) -> bytes:
        last = self._last
        if last[0] is client_system:
            return last[1]
        digest = system_digest(client_system)
        if type(client_system) is tuple:  # a list could change under the same identity
            self._last = (client_system, digest)
        return digest


class LineageMemo:
    """`proxy.history.lineage` and `proxy.identity.derived_session_id`, remembered per tenant,
    client system messages and first (user) message."""

    def __init__(self, *, max_bytes: int = 4_000_000, systems: SystemDigests | None = None) -> None:
        self._entries: _Entries[str] = _Entries(max_bytes)
        self._systems = systems or SystemDigests()

    def lineage(
        self, tenant: str, client_system: Sequence[Message], history: Sequence[Message]
    ) -> str:
        """`lineage(tenant, client_system, history)`."""
        first = message_digest(history[0]) if history else b""
        return self._answer(lineage_of, "lineage", tenant, client_system, first)

    def session_id(
        self, tenant: str, client_system: Sequence[Message], history: Sequence[Message]
    ) -> str:
        """`derived_session_id(tenant, client_system, history)`."""
        first = first_user_digest(history)
        return self._answer(derived_id, "session", tenant, client_system, first)

    def _answer(
        self,
        compute: Callable[[str, bytes, bytes], str],
        kind: str,
        tenant: str,
        client_system: Sequence[Message],
        first: bytes,
    ) -> str:
        """`compute(tenant, system digest, first)`, remembered under `kind`."""
        system = self._systems.of(client_system)
        key = (kind, tenant, *_edges(system), *_edges(first))
        digests = (system, first)
        found = self._entries.get(key, digests)
        if found is None:
            found = compute(tenant, system, first)
            self._entries.put(key, digests, found)
        return found


class MatchMemo:
    """The stored compaction a history starts with, remembered: `longest_matching(messages,
    compactions, salt=history_salt(tenant, client_system))`.

    The prefix hashes of a history are kept with the digests of the system and of the messages
    they cover; the compactions themselves are matched afresh on every call.
    """

    def __init__(
        self, *, max_bytes: int = 16_000_000, systems: SystemDigests | None = None
    ) -> None:
        self._entries: _Entries[list[str]] = _Entries(max_bytes)
        self._systems = systems or SystemDigests()

    def applied(
        self,
        tenant: str,
        client_system: Sequence[Message],
        messages: Sequence[Message],
        compactions: Sequence[StoredCompaction],
    ) -> StoredCompaction | None:
        usable = usable_compactions(compactions, len(messages))
        if not usable:
            return None
        limit = max(c.covers for c in usable)
        system = self._systems.of(client_system)
        digests = [system, *map(message_digest, messages[:limit])]
        key = (tenant, limit, *_edges(system), *_edges(digests[1]), *_edges(digests[-1]))
        hashes = self._entries.get(key, digests)
        if hashes is None:
            hashes = chained(salt_of(tenant, system), digests[1:])
            self._entries.put(key, digests, hashes)
        return best_matching(usable, hashes)
