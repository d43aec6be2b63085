"""The embedded, in-process `StateStore`: the zero-setup default (`store.url = "memory://"`).

Same contract as the Redis store, for one process. Archives and snapshots go to files in the
tenant's workspace (`sessions/raw.jsonl`, `sessions/ctx-<session>.json`) when a workspace is
known, so a user without Redis can still read what was compacted. Expired sessions are dropped
lazily; events are a bounded in-process ring.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from proxy.types import JSON, SessionState, StoredCompaction


@dataclass(slots=True)
class _Session:
    state: dict[str, str | int | float] = field(default_factory=dict)
    """Fields as written (numbers stay numbers: no text round trip per request)."""
    decisions: dict[str, str] = field(default_factory=dict)
    compactions: dict[str, StoredCompaction] = field(default_factory=dict)
    archive: list[tuple[str, bytes]] = field(default_factory=list)
    snapshot: bytes = b""
    lock: tuple[str, float] | None = None
    expires_at: float = 0.0


class MemoryStore:
    """An in-memory store; `archive_dir_for(tenant)` names the tenant's workspace, if any."""

    def __init__(
        self,
        *,
        session_ttl_s: float = 604_800,
        events_max: int = 10_000,
        archive_dir_for: Callable[[str], Path | None] = lambda tenant: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._ttl = session_ttl_s
        self._clock = clock
        self._archive_dir_for = archive_dir_for
        self._sessions: dict[tuple[str, str], _Session] = {}
        self._outputs: dict[tuple[str, str], tuple[str, float]] = {}
        self._events: deque[tuple[str, dict[str, str]]] = deque(maxlen=events_max)
        self._event_seq = itertools.count(1)
        self._new_event = asyncio.Condition()
        self._readers_waiting = 0

    async def ping(self) -> bool:
        return True

    def _live(self, tenant: str, session: str, *, create: bool) -> _Session | None:
        now = self._clock()
        entry = self._sessions.get((tenant, session))
        if entry is not None and entry.expires_at <= now:
            del self._sessions[(tenant, session)]
            entry = None
        if entry is None and create:
            entry = self._sessions[(tenant, session)] = _Session()
        if entry is not None and create:
            entry.expires_at = now + self._ttl
        return entry

    async def load(self, tenant: str, session: str) -> SessionState:
        entry = self._live(tenant, session, create=False)
        if entry is None:
            return SessionState()
        return SessionState(
            fields=dict(entry.state),
            decisions=dict(entry.decisions),
            compactions=tuple(entry.compactions.values()),
        )

    async def record_turn(
        self,
        tenant: str,
        session: str,
        *,
        fields: Mapping[str, str | int | float],
        counters: Mapping[str, int],
        decisions: Mapping[str, str],
    ) -> None:
        entry = self._live(tenant, session, create=True)
        assert entry is not None
        state = entry.state
        state.update(fields)  # as written: text only for the views (`_as_text`)
        state.setdefault("tenant", tenant)
        state.setdefault("session", session)
        for name, delta in counters.items():
            state[name] = int(state.get(name, 0)) + delta
        entry.decisions.update(decisions)

    async def archive(self, tenant: str, session: str, messages_json: bytes) -> str:
        entry = self._live(tenant, session, create=True)
        assert entry is not None
        entry_id = f"{int(self._clock() * 1000)}-{len(entry.archive)}"
        folder = self._archive_dir_for(tenant)
        if folder is not None:
            line = orjson.dumps({"session": session, "id": entry_id})[:-1] + b',"messages":'
            await asyncio.to_thread(_append, folder / "raw.jsonl", line + messages_json + b"}\n")
        entry.archive.append((entry_id, messages_json))
        return entry_id

    async def save_compaction(
        self,
        tenant: str,
        session: str,
        compaction: StoredCompaction,
        *,
        snapshot_json: bytes,
        lock_token: str,
    ) -> bool:
        entry = self._live(tenant, session, create=True)
        assert entry is not None
        if not self._holds(entry, lock_token):
            return False
        entry.compactions[compaction.prefix_hash] = compaction
        entry.snapshot = snapshot_json
        folder = self._archive_dir_for(tenant)
        if folder is not None:
            await asyncio.to_thread(_write, folder / f"ctx-{session}.json", snapshot_json)
        return True

    def _holds(self, entry: _Session, token: str) -> bool:
        return entry.lock is not None and entry.lock[0] == token and entry.lock[1] > self._clock()

    async def acquire_lock(self, tenant: str, session: str, *, ttl_ms: int) -> str | None:
        entry = self._live(tenant, session, create=True)
        assert entry is not None
        if entry.lock is not None and entry.lock[1] > self._clock():
            return None
        token = secrets.token_hex(16)
        entry.lock = (token, self._clock() + ttl_ms / 1000)
        return token

    async def release_lock(self, tenant: str, session: str, token: str) -> None:
        entry = self._live(tenant, session, create=False)
        if entry is not None and entry.lock is not None and entry.lock[0] == token:
            entry.lock = None

    async def put_output(self, tenant: str, output_id: str, text: str) -> None:
        self._outputs[(tenant, output_id)] = (text, self._clock() + self._ttl)

    async def get_output(self, tenant: str, output_id: str) -> str | None:
        found = self._outputs.get((tenant, output_id))
        if found is None or found[1] <= self._clock():
            return None
        return found[0]

    async def emit_event(self, event: Mapping[str, str]) -> None:
        event_id = f"{int(self._clock() * 1000)}-{next(self._event_seq)}"
        self._events.append((event_id, dict(event)))
        if self._readers_waiting:  # the lock costs more than the rest, and nobody listens mostly
            async with self._new_event:
                self._new_event.notify_all()

    async def read_events(
        self, last_id: str, *, block_ms: int, count: int
    ) -> list[tuple[str, dict[str, str]]]:
        if last_id == "$":
            last_id = self._events[-1][0] if self._events else "0-0"
        found = self._after(last_id, count)
        if not found and block_ms > 0:
            self._readers_waiting += 1
            try:
                async with self._new_event:
                    await asyncio.wait_for(self._new_event.wait(), block_ms / 1000)
            except TimeoutError:
                return []
            finally:
                self._readers_waiting -= 1
            found = self._after(last_id, count)
        return found

    def _after(self, last_id: str, count: int) -> list[tuple[str, dict[str, str]]]:
        key = _id_key(last_id)
        return [(i, dict(e)) for i, e in self._events if _id_key(i) > key][:count]

    async def list_sessions(self, tenant: str | None, *, limit: int) -> list[dict[str, str]]:
        now = self._clock()
        live = [
            e
            for (t, _), e in self._sessions.items()
            if e.expires_at > now and (tenant is None or t == tenant)
        ]
        live.sort(key=lambda e: float(e.state.get("updated_at", 0)), reverse=True)
        return [_as_text(e.state) for e in live[:limit]]

    async def session_detail(self, tenant: str, session: str) -> JSON | None:
        entry = self._live(tenant, session, create=False)
        if entry is None:
            return None
        return {
            "state": _as_text(entry.state),
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
            "archive_entries": len(entry.archive),
            "snapshot_bytes": len(entry.snapshot),
        }

    async def close(self) -> None:
        return None


def _as_text(state: Mapping[str, str | int | float]) -> dict[str, str]:
    """A session's fields as the Redis store returns them (`HGETALL`: every value text)."""
    return {name: str(value) for name, value in state.items()}


def _id_key(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms or 0), int(seq or 0)


def _append(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab") as handle:
        handle.write(data)


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
