"""One session as the embedded store (`proxy.adapters.memory.store`) keeps it, and the operator's
views of it, shaped as the Redis store returns them (every state field as text).

Pure: no clock and no I/O; expiry and locking are the store's.
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
    """The `list_sessions` view: the state of up to `limit` sessions unexpired at `now` (of
    `tenant`, or of every tenant when None), most recently updated first."""
    live = [
        e
        for (t, _), e in sessions.items()
        if e.expires_at > now and (tenant is None or t == tenant)
    ]
    live.sort(key=lambda e: float(e.state.get("updated_at", 0)), reverse=True)
    return [as_text(e.state) for e in live[:limit]]


def describe_session(entry: SessionEntry) -> JSON:
    """The `session_detail` view: state as text, compactions in full, archive and snapshot sizes."""
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
