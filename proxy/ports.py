"""The seams the core depends on. Adapters in `proxy/adapters/` implement them.

The state store is one backend split by who needs what: `SessionStore` (the engine: a session's
state), `CompactionStore` (the compactor: archive, lock, fenced save), `FactStore` (the facts
compactions learn), `OutputStore` (persisted tool outputs), `EventStore` (the events stream),
`SessionViews` (the operator's reads), `ResponseStore` (what the Responses edge keeps: the
responses it served, the summaries behind compaction handles, the handles' secret);
`StateStore` is all of them, with `ping` and `close`, for the app factory that wires them.
`Summarizer`, `WorkspaceSource`, `Upstream` and `ResponsesUpstream` are the other edges.

Every port method is async except `WorkspaceSource.view` (a few `stat` calls, cached by mtime).
A store method that cannot reach its backend raises `StoreUnavailable`; callers degrade.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Literal, NamedTuple, Protocol

from proxy.memory.ledger import Scope
from proxy.types import JSON, SessionState, StoredCompaction, WorkspaceView


class SessionStore(Protocol):
    """A session's state: read before a request's stages run, written after it is answered."""

    async def load(self, tenant: str, session: str, *, memory: Scope | None = None) -> SessionState:
        """State, sticky decisions and stored compactions of a session, in one round trip; with
        a `memory` scope, the learned facts too (`SessionState.memory`: the tenant's, or the
        session's own). A store may answer facts from a cache of its own while unchanged."""
        ...

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
        """Set state fields, add to counters, add sticky decisions, touch the session; TTL all.
        `events` go to the events stream in the same write (as `EventStore.emit_event`, in
        order)."""
        ...


class CompactionStore(Protocol):
    """What the compactor writes: the archive, the session lock and the fenced save."""

    async def archive(self, tenant: str, session: str, messages_json: bytes) -> str:
        """Append a full client history to the session archive; return the entry id."""
        ...

    async def save_compaction(
        self,
        tenant: str,
        session: str,
        compaction: StoredCompaction,
        *,
        snapshot_json: bytes,
        lock_token: str,
    ) -> bool:
        """Store a compaction and the snapshot, only while `lock_token` still holds the lock.

        Returns False (and writes nothing) when the lock was lost: a fenced, stale writer.
        """
        ...

    async def acquire_lock(self, tenant: str, session: str, *, ttl_ms: int) -> str | None:
        """Take the session's compaction lock; the owner token, or None if another holds it."""
        ...

    async def release_lock(self, tenant: str, session: str, token: str) -> None:
        """Release the lock only if `token` still owns it."""
        ...


class FactStore(Protocol):
    """Learned facts (`proxy.memory`), by tenant and owner: `None` the tenant's own, a session
    id that session's. Each fact is kept once (by `proxy.memory.fact.fact_key`), even when
    replicas add at the same time; past `max_lines` the oldest go."""

    async def add_facts(
        self, tenant: str, owner: str | None, lines: Sequence[str], *, max_lines: int
    ) -> int:
        """Append the fact lines not already kept; how many were new."""
        ...

    async def read_facts(self, tenant: str, owner: str | None) -> tuple[str, ...]:
        """The kept fact lines, oldest first."""
        ...

    async def forget_facts(self, tenant: str, owner: str | None, pattern: str) -> int:
        """Remove the facts `pattern` matches (`proxy.memory.fact.matches`); how many."""
        ...


class OutputStore(Protocol):
    """Full tool outputs that a `<persisted-output>` block stands for, by tenant and id."""

    async def put_output(self, tenant: str, output_id: str, text: str) -> None: ...

    async def get_output(self, tenant: str, output_id: str) -> str | None: ...


class EventStore(Protocol):
    """The capped stream of request and compaction events."""

    async def emit_event(self, event: Mapping[str, str]) -> None:
        """Append to the capped events stream."""
        ...

    async def read_events(
        self, last_id: str, *, block_ms: int, count: int
    ) -> list[tuple[str, dict[str, str]]]:
        """Events after `last_id` (`$` = only new ones), waiting up to `block_ms`."""
        ...


class SessionViews(Protocol):
    """The operator's reads of the sessions."""

    async def list_sessions(self, tenant: str | None, *, limit: int) -> list[dict[str, str]]:
        """State hashes of the most recently used sessions (all tenants when tenant is None)."""
        ...

    async def session_detail(self, tenant: str, session: str) -> JSON | None:
        """State, stored compactions and archive length of one session, or None."""
        ...


RecordKind = Literal["response", "summary"]
"""A Responses edge record: a response served (`previous_response_id`), or the summary a
compaction handle points to."""


class ResponseStore(Protocol):
    """Records of the Responses edge, by tenant, kind and id, each kept for the session TTL;
    and the secret that signs compaction handles, the same for every replica."""

    async def put_record(self, tenant: str, kind: RecordKind, record_id: str, value: bytes) -> None:
        """Keep `value` (replacing one of the same id) for the session TTL."""
        ...

    async def get_record(self, tenant: str, kind: RecordKind, record_id: str) -> bytes | None:
        """The kept value, or None (never kept, expired, or another tenant's)."""
        ...

    async def handle_secret(self, candidate: bytes) -> bytes:
        """The handle secret kept in the store; `candidate` becomes it when there is none yet
        (replicas starting at once agree on the first one written). Kept without expiry."""
        ...


class StateStore(
    SessionStore,
    CompactionStore,
    FactStore,
    OutputStore,
    EventStore,
    SessionViews,
    ResponseStore,
    Protocol,
):
    """All of the above in one backend (Redis or in-memory), as the app factory builds it and
    hands each user the port it needs; plus its health and its end."""

    async def ping(self) -> bool: ...

    async def close(self) -> None: ...


class Completion(NamedTuple):
    """A summarizer's answer: its text, and the call's usage in the chat-completions shape
    (`prompt_tokens`, `completion_tokens`, `prompt_tokens_details`, …; None when the answer
    reported none)."""

    text: str
    usage: JSON | None = None


class Summarizer(Protocol):
    """One LLM call that returns the model's answer (its text and usage)."""

    async def complete(self, body: JSON, *, api_key: str | None) -> Completion: ...


class WorkspaceSource(Protocol):
    """The bootstrap files of a tenant (and a session-local layer), re-read only on change."""

    def view(self, tenant: str, session: str) -> WorkspaceView: ...


class UpstreamReply(NamedTuple):
    """An upstream's answer, with headers already filtered for relaying.

    Exactly one of `body` (non-streaming answers and all errors) and `stream` (OpenAI-format SSE
    bytes, as they arrive) is set. `release` closes the upstream connection; always call it.
    A named tuple: one is built per request.
    """

    status: int
    headers: Mapping[str, str]
    body: bytes | None
    stream: AsyncIterator[bytes] | None
    release: Callable[[], Awaitable[None]]
    sent_bytes: int = 0
    """Size of the request body as sent upstream (after any translation)."""


class Upstream(Protocol):
    """Sends a final chat-completions body (OpenAI format) to a provider."""

    async def send_chat(
        self,
        body: JSON,
        *,
        headers: Mapping[str, str],
        api_key: str | None,
        previous_id: str | None = None,
    ) -> UpstreamReply:
        """Raises `UpstreamUnreachable` / `UpstreamTimeout` before the first byte only.
        `previous_id`: the session's previous answer's id, for an upstream that asks the
        provider's cache-miss diagnostics about it (others ignore it)."""
        ...


class ResponsesUpstream(Protocol):
    """Sends a final Responses API body to a provider that serves `/responses`."""

    async def send_responses(
        self, body: JSON, *, headers: Mapping[str, str], api_key: str | None
    ) -> UpstreamReply:
        """As `Upstream.send_chat`; a stream is the upstream's Responses events, as they come."""
        ...
