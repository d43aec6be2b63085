"""The async shell around the pure pipeline, in call order: load the request's `Turn` (session
state, workspace view, clock, model window), match the session's stored compactions against the
client's history (once), run the stages, compact when due (`proxy.compaction`), render, and write
what happened back to the store. No HTTP here; `proxy.server.chat` calls it.

The store is never a dependency of the request path: a store that cannot be read yields an empty
state and the request goes through without state features (`degraded`); an unreadable workspace
yields an empty view.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence

from proxy.compaction.compactor import Compactor
from proxy.compaction.job import CompactionOutcome, Sending
from proxy.compaction.policy import should_compact, soft_threshold, threshold_tokens
from proxy.compaction.trigger import BackgroundHook, CompactionTrigger
from proxy.engine.job import compaction_job
from proxy.engine.miss import Miss, cache_miss
from proxy.engine.offer import offered_body
from proxy.engine.pipeline import Stack, run_stages
from proxy.engine.prepared import Prepared, tally
from proxy.engine.record import last_prompt_tokens, turn_record
from proxy.errors import StoreUnavailable
from proxy.models import context_window
from proxy.ports import OutputStore, SessionStore, WorkspaceSource
from proxy.settings import UpstreamSettings, cache_cold_after_s
from proxy.types import JSON, Draft, SessionState, StoredCompaction, Turn, WorkspaceView
from proxy.usage import Usage

log = logging.getLogger(__name__)


class ContextEngine:
    def __init__(
        self,
        *,
        sessions: SessionStore,
        outputs: OutputStore,
        workspace: WorkspaceSource,
        compactor: Compactor,
        stacks: Mapping[str, Stack],
        upstreams: Mapping[str, UpstreamSettings],
        clock: Callable[[], float] = time.time,
        on_background: BackgroundHook | None = None,
    ) -> None:
        self._sessions = sessions
        self._outputs = outputs
        self._workspace = workspace
        self._compactor = compactor
        self._compaction = CompactionTrigger(
            store=sessions, compactor=compactor, on_background=on_background
        )
        self._stacks = stacks
        self._upstreams = upstreams
        self._clock = clock

    async def load_turn(
        self, tenant: str, session: str, client: Draft, *, marked: bool = True
    ) -> Turn:
        """The request's facts: the session's state (empty, and `degraded`, when the store
        could not be read), the workspace view, the clock, the model's window, the stored
        compaction the client's history begins with, and the client's request itself (`marked`:
        whether any object of its body has a `cache_control` key)."""
        stack = self._stacks[tenant]
        upstream = self._upstreams[stack.tenant.upstream]
        degraded = False
        memory = stack.tenant.memory
        shown = memory.enabled and stack.tenant.bootstrap.enabled  # facts are read to be shown
        try:
            state = await self._sessions.load(
                tenant, session, memory=memory.scope if shown else None
            )
        except StoreUnavailable:
            state, degraded = SessionState(), True
        try:
            view = self._workspace.view(tenant, session)
        except Exception:  # a workspace problem never fails a request
            log.warning("workspace of %s unreadable", tenant)
            view = WorkspaceView()
        model = str(client.body.get("model", ""))
        return Turn(
            tenant=tenant,
            session=session,
            model=model,
            now=self._clock(),
            state=state,
            workspace=view,
            cache_style=upstream.cache_style,
            model_window=stack.tenant.model_window or context_window(model),
            applied=matched_compaction(stack, tenant, client, state),
            client=client,
            client_marked=marked,
            degraded=degraded,
        )

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
        recall: bool = False,
        sending: Sending | None = None,
    ) -> Prepared:
        """The outgoing request for `body` (the client's, as `turn.client` splits it). With the
        store down (`turn.degraded`) budgets only cut: a persisted id would 404. `api_key` goes
        to the summarizer; `force_compact` (the upstream said the context is too long) compacts
        whatever the thresholds say; `recall` true: the caller runs the recall loop, so the
        recall tool may be offered (opt-in: never a tool nobody answers); `sending`: the job's."""
        stack = self._stacks[turn.tenant]
        settings = stack.tenant.compact
        client, applied = turn.client, turn.applied
        draft, reports = run_stages(stack.before_degraded if turn.degraded else stack.before,
                                    client, turn)  # fmt: skip
        line = stack.lineages.lineage(turn.tenant, client.system.client, client.messages)
        threshold = threshold_tokens(settings, model_window=turn.model_window)
        covers = applied.covers if applied else 0
        last = last_prompt_tokens(turn.state, line, covers, messages=len(body["messages"]))
        outcome = await self._compact_when_due(
            stack, draft, turn, api_key, last=last, threshold=threshold, forced=force_compact,
            sending=sending)  # fmt: skip
        if outcome is not None and outcome.status == "done":
            draft = draft._replace(messages=outcome.messages)
            covers = outcome.compaction.covers if outcome.compaction else covers
        marked = turn.client_marked or applied is not None or outcome is not None
        body_out, after = stack.finish(
            draft, turn, client_messages=body["messages"], client_marked=marked
        )
        reports.extend(after)
        body_out, offer = offered_body(
            body, body_out, settings=stack.tenant.recall, state=turn.state, covers=covers,
            looping=recall,
        )  # fmt: skip
        return Prepared(
            turn=turn,
            body=body_out,
            reports=tuple(reports),
            lineage=line,
            threshold=threshold,
            covers=covers,
            tally=tally(reports),
            compaction=outcome,
            recall=offer,
        )

    async def _compact_when_due(
        self,
        stack: Stack,
        draft: Draft,
        turn: Turn,
        api_key: str | None,
        *,
        last: int,
        threshold: int,
        forced: bool,
        sending: Sending | None,
    ) -> CompactionOutcome | None:
        """The compaction of `draft` that ran for this request: due when the previous request's
        prompt (`last` tokens) passed `threshold`, or `forced`; past the soft threshold in async
        mode one starts in the background instead (`CompactionTrigger`). None when nothing ran
        now, compaction is off, or no threshold is reached (most requests: the trigger is not
        asked)."""
        settings = stack.tenant.compact
        due = forced or should_compact(last, threshold=threshold)
        soft = settings.mode == "async" and last >= soft_threshold(threshold, settings=settings)
        if not settings.enabled or not (due or soft):
            return None
        job = functools.partial(
            compaction_job, stack, draft, turn, api_key, forced=forced, sending=sending
        )
        return await self._compaction.compact_if_due(settings, turn, job, due=due, soft=soft)

    async def summarize_all(self, turn: Turn, *, api_key: str | None) -> CompactionOutcome:
        """The whole of the client's history (`turn.client`) summarized, for a client that asks
        for a compaction itself (the Responses API's): the stages before compaction run first
        (a stored compaction, budgets, pruning), then one summarizer call
        (`Compactor.summarize_all`); nothing is stored in the session."""
        stack = self._stacks[turn.tenant]
        before = stack.before_degraded if turn.degraded else stack.before
        draft, _ = run_stages(before, turn.client, turn)
        job = compaction_job(stack, draft, turn, api_key, forced=True, whole=True)
        return await self._compactor.summarize_all(job)

    async def persist_outputs(self, prepared: Prepared) -> int:
        """Store the full texts that budgets replaced by `<persisted-output>` blocks.

        Returns how many could not be stored (the store is down): those ids will 404."""
        lost = 0
        for output_id, text in prepared.tally.outputs.items():
            try:
                await self._outputs.put_output(prepared.turn.tenant, output_id, text)
            except StoreUnavailable:
                lost += 1
        return lost

    def cache_miss(self, prepared: Prepared, *, usage: Usage | None, completed: bool) -> Miss:
        """The request's cache facts to record and, when its cache reads fell against the
        previous request's, why (`proxy.engine.miss`); nothing for an answer that did not
        complete."""
        turn = prepared.turn
        ttl = cache_cold_after_s(turn.cache_style, self._stacks[turn.tenant].tenant.cache.ttl)
        return cache_miss(prepared, usage if completed else None, cache_ttl_s=ttl)

    async def record(
        self,
        prepared: Prepared,
        *,
        usage: Usage | None,
        completed: bool,
        messages_in: int,
        events: Sequence[Mapping[str, str]] = (),
        miss: Miss | None = None,
    ) -> bool:
        """Write the request's outcome (with `miss`'s cache facts) to the session state, and
        `events` to the events stream in the same store call; False if the store was down (both
        are lost then)."""
        fields, counters = turn_record(
            prepared, usage=usage, completed=completed, messages_in=messages_in, now=self._clock()
        )
        if miss is not None:
            fields.update(miss.fields)
        turn = prepared.turn
        try:
            await self._sessions.record_turn(
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


def matched_compaction(
    stack: Stack, tenant: str, client: Draft, state: SessionState
) -> StoredCompaction | None:
    """The session's stored compaction that the client's history still begins with (the longest);
    None when the session has none or none matches (an edited history never matches)."""
    if not state.compactions:
        return None
    return stack.matches.applied(tenant, client.system.client, client.messages, state.compactions)
