"""The async shell of compaction: lock, archive, one summarizer call, fenced save (DESIGN §3).

Only ports are used here (`StateStore`, `Summarizer`); every decision is a pure function of
`proxy.stages.compact` (when) or `proxy.stages.compaction_plan` (what is cut and what replaces
it). Outcomes, never exceptions: a failed compaction leaves the request as it
was (`messages` = the working history) and nothing stored. The job, its outcome and the mapping
of working indices to client ones are in `proxy.compaction_job`; the summary step is in
`proxy.compaction_summary`; the background tasks (`start_background`, `running`, `aclose`) in
`proxy.compaction_tasks`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import orjson

from proxy.compaction_job import CompactionJob, CompactionOutcome, Status, client_covers
from proxy.compaction_summary import compacted_history, stored_compaction, summarize
from proxy.compaction_tasks import CompactionTasks
from proxy.ports import StateStore, Summarizer
from proxy.stages import compact as decide
from proxy.stages.compact import CompactionPlan, CompactSettings
from proxy.stages.compaction_plan import folded_chars
from proxy.types import JSON, Message, StoredCompaction

__all__ = ["CompactionJob", "CompactionOutcome", "Compactor", "client_covers"]

log = logging.getLogger(__name__)

SummarizerSource = Mapping[str, Summarizer] | Callable[[str], Summarizer]


class Compactor(CompactionTasks):
    """Compacts sessions through the ports; holds a reference to every background task."""

    def __init__(
        self,
        *,
        store: StateStore,
        summarizers: SummarizerSource,
        settings: CompactSettings,
        lock_ttl_ms: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._summarizers = summarizers
        self._settings = settings
        self._lock_ttl_ms = lock_ttl_ms
        self._clock = clock
        self._tasks: set[asyncio.Task[CompactionOutcome]] = set()
        self._running: dict[tuple[str, str], asyncio.Task[CompactionOutcome]] = {}

    async def compact(
        self,
        *,
        tenant: str,
        session: str,
        client_history: Sequence[Message],
        client_system: Sequence[Message],
        working: Sequence[Message],
        prefix_body_for: Callable[[Sequence[Message]], JSON],
        model: str,
        api_key: str | None,
        applied: StoredCompaction | None = None,
        upstream: str | None = None,
        use_transcript: bool = False,
        settings: CompactSettings | None = None,
    ) -> CompactionOutcome:
        """Compact one session now (sync mode); the arguments are described on `CompactionJob`.
        Never raises, except on cancellation, which stores nothing."""
        job = CompactionJob(
            tenant, session, tuple(client_history), tuple(client_system), tuple(working),
            prefix_body_for, model, api_key, applied, upstream, use_transcript, settings,
        )  # fmt: skip
        return await self.run(job)

    async def run(self, job: CompactionJob) -> CompactionOutcome:
        settings = job.settings or self._settings
        if not settings.enabled:
            return _outcome(job, "skipped", "disabled")
        plan = decide.plan_compaction(job.working, keep_recent=settings.keep_recent)
        sizes = {"working_len": len(job.working), "client_len": len(job.client_history)}
        covers = plan and client_covers(plan.split, applied=job.applied, **sizes)
        if plan is None or not covers:
            return _outcome(job, "skipped", "nothing_to_summarize")
        folded = folded_chars(job.working, plan)
        size = decide.json_chars(job.client_system) + decide.json_chars(job.working)
        if not job.forced and not decide.worth_compacting(folded, size, efficiency=job.efficiency):
            return _outcome(job, "skipped", "low_savings")
        summarizer = self._summarizer(settings.summarizer_upstream or job.upstream)
        if summarizer is None:
            return _outcome(job, "failed", "no_summarizer")
        ttl_ms = self._lock_ttl_ms or int((settings.timeout_s + 30) * 1000)  # outlives the call
        try:
            token = await self._store.acquire_lock(job.tenant, job.session, ttl_ms=ttl_ms)
        except Exception:
            return _outcome(job, "failed", "store")
        if token is None:
            return _outcome(job, "skipped", "locked")
        try:
            return await self._locked(job, settings, plan, covers, summarizer, token)
        finally:
            with contextlib.suppress(Exception):
                await self._store.release_lock(job.tenant, job.session, token)

    async def _locked(
        self,
        job: CompactionJob,
        settings: CompactSettings,
        plan: CompactionPlan,
        covers: int,
        summarizer: Summarizer,
        token: str,
    ) -> CompactionOutcome:
        """Under the lock: archive, summarize and splice, then the fenced save. The first step
        that fails is the outcome, and nothing after it runs."""
        archive_id = await self._archive(job)
        if archive_id is None:
            return _outcome(job, "failed", "archive")
        summary, reason = await summarize(job, settings, plan, summarizer)
        if not summary:
            return _outcome(job, "failed", reason)
        messages = compacted_history(job, settings, plan, covers, summary)
        compaction = stored_compaction(
            job, plan, covers, messages, created_at=self._clock(), archive_id=archive_id
        )
        outcome = await self._save(job, messages, compaction, token)
        if outcome.status != "done":
            return outcome
        summarized, kept = job.working[: plan.split], len(job.working) - plan.split
        saved = decide.json_chars(summarized) - decide.json_chars(messages[: len(messages) - kept])
        return replace(outcome, saved_chars=saved, folded_chars=folded_chars(job.working, plan))

    async def _archive(self, job: CompactionJob) -> str | None:
        """Archive the full history as the client sent it, before anything is dropped: the
        archive entry's id, or None when the store failed (then nothing is compacted)."""
        try:
            raw = orjson.dumps([*job.client_system, *job.client_history])
            return await self._store.archive(job.tenant, job.session, raw)
        except Exception:
            return None

    async def _save(
        self,
        job: CompactionJob,
        messages: list[Message],
        compaction: StoredCompaction,
        token: str,
    ) -> CompactionOutcome:
        """Store the compaction and the snapshot, only while `token` still holds the lock."""
        snapshot = orjson.dumps([*job.client_system, *messages])
        try:
            saved = await self._store.save_compaction(
                job.tenant, job.session, compaction, snapshot_json=snapshot, lock_token=token
            )
        except Exception:
            return _outcome(job, "failed", "store")
        if not saved:
            return _outcome(job, "failed", "lock_lost")
        return CompactionOutcome("done", "compacted", tuple(messages), compaction)

    def _summarizer(self, name: str | None) -> Summarizer | None:
        source = self._summarizers
        if not isinstance(source, Mapping):
            return source(name or "")
        if name is None and len(source) == 1:
            return next(iter(source.values()))
        return source.get(name or "")


def _outcome(job: CompactionJob, status: Status, reason: str) -> CompactionOutcome:
    if status == "failed":
        log.warning("compaction %s/%s failed: %s", job.tenant, job.session, reason)
    return CompactionOutcome(status, reason, job.working)
