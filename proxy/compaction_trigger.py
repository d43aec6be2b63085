"""When a request compacts: now when due, in the background past the soft threshold (async
mode), and what a finished background compaction leaves in the store; plus the `CompactionJob`
it would run. The thresholds themselves are `proxy.stages.compact`'s; `ContextEngine.prepare`
asks `CompactionTrigger.compact_if_due`."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable

from proxy.compaction_job import CompactionJob, CompactionOutcome
from proxy.compactor import Compactor
from proxy.ports import StateStore
from proxy.session_record import compaction_fields, last_compaction_efficiency
from proxy.stack import Stack
from proxy.stages.compact import CompactSettings
from proxy.types import Draft, StoredCompaction, Turn

BackgroundHook = Callable[[str, str, CompactionOutcome], Awaitable[None]]
"""Told of every finished background compaction: (tenant, session, outcome)."""


class CompactionTrigger:
    def __init__(
        self,
        *,
        store: StateStore,
        compactor: Compactor,
        on_background: BackgroundHook | None = None,
    ) -> None:
        self.store = store
        self._on_background = on_background
        self._compactor = compactor

    def _start_background(self, job: CompactionJob) -> None:
        counted = functools.partial(self._counted, job.tenant, job.session)
        self._compactor.start_background(job, on_done=counted)

    async def compact_if_due(
        self,
        settings: CompactSettings,
        turn: Turn,
        job: Callable[[], CompactionJob],
        *,
        due: bool,
        soft: bool,
    ) -> CompactionOutcome | None:
        """Compact now when `due`; past the `soft` threshold in async mode, start compacting in
        the background instead. None when nothing ran now."""
        if not settings.enabled:
            return None
        if due:
            if settings.mode == "async" and self._compactor.running(turn.tenant, turn.session):
                return None  # a background summary is on its way; nobody waits for it
            return await self._compactor.run(job())
        if settings.mode == "async" and soft:
            self._start_background(job())
        return None

    async def _counted(self, tenant: str, session: str, outcome: CompactionOutcome) -> None:
        """A finished background compaction counts in its session's state like a sync one, and
        is reported to `on_background` (events, metrics)."""
        if outcome.status == "done":
            fields = compaction_fields(outcome)
            await self.store.record_turn(
                tenant, session, fields=fields, counters={"compactions": 1}, decisions={}
            )
        if self._on_background is not None:
            await self._on_background(tenant, session, outcome)


def build_job(
    stack: Stack,
    client: Draft,
    draft: Draft,
    turn: Turn,
    applied: StoredCompaction | None,
    api_key: str | None,
    *,
    forced: bool = False,
) -> CompactionJob:
    """The `CompactionJob` for this request's working history (`prepare` builds it only when a
    compaction starts); `forced`: the upstream said the context is too long."""
    return CompactionJob(
        tenant=turn.tenant,
        session=turn.session,
        client_history=client.messages,
        client_system=client.system.client,
        working=draft.messages,
        prefix_body_for=lambda messages: stack.prefix_body(draft, turn, messages),
        model=turn.model,
        api_key=api_key,
        applied=applied,
        upstream=stack.tenant.upstream,
        use_transcript=turn.cache_style == "none",
        settings=stack.tenant.compact,
        efficiency=last_compaction_efficiency(turn.state),
        forced=forced,
    )


def applied_compaction(stack: Stack, client: Draft, turn: Turn) -> StoredCompaction | None:
    """The session's stored compaction that the client's history still begins with; None when
    the session has none or none matches."""
    if not turn.state.compactions:
        return None
    return stack.matches.applied(
        turn.tenant, client.system.client, client.messages, turn.state.compactions
    )
