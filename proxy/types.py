"""Plain data shared by every layer: wire JSON aliases and the per-request objects.

Stages read a `Turn` (facts loaded before the pipeline runs) and transform a `Draft` (the request
being built). Both are frozen; a stage returns a new `Draft` and a `StageReport` saying what it did
and what the async shell must write back afterwards (sticky decisions, persisted outputs).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, NamedTuple, TypeAlias

JSON: TypeAlias = dict[str, Any]
Message: TypeAlias = dict[str, Any]
"""One chat-completions message as the client sent it (JSON-shaped, unknown keys kept)."""

CacheStyle: TypeAlias = Literal["openai", "anthropic", "none"]


@dataclass(frozen=True, slots=True)
class StoredCompaction:
    """A summary that replaces the first `covers` messages of a client history.

    `prefix_hash` is the chained hash of exactly those messages (see `proxy.history`);
    `replacement` is what stands in their place (the summary message, preserved tool content).
    """

    prefix_hash: str
    covers: int
    replacement: tuple[Message, ...]
    created_at: float = 0.0
    archive_id: str = ""
    saved_chars: int = 0
    """Characters of JSON that applying it saves: the covered messages' less the replacement's
    (0 when unknown: stored before this was recorded)."""


_NOTHING: Mapping[str, Any] = MappingProxyType({})
"""The empty default of the mappings below: read-only, so one object serves every instance."""


class SessionState(NamedTuple):
    """What the store knows about a session before this request (empty for a new one). A named
    tuple, like the other per-request objects: built in a fraction of a frozen dataclass's time
    (which sets each field through `object.__setattr__`)."""

    fields: Mapping[str, str | int | float] = _NOTHING
    """As stored: text from Redis, numbers as written from the embedded store; read numbers
    with `int_field` and `float_field`."""
    decisions: Mapping[str, str] = _NOTHING
    """tool_call_id -> the exact content that pruning replaced the result with (sticky)."""
    compactions: tuple[StoredCompaction, ...] = ()
    memory: tuple[str, ...] = ()
    """The learned facts this session sees (its tenant's or its own, by the tenant's memory
    scope), oldest first, as `proxy.memory.fact` lines; empty when not asked for."""

    def int_field(self, name: str, default: int = 0) -> int:
        try:
            return int(self.fields.get(name, default))
        except (TypeError, ValueError):
            return default

    def float_field(self, name: str, default: float = 0.0) -> float:
        try:
            return float(self.fields.get(name, default))
        except (TypeError, ValueError):
            return default


class SystemPrompt(NamedTuple):
    """The system content in its three parts, in the order they are sent.

    `static` is byte-identical across requests (identity, rules); `client` holds the client's own
    leading system/developer messages as sent; `dynamic` is per user or per session. A named
    tuple, like `Draft`: built on every request.
    """

    static: str = ""
    client: tuple[Message, ...] = ()
    dynamic: str = ""


@dataclass(frozen=True, slots=True)
class WorkspaceView:
    """The tenant's bootstrap files, already read and capped by the workspace adapter.

    Keys are the logical names `soul`, `user`, `agent`, `memory`; a missing file is absent.
    Each value of `files` holds the layers, lowest priority first (managed, then tenant). Texts are
    as read (bounded by the adapter); the bootstrap stage applies the caps.
    """

    files: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    session_files: Mapping[str, str] = field(default_factory=dict)
    """The session-local layer (same logical names); only ever part of the dynamic prompt."""
    version: str = ""


class Draft(NamedTuple):
    """The request being built.

    `body` is the client's body without `messages` (never mutated); `system` the system prompt in
    parts; `messages` the history after the client's leading system messages. A named tuple
    rather than a frozen dataclass: one or two are built per request, a tuple in half the time.
    """

    body: Mapping[str, Any]
    system: SystemPrompt
    messages: tuple[Message, ...]

    def with_messages(self, messages: Sequence[Message]) -> Draft:
        """This draft with `messages`; the draft itself when they are the very same objects."""
        if len(messages) == len(self.messages) and all(map(operator.is_, messages, self.messages)):
            return self
        return Draft(self.body, self.system, tuple(messages))


_NO_STATE = SessionState()
_NO_WORKSPACE = WorkspaceView()
_NO_DRAFT = Draft(_NOTHING, SystemPrompt(), ())


class Turn(NamedTuple):
    """Per-request facts, loaded before the stages run: the one object the request's flags live
    on. Never mutated (a named tuple: one is built per request; its defaults are immutable, so
    they are shared)."""

    tenant: str
    session: str
    model: str
    now: float
    state: SessionState = _NO_STATE
    workspace: WorkspaceView = _NO_WORKSPACE
    cache_style: CacheStyle = "openai"
    model_window: int = 128_000
    applied: StoredCompaction | None = None
    """The stored compaction the client's history begins with (the longest that matches), matched
    once per request before the stages run; the compact stage puts its replacement in place."""
    client: Draft = _NO_DRAFT
    """The client's request as sent, split (`proxy.engine.pipeline.draft_from_body`)."""
    client_marked: bool = True
    """False when no object of the client's body has a `cache_control` key (then the cache
    stage need not look for the client's markers)."""
    degraded: bool = False
    """The store could not be read: `state` is empty and nothing is persisted for this request."""


class StageReport(NamedTuple):
    """What one stage did, and the effects the shell writes back after the request.

    A named tuple rather than a frozen dataclass: several are built per request and a tuple is
    built in a third of the time. Immutable all the same; the mappings are only ever read.
    """

    stage: str
    counters: Mapping[str, int] = _NOTHING
    decisions: Mapping[str, str] = _NOTHING
    outputs: Mapping[str, str] = _NOTHING
    skipped: str = ""
    """Non-empty when the stage failed and was skipped (fail-open); the reason, never content."""
