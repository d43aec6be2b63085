"""The async shell around the pure pipeline: load a `Turn`, run the stages, compact when due,
and write what happened back to the store. No HTTP here; `proxy.server.chat` calls it.

The store is never a dependency of the request path: a failing store yields an empty state and
the request goes through without state features (`Turn.state` empty, `degraded` set).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import NamedTuple

from proxy.compactor import CompactionJob, CompactionOutcome, Compactor
from proxy.errors import StoreUnavailable
from proxy.models import context_window
from proxy.pipeline import draft_from_body, run_stages
from proxy.ports import StateStore, WorkspaceSource
from proxy.session_record import last_prompt_tokens, turn_record
from proxy.settings import UpstreamSettings
from proxy.stack import Stack
from proxy.stages.compact import (
    CompactSettings,
    should_compact,
    soft_threshold,
    threshold_tokens,
)
from proxy.tally import Tally, tally
from proxy.types import (
    JSON,
    Draft,
    SessionState,
    StageReport,
    StoredCompaction,
    Turn,
    WorkspaceView,
)
from proxy.usage import Usage

log = logging.getLogger(__name__)

BackgroundHook = Callable[[str, str, CompactionOutcome], Awaitable[None]]
"""Told of every finished background compaction: (tenant, session, outcome)."""


class Prepared(NamedTuple):
    """The outgoing request and everything known about how it was made (a named tuple: one is
    built per request)."""

    turn: Turn
    body: JSON
    reports: tuple[StageReport, ...]
    lineage: str
    threshold: int
    covers: int
    tally: Tally
    """`reports` summed (`proxy.tally`)."""
    compaction: CompactionOutcome | None = None
    store_degraded: bool = False


class ContextEngine:
    def __init__(
        self,
        *,
        store: StateStore,
        workspace: WorkspaceSource,
        compactor: Compactor,
        stacks: Mapping[str, Stack],
        upstreams: Mapping[str, UpstreamSettings],
        clock: Callable[[], float] = time.time,
        on_background: BackgroundHook | None = None,
    ) -> None:
        self.store = store
        self._on_background = on_background
        self._workspace = workspace
        self._compactor = compactor
        self._stacks = stacks
        self._upstreams = upstreams
        self._clock = clock

    async def load_turn(self, tenant: str, session: str, model: str) -> tuple[Turn, bool]:
        """The request's facts; `True` as second value when the store could not be read."""
        stack = self._stacks[tenant]
        upstream = self._upstreams[stack.tenant.upstream]
        degraded = False
        try:
            state = await self.store.load(tenant, session)
        except StoreUnavailable:
            state, degraded = SessionState(), True
        try:
            view = self._workspace.view(tenant, session)
        except Exception:  # a workspace problem never fails a request
            log.warning("workspace of %s unreadable", tenant)
            view = WorkspaceView()
        window = stack.tenant.model_window or context_window(model)
        turn = Turn(
            tenant=tenant,
            session=session,
            model=model,
            now=self._clock(),
            state=state,
            workspace=view,
            cache_style=upstream.cache_style,
            model_window=window,
        )
        return turn, degraded

    def derived_session_id(self, tenant: str, client: Draft) -> str:
        """`proxy.identity.derived_session_id` of the client's draft, remembered per tenant."""
        return self._stacks[tenant].lineages.session_id(
            tenant, client.system.client, client.messages
        )

    async def prepare(
        self,
        body: JSON,
        *,
        turn: Turn,
        api_key: str | None,
        force_compact: bool = False,
        store_degraded: bool = False,
        client: Draft | None = None,
        client_marked: bool = True,
    ) -> Prepared:
        """The outgoing request; with the store down budgets only cut (a persisted id would 404).
        `client`: that very `draft_from_body(body)`, if built already. `client_marked=False`: no
        object of `body` has a `cache_control` key (`Stack.finish` then need not look for one)."""
        stack = self._stacks[turn.tenant]
        settings = stack.tenant.compact
        if client is None:
            client = draft_from_body(body)
        before = stack.before_degraded if store_degraded else stack.before
        draft, reports = run_stages(before, client, turn)
        applied = _applied(stack, client, turn)
        line = stack.lineages.lineage(turn.tenant, client.system.client, client.messages)
        threshold = threshold_tokens(settings, model_window=turn.model_window)
        soft_at = soft_threshold(threshold, settings=settings)
        covers = applied.covers if applied else 0
        last = last_prompt_tokens(turn.state, line, covers)
        job = functools.partial(self._job, stack, client, draft, turn, applied, api_key)
        due = force_compact or should_compact(last, threshold=threshold)
        outcome = await self._compact_if_due(settings, turn, job, due=due, soft=last >= soft_at)
        if outcome is not None and outcome.status == "done":
            draft = draft._replace(messages=outcome.messages)
            covers = outcome.compaction.covers if outcome.compaction else covers
        body_out, after = stack.finish(
            draft,
            turn,
            client_messages=body["messages"],
            client_marked=client_marked or applied is not None or outcome is not None,
        )
        reports.extend(after)
        return Prepared(
            turn=turn,
            body=body_out,
            reports=tuple(reports),
            lineage=line,
            threshold=threshold,
            covers=covers,
            tally=tally(reports),
            compaction=outcome,
            store_degraded=store_degraded,
        )

    def _start_background(self, job: CompactionJob) -> None:
        counted = functools.partial(self._counted, job.tenant, job.session)
        self._compactor.start_background(job, on_done=counted)

    async def _compact_if_due(
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
            await self.store.record_turn(
                tenant, session, fields={}, counters={"compactions": 1}, decisions={}
            )
        if self._on_background is not None:
            await self._on_background(tenant, session, outcome)

    async def persist_outputs(self, prepared: Prepared) -> int:
        """Store the full texts that budgets replaced by `<persisted-output>` blocks.

        Returns how many could not be stored (the store is down): those ids will 404."""
        lost = 0
        for output_id, text in prepared.tally.outputs.items():
            try:
                await self.store.put_output(prepared.turn.tenant, output_id, text)
            except StoreUnavailable:
                lost += 1
        return lost

    async def record(
        self, prepared: Prepared, *, usage: Usage | None, completed: bool, messages_in: int
    ) -> bool:
        """Write the request's outcome to the session state; False if the store was down."""
        fields, counters = turn_record(
            prepared, usage=usage, completed=completed, messages_in=messages_in, now=self._clock()
        )
        turn = prepared.turn
        try:
            await self.store.record_turn(
                turn.tenant,
                turn.session,
                fields=fields,
                counters=counters,
                decisions=prepared.tally.decisions,
            )
        except StoreUnavailable:
            return False
        return True

    def _job(
        self,
        stack: Stack,
        client: Draft,
        draft: Draft,
        turn: Turn,
        applied: StoredCompaction | None,
        api_key: str | None,
    ) -> CompactionJob:
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
        )


def _applied(stack: Stack, client: Draft, turn: Turn) -> StoredCompaction | None:
    if not turn.state.compactions:
        return None
    return stack.matches.applied(
        turn.tenant, client.system.client, client.messages, turn.state.compactions
    )
