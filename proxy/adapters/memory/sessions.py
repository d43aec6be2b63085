"""The embedded store's sessions: one session's record (`SessionEntry`), the table of them by tenant
and session id (`SessionTable`), and the operator's views of them, shaped as the Redis store
returns them (every state field as text).

Each session lives the session TTL after its last write: an expired session is dropped when
touched, and the ones nobody touches again are swept out at most once per `SWEEP_EVERY_S` (a
long-running process must not keep them all). No I/O; the clock is the caller's (`now`), and
locking is the store's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from proxy.types import JSON, StoredCompaction


@dataclass(slots=True)
class SessionEntry:
    state: dict[str, str | int | float] = field(default_factory=dict)
    """Fields as written (numbers stay numbers: no text round trip per request)."""
    decisions: dict[str, str] = field(default_factory=dict)
    compactions: dict[str, StoredCompaction] = field(default_factory=dict)
    archived: int = 0
    """Transcripts archived: their text goes to the workspace's `raw.jsonl`, never kept here."""
    snapshot: bytes = b""
    lock: tuple[str, float] | None = None
    expires_at: float = 0.0


def list_recent(
    sessions: Mapping[tuple[str, str], SessionEntry],
    tenant: str | None,
    *,
    limit: int,
    now: float,
) -> list[dict[str, str]]:
    """`SessionViews.list_sessions` over `sessions`, those expired at `now` left out."""
    live = [
        e
        for (t, _), e in sessions.items()
        if e.expires_at > now and (tenant is None or t == tenant)
    ]
    live.sort(key=lambda e: float(e.state.get("updated_at", 0)), reverse=True)
    return [as_text(e.state) for e in live[:limit]]


def describe_session(entry: SessionEntry) -> JSON:
    """`SessionViews.session_detail` of `entry`, its state as text and the snapshot's size
    too."""
    return {
        "state": as_text(entry.state),
        "compactions": [
            {
                "prefix_hash": c.prefix_hash,
                "covers": c.covers,
                "created_at": c.created_at,
                "archive_id": c.archive_id,
                "replacement": list(c.replacement),
            }
            for c in entry.compactions.values()
        ],
        "archive_entries": entry.archived,
        "snapshot_bytes": len(entry.snapshot),
    }


def as_text(state: Mapping[str, str | int | float]) -> dict[str, str]:
    """A session's fields as the Redis store returns them (`HGETALL`: every value text)."""
    return {name: str(value) for name, value in state.items()}


SWEEP_EVERY_S = 60.0
"""How often, at most, expired sessions nobody touches again are looked for and dropped."""


class SessionTable:
    def __init__(self, *, ttl_s: float, now: float) -> None:
        self.entries: dict[tuple[str, str], SessionEntry] = {}
        """Every session held, expired ones not yet dropped included (read-only outside)."""
        self._ttl_s = ttl_s
        self._swept_at = now

    def live(self, tenant: str, session: str, *, now: float, create: bool) -> SessionEntry | None:
        """The unexpired session, or None; with `create`, a new one if needed, and either way
        its TTL renewed from `now`."""
        key = (tenant, session)
        entry = self.entries.get(key)
        if entry is not None and entry.expires_at <= now:
            del self.entries[key]
            entry = None
        if not create:
            return entry
        if entry is None:
            self._sweep(now)
            entry = self.entries[key] = SessionEntry()
        entry.expires_at = now + self._ttl_s
        return entry

    def _sweep(self, now: float) -> None:
        if now - self._swept_at < SWEEP_EVERY_S:
            return
        self._swept_at = now
        for key in [key for key, entry in self.entries.items() if entry.expires_at <= now]:
            del self.entries[key]
