"""When a request compacts: now when due, in the background past the soft threshold (async
mode), and what a finished background compaction leaves in the store. The thresholds themselves
are `proxy.compaction.policy`'s; `ContextEngine.prepare` asks `CompactionTrigger.compact_if_due`
with the job it would run (built only if one runs)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from proxy.compaction.compactor import Compactor
from proxy.compaction.job import CompactionJob, CompactionOutcome, compaction_fields
from proxy.compaction.policy import CompactSettings
from proxy.ports import SessionStore
from proxy.types import Turn

BackgroundHook = Callable[[CompactionJob, CompactionOutcome], Awaitable[None]]
"""Told of every finished background compaction: (the job, as deep-copied for the background,
and its outcome)."""


class CompactionTrigger:
    def __init__(
        self,
        *,
        store: SessionStore,
        compactor: Compactor,
        on_background: BackgroundHook | None = None,
    ) -> None:
        self.store = store
        self._on_background = on_background
        self._compactor = compactor

    def _start_background(self, job: CompactionJob) -> None:
        self._compactor.start_background(job, on_done=self._counted)

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

    async def _counted(self, job: CompactionJob, outcome: CompactionOutcome) -> None:
        """A finished background compaction counts in its session's state like a sync one, and
        is reported to `on_background` (events, metrics)."""
        if outcome.status == "done":
            fields = compaction_fields(outcome)
            await self.store.record_turn(
                job.tenant, job.session, fields=fields, counters={"compactions": 1}, decisions={}
            )
        if self._on_background is not None:
            await self._on_background(job, outcome)
