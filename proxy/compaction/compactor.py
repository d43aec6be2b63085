"""The async shell of compaction: lock, archive, one summarizer call, fenced save (DESIGN §3),
and the facts the summarizer answered with kept beside the summary (`MemoryWriter`, issue 19).

Only ports are used here (`CompactionStore`, `Summarizer`); every decision is a pure function
(`proxy.compaction.plan`: what is cut and what replaces it; `proxy.compaction.prompt`: the
summarizer's request and the reading of its answer; `proxy.compaction.stored`: the compaction to
store). Outcomes, never exceptions: a failed compaction leaves the request as it was (`messages` =
the working history) and nothing stored; only a cancellation propagates, and it stores nothing.

Sync mode runs a job now (`run`); async mode starts it in a background task (`start_background`),
at most one per session, a reference to each kept; `aclose` cancels and awaits them all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace

import orjson

from proxy.compaction import plan as decide
from proxy.compaction import prompt
from proxy.compaction.job import (
    CompactionJob,
    CompactionOutcome,
    Status,
    client_covers,
    compacted_history,
)
from proxy.compaction.plan import CompactionPlan
from proxy.compaction.policy import worth_compacting
from proxy.compaction.stored import json_chars, stored_compaction
from proxy.compaction.writeback import Learned, MemoryWriter
from proxy.ports import CompactionStore, Completion, Summarizer
from proxy.types import Message, StoredCompaction

log = logging.getLogger(__name__)

OnDone = Callable[[CompactionJob, CompactionOutcome], Awaitable[None]]


class Compactor:
    """Compacts sessions through the ports; holds a reference to every background task.
    `summarizers` are by upstream name; `memory` keeps the facts of every summary that a job
    asks for (without it, none are kept)."""

    def __init__(
        self,
        *,
        store: CompactionStore,
        summarizers: Mapping[str, Summarizer],
        lock_ttl_ms: int | None = None,
        clock: Callable[[], float] = time.time,
        memory: MemoryWriter | None = None,
    ) -> None:
        self._store = store
        self._memory = memory
        self._summarizers = summarizers
        self._lock_ttl_ms = lock_ttl_ms
        self._clock = clock
        self._tasks: set[asyncio.Task[CompactionOutcome]] = set()
        self._running: dict[tuple[str, str], asyncio.Task[CompactionOutcome]] = {}

    async def run(self, job: CompactionJob) -> CompactionOutcome:
        """Compact one session now. Never raises, except on cancellation (nothing stored)."""
        settings = job.settings
        if not settings.enabled:
            return _outcome(job, "skipped", "disabled")
        plan = job.plan
        sizes = {"working_len": len(job.working), "client_len": len(job.client_history)}
        covers = plan and client_covers(plan.split, applied=job.applied, **sizes)
        if plan is None or not covers:
            return _outcome(job, "skipped", "nothing_to_summarize")
        folded = decide.folded_chars(job.working, plan, keep_first_user=settings.keep_first_user)
        size = json_chars(job.client_system) + json_chars(job.working)
        if not job.forced and not worth_compacting(folded, size, efficiency=job.efficiency):
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
            return await self._locked(job, plan, covers, summarizer, token)
        finally:
            with contextlib.suppress(Exception):
                await self._store.release_lock(job.tenant, job.session, token)

    async def _locked(
        self,
        job: CompactionJob,
        plan: CompactionPlan,
        covers: int,
        summarizer: Summarizer,
        token: str,
    ) -> CompactionOutcome:
        """Under the lock: archive, summarize and splice, then the fenced save. The first step
        that fails is the outcome, and nothing after it runs, but for the facts of an answer,
        which are kept whatever becomes of its summary (beside the save, never in its way)."""
        archive_id = await self._archive(job)
        if archive_id is None:
            return _outcome(job, "failed", "archive")
        summary, reason, answer = await summarize(job, plan, summarizer)
        if not summary:
            failed = _outcome(job, "failed", reason)
            return _learned(failed, await self._learn(job, answer), answer)
        messages = compacted_history(job, plan, covers, summary)
        compaction = stored_compaction(
            job.client_history,
            job.client_system,
            tenant=job.tenant,
            covers=covers,
            # what replaces the client's history[:covers]: the messages without their kept tail
            replacement=messages[: len(messages) - (len(job.working) - plan.split)],
            created_at=self._clock(),
            archive_id=archive_id,
        )
        outcome, learned = await asyncio.gather(
            self._save(job, messages, compaction, token), self._learn(job, answer)
        )
        outcome = _learned(outcome, learned, answer)
        if outcome.status != "done":
            return outcome
        summarized, kept = job.working[: plan.split], len(job.working) - plan.split
        saved = json_chars(summarized) - json_chars(messages[: len(messages) - kept])
        return replace(
            outcome,
            saved_chars=saved,
            folded_chars=decide.folded_chars(
                job.working, plan, keep_first_user=job.settings.keep_first_user
            ),
        )

    async def summarize_all(self, job: CompactionJob) -> CompactionOutcome:
        """A client's own compaction request (the Responses API's): `job.plan` covers the whole
        working history, summarized in one call after the archive (best effort: the client
        drops its history whatever is kept here). `done` with `messages` = the summary and the
        preserved tool output standing for it all; nothing is stored in the session and no lock
        is taken (the caller keeps the messages behind a handle). `failed` with why when no
        summary came; the facts of an answer are kept either way."""
        plan = job.plan
        if plan is None or not job.working:
            return _outcome(job, "failed", "nothing_to_summarize")
        summarizer = self._summarizer(job.settings.summarizer_upstream or job.upstream)
        if summarizer is None:
            return _outcome(job, "failed", "no_summarizer")
        await self._archive(job)
        summary, reason, answer = await summarize(job, plan, summarizer)
        learned = await self._learn(job, answer)
        if not summary:
            return _learned(_outcome(job, "failed", reason), learned, answer)
        messages = compacted_history(job, plan, len(job.client_history), summary)
        return _learned(CompactionOutcome("done", "compacted", tuple(messages)), learned, answer)

    async def _learn(self, job: CompactionJob, answer: Completion | None) -> Learned:
        if self._memory is None:
            return Learned()
        return await self._memory.learn(job, None if answer is None else answer.text or "")

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
        if name is None and len(source) == 1:
            return next(iter(source.values()))
        return source.get(name or "")

    def running(self, tenant: str, session: str) -> bool:
        return (tenant, session) in self._running

    def start_background(self, job: CompactionJob, *, on_done: OnDone | None = None) -> bool:
        """Async mode: compact in a task (at most one per session); False if one is running.

        The job is deep-copied first; `on_done(copy, outcome)` is awaited (its errors logged).
        """
        key = (job.tenant, job.session)
        if key in self._running:
            return False
        task = asyncio.create_task(self._background(job.detached(), on_done))
        self._tasks.add(task)
        self._running[key] = task
        task.add_done_callback(lambda done: self._forget(key, done))
        return True

    async def _background(self, job: CompactionJob, on_done: OnDone | None) -> CompactionOutcome:
        outcome = await self.run(job)
        log.info("background compaction %s/%s: %s", job.tenant, job.session, outcome.reason)
        if on_done is not None:
            try:
                await on_done(job, outcome)
            except Exception:
                log.exception("compaction on_done callback failed")
        return outcome

    def _forget(self, key: tuple[str, str], task: asyncio.Task[CompactionOutcome]) -> None:
        self._tasks.discard(task)
        if self._running.get(key) is task:
            del self._running[key]

    async def aclose(self) -> None:
        """Cancel and await every background compaction (a cancelled one stores nothing)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def summarize(
    job: CompactionJob, plan: CompactionPlan, summarizer: Summarizer
) -> tuple[str, str, Completion | None]:
    """The summary text, or "" and why not (`render`, `timeout`, `summarizer`,
    `empty_summary`); and the answer it was read from (None when there was none)."""
    settings, model, memory = job.settings, job.model, job.memory is not None
    try:
        if job.use_transcript:
            prefix = job.working[: plan.split]
            body = prompt.build_transcript_body(
                prefix, settings=settings, model=model, memory=memory
            )
        elif job.prefix_body is None:
            return "", "render", None  # the prefix could not be rendered
        else:
            body = prompt.build_summary_body(
                job.prefix_body, settings=settings, model=model, memory=memory
            )
    except Exception:
        return "", "render", None
    try:
        async with asyncio.timeout(settings.timeout_s):
            answer = await summarizer.complete(body, api_key=job.api_key)
    except TimeoutError:
        return "", "timeout", None
    except Exception as exc:
        log.warning("summarizer failed: %s", type(exc).__name__)
        return "", "summarizer", None
    summary = prompt.extract_summary(answer.text or "")
    return summary, "" if summary else "empty_summary", answer


def _learned(
    outcome: CompactionOutcome, learned: Learned, answer: Completion | None
) -> CompactionOutcome:
    """`outcome` with what became of the answer's facts, and the summarizer call's usage."""
    usage = answer.usage if answer is not None else None
    if not learned.outcome and usage is None:
        return outcome
    return replace(outcome, memory=learned.outcome, facts_added=learned.added, usage=usage)


def _outcome(job: CompactionJob, status: Status, reason: str) -> CompactionOutcome:
    if status == "failed":
        log.warning("compaction %s/%s failed: %s", job.tenant, job.session, reason)
    return CompactionOutcome(status, reason, job.working)
