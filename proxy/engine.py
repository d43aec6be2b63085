"""The async shell around the pure pipeline: load a `Turn` (`proxy.turn_loader`), run the
stages, compact when due (`proxy.compaction_trigger`), and write what happened back to the store.
No HTTP here; `proxy.server.chat` calls it.

The store is never a dependency of the request path: a failing store yields an empty state and
the request goes through without state features (`Turn.state` empty, `degraded` set).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence

from proxy.compaction_trigger import (
    BackgroundHook,
    CompactionTrigger,
    applied_compaction,
    build_job,
)
from proxy.compactor import Compactor
from proxy.errors import StoreUnavailable
from proxy.pipeline import draft_from_body, run_stages
from proxy.ports import StateStore, WorkspaceSource
from proxy.prepared import Prepared
from proxy.session_record import last_prompt_tokens, turn_record
from proxy.settings import UpstreamSettings
from proxy.stack import Stack
from proxy.stages.compact import should_compact, soft_threshold, threshold_tokens
from proxy.tally import tally
from proxy.turn_loader import TurnLoader
from proxy.types import JSON, Draft, Turn
from proxy.usage import Usage

__all__ = ["BackgroundHook", "ContextEngine", "Prepared"]


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
        self._compactor = compactor
        self._compaction = CompactionTrigger(
            store=store, compactor=compactor, on_background=on_background
        )
        self._turns = TurnLoader(
            store=store, workspace=workspace, stacks=stacks, upstreams=upstreams, clock=clock
        )
        self._stacks = stacks
        self._clock = clock

    async def load_turn(self, tenant: str, session: str, model: str) -> tuple[Turn, bool]:
        """The request's facts; `True` as second value when the store could not be read."""
        return await self._turns.load_turn(tenant, session, model)

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
        applied = applied_compaction(stack, client, turn)
        line = stack.lineages.lineage(turn.tenant, client.system.client, client.messages)
        threshold = threshold_tokens(settings, model_window=turn.model_window)
        soft_at = soft_threshold(threshold, settings=settings)
        covers = applied.covers if applied else 0
        last = last_prompt_tokens(turn.state, line, covers, messages=len(body["messages"]))
        job = functools.partial(
            build_job, stack, client, draft, turn, applied, api_key, forced=force_compact
        )
        due = force_compact or should_compact(last, threshold=threshold)
        outcome = await self._compaction.compact_if_due(
            settings, turn, job, due=due, soft=last >= soft_at
        )
        if outcome is not None and outcome.status == "done":
            draft = draft._replace(messages=outcome.messages)
            covers = outcome.compaction.covers if outcome.compaction else covers
        marked = client_marked or applied is not None or outcome is not None
        body_out, after = stack.finish(
            draft, turn, client_messages=body["messages"], client_marked=marked
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
        self,
        prepared: Prepared,
        *,
        usage: Usage | None,
        completed: bool,
        messages_in: int,
        events: Sequence[Mapping[str, str]] = (),
    ) -> bool:
        """Write the request's outcome to the session state, and `events` to the events stream
        in the same store call; False if the store was down (both are lost then)."""
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
                events=events,
            )
        except StoreUnavailable:
            return False
        return True
