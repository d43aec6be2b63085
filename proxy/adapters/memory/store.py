"""The embedded, in-process `StateStore`: the zero-setup default (`store.url = "memory://"`).

Same contract as the Redis store, for one process. Archives and snapshots go to files in the
tenant's workspace (`sessions/raw.jsonl`, `sessions/ctx-<session>.json`) when a workspace is
known, so a user without Redis can still read what was compacted; learned facts to its
`memory/` folder, so a restart keeps them. Its parts are the package's other modules (see
`proxy.adapters.memory`).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from proxy.adapters.memory.archive import ArchiveFiles
from proxy.adapters.memory.events import EventRing
from proxy.adapters.memory.facts import FactFiles
from proxy.adapters.memory.outputs import MAX_CHARS, MemoryOutputs
from proxy.adapters.memory.records import MemoryRecords
from proxy.adapters.memory.sessions import SessionEntry, SessionTable, describe_session, list_recent
from proxy.memory.ledger import Scope
from proxy.ports import RecordKind
from proxy.types import JSON, SessionState, StoredCompaction


class MemoryStore:
    """An in-memory store; `archive_dir_for(tenant)` names the folder of the tenant's archive
    (its workspace's `sessions/`), `facts_dir_for(tenant)` that of its learned facts (the
    workspace's `memory/`), if it has one."""

    def __init__(
        self,
        *,
        session_ttl_s: float = 604_800,
        events_max: int = 10_000,
        archive_dir_for: Callable[[str], Path | None] = lambda tenant: None,
        facts_dir_for: Callable[[str], Path | None] = lambda tenant: None,
        clock: Callable[[], float] = time.time,
        max_output_chars: int = MAX_CHARS,
    ) -> None:
        self._clock = clock
        self._files = ArchiveFiles(archive_dir_for, snapshot_ttl_s=session_ttl_s)
        self._sessions = SessionTable(ttl_s=session_ttl_s, now=clock())
        self._outputs = MemoryOutputs(ttl_s=session_ttl_s, max_chars=max_output_chars)
        self._ring = EventRing(maxlen=events_max)
        self._facts = FactFiles(facts_dir_for, session_ttl_s=session_ttl_s)
        self._records = MemoryRecords(ttl_s=session_ttl_s)
        self._secret: bytes | None = None

    async def ping(self) -> bool:
        return True

    def _live(self, tenant: str, session: str, *, create: bool) -> SessionEntry | None:
        return self._sessions.live(tenant, session, now=self._clock(), create=create)

    async def load(self, tenant: str, session: str, *, memory: Scope | None = None) -> SessionState:
        facts: tuple[str, ...] = ()
        if memory is not None:
            owner = session if memory == "session" else None
            facts = (await self._facts.ledger(tenant, owner)).lines
        entry = self._live(tenant, session, create=False)
        if entry is None:
            return SessionState(memory=facts)
        return SessionState(
            fields=dict(entry.state),
            decisions=dict(entry.decisions),
            compactions=tuple(entry.compactions.values()),
            memory=facts,
        )

    async def add_facts(
        self, tenant: str, owner: str | None, lines: Sequence[str], *, max_lines: int
    ) -> int:
        return await self._facts.add(tenant, owner, lines, max_lines=max_lines)

    async def read_facts(self, tenant: str, owner: str | None) -> tuple[str, ...]:
        return (await self._facts.ledger(tenant, owner)).lines

    async def forget_facts(self, tenant: str, owner: str | None, pattern: str) -> int:
        return await self._facts.forget(tenant, owner, pattern)

    async def record_turn(
        self,
        tenant: str,
        session: str,
        *,
        fields: Mapping[str, str | int | float],
        counters: Mapping[str, int],
        decisions: Mapping[str, str],
        events: Sequence[Mapping[str, str]] = (),
    ) -> None:
        entry = self._live(tenant, session, create=True)
        assert entry is not None
        state = entry.state
        state.update(fields)  # as written: text only for the views (`as_text`)
        state.setdefault("tenant", tenant)
        state.setdefault("session", session)
        for name, delta in counters.items():
            state[name] = int(state.get(name, 0)) + delta
        entry.decisions.update(decisions)
        for event in events:
            await self.emit_event(event)

    async def archive(self, tenant: str, session: str, messages_json: bytes) -> str:
        entry = self._live(tenant, session, create=True)
        assert entry is not None
        entry_id = f"{int(self._clock() * 1000)}-{entry.archived}"
        await self._files.append_transcript(tenant, session, entry_id, messages_json)
        entry.archived += 1
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
        await self._files.write_snapshot(tenant, session, snapshot_json)
        return True

    def _holds(self, entry: SessionEntry, token: str) -> bool:
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

    @property
    def sessions_held(self) -> int:
        """Sessions in memory, expired ones not yet dropped included."""
        return len(self._sessions.entries)

    @property
    def output_chars_held(self) -> int:
        """Characters of persisted output text in memory."""
        return self._outputs.chars

    async def put_output(self, tenant: str, output_id: str, text: str) -> None:
        self._outputs.put(tenant, output_id, text, now=self._clock())

    async def get_output(self, tenant: str, output_id: str) -> str | None:
        return self._outputs.get(tenant, output_id, now=self._clock())

    async def put_record(self, tenant: str, kind: RecordKind, record_id: str, value: bytes) -> None:
        self._records.put((tenant, kind, record_id), value, now=self._clock())

    async def get_record(self, tenant: str, kind: RecordKind, record_id: str) -> bytes | None:
        return self._records.get((tenant, kind, record_id), now=self._clock())

    async def handle_secret(self, candidate: bytes) -> bytes:
        """Kept for the process's lifetime: a restart makes the handles it signed unreadable."""
        if self._secret is None:
            self._secret = candidate
        return self._secret

    async def emit_event(self, event: Mapping[str, str]) -> None:
        ring = self._ring  # appended here, not through a call: this runs on every request
        event_id = f"{int(self._clock() * 1000)}-{next(ring.seq)}"
        ring.events.append((event_id, dict(event)))
        if ring.readers_waiting:  # the lock costs more than the rest, and nobody listens mostly
            async with ring.new_event:
                ring.new_event.notify_all()

    async def read_events(
        self, last_id: str, *, block_ms: int, count: int
    ) -> list[tuple[str, dict[str, str]]]:
        return await self._ring.read(last_id, block_ms=block_ms, count=count)

    async def list_sessions(self, tenant: str | None, *, limit: int) -> list[dict[str, str]]:
        return list_recent(self._sessions.entries, tenant, limit=limit, now=self._clock())

    async def session_detail(self, tenant: str, session: str) -> JSON | None:
        entry = self._live(tenant, session, create=False)
        if entry is None:
            return None
        return describe_session(entry)

    async def close(self) -> None:
        return None
