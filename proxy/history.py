"""Chained hashes of a client history, to recognise a prefix that a stored summary describes.

`h(0) = sha256(salt)`, `h(i) = sha256(h(i-1) || canonical(message i-1))`; the hash of the first
`k` messages identifies exactly those messages in that order. Canonical JSON sorts keys, so a
client that reorders keys still matches; any edit to a message changes every later hash.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Sequence
from typing import Any

import orjson

from proxy.types import Message, StoredCompaction


def message_digest(message: Message | Any) -> bytes:
    """The canonical JSON of a message (or of any JSON value): keys sorted, so equal for equal
    values whatever their key order. Every digest of a message in the proxy is this one."""
    return orjson.dumps(message, option=orjson.OPT_SORT_KEYS)


def prefix_hashes(messages: Iterable[Message], *, salt: str, limit: int | None = None) -> list[str]:
    """Hex hashes of every prefix: element `k-1` identifies the first `k` messages."""
    return chained(salt, map(message_digest, itertools.islice(messages, limit)))


def chained(salt: str, digests: Iterable[bytes]) -> list[str]:
    """`prefix_hashes` from the messages' canonical JSON (`message_digest`)."""
    current = hashlib.sha256(salt.encode()).digest()
    out: list[str] = []
    for digest in digests:
        current = hashlib.sha256(current + digest).digest()
        out.append(current.hex())
    return out


def prefix_hash(messages: Sequence[Message], covers: int, *, salt: str) -> str:
    """Hash of the first `covers` messages (`covers` >= 1)."""
    return prefix_hashes(messages, salt=salt, limit=covers)[covers - 1]


def longest_matching(
    messages: Sequence[Message], compactions: Sequence[StoredCompaction], *, salt: str
) -> StoredCompaction | None:
    """The stored compaction covering the longest prefix of `messages`, or None.

    A compaction whose prefix is as long as the history or longer (see `usable_compactions`), or
    whose hash differs (an edited history), does not match.
    """
    usable = usable_compactions(compactions, len(messages))
    if not usable:
        return None
    hashes = prefix_hashes(messages, salt=salt, limit=max(c.covers for c in usable))
    return best_matching(usable, hashes)


def usable_compactions(
    compactions: Sequence[StoredCompaction], length: int
) -> list[StoredCompaction]:
    """The compactions whose prefix a history of `length` messages goes on past.

    A summary replaces a prefix only when at least one message follows it: a history that is
    all prefix (a task re-run from its first message) keeps its own messages, so what goes
    upstream always ends with the client's own last message, never with a summary."""
    return [c for c in compactions if 0 < c.covers < length]


def best_matching(
    usable: Sequence[StoredCompaction], hashes: Sequence[str]
) -> StoredCompaction | None:
    """The longest of `usable` whose prefix hash is the one in `hashes` (`prefix_hashes`)."""
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
    return salt_of(tenant, system_digest(client_system))


def system_digest(client_system: Sequence[Message]) -> bytes:
    return b"".join(message_digest(m) for m in client_system)


def salt_of(tenant: str, system: bytes) -> str:
    return f"{tenant}\x00{hashlib.sha256(system).hexdigest()}"


def lineage(tenant: str, client_system: Sequence[Message], history: Sequence[Message]) -> str:
    """A short id of a conversation: its salt and first message. Usage of another lineage that
    shares a session id (a sub-agent, an edited history) never triggers compaction here."""
    first = message_digest(history[0]) if history else b""
    return lineage_of(tenant, system_digest(client_system), first)


def lineage_of(tenant: str, system: bytes, first: bytes) -> str:
    """`lineage` from the canonical JSON of the system messages and of the first message
    (`b""`: no history; a message's JSON is never empty)."""
    salt = salt_of(tenant, system)
    if not first:
        return salt[-16:]
    first_hash = hashlib.sha256(hashlib.sha256(salt.encode()).digest() + first)
    return first_hash.hexdigest()[:16]  # prefix_hash(history, 1, salt=salt)[:16], in one step
