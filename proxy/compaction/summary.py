"""The summary step of one compaction: one bounded summarizer call, then the compacted history
and the compaction to store.

Called by `proxy.compaction.compactor` under the session lock. Failures come back as a reason,
never as an exception (except cancellation).
"""

from __future__ import annotations

import asyncio
import logging

from proxy.compaction import plan as decide
from proxy.compaction import prompt as summary_request
from proxy.compaction.job import CompactionJob
from proxy.compaction.plan import CompactionPlan
from proxy.compaction.stored import CompactSettings, make_compaction
from proxy.history import history_salt
from proxy.ports import Summarizer
from proxy.types import Message, StoredCompaction

# Logged under the compactor's name, as before this step had its own module.
log = logging.getLogger("proxy.compaction.compactor")


async def summarize(
    job: CompactionJob, settings: CompactSettings, plan: CompactionPlan, summarizer: Summarizer
) -> tuple[str, str]:
    """The summary text, or "" and why not (`render`, `timeout`, `summarizer`, `empty_summary`)."""
    prefix, model = job.working[: plan.split], job.model
    try:
        if job.use_transcript:
            body = summary_request.build_transcript_body(prefix, settings=settings, model=model)
        else:
            body = summary_request.build_summary_body(
                job.prefix_body_for(prefix), settings=settings, model=model
            )
    except Exception:
        return "", "render"
    try:
        async with asyncio.timeout(settings.timeout_s):
            text = await summarizer.complete(body, api_key=job.api_key)
    except TimeoutError:
        return "", "timeout"
    except Exception as exc:
        log.warning("summarizer failed: %s", type(exc).__name__)
        return "", "summarizer"
    summary = summary_request.extract_summary(text or "")
    return summary, "" if summary else "empty_summary"


def compacted_history(
    job: CompactionJob, settings: CompactSettings, plan: CompactionPlan, covers: int, summary: str
) -> list[Message]:
    """Summary, preserved tool content (taken from the client's unpruned messages), kept part."""
    if job.applied is not None:
        source = [*job.applied.replacement, *job.client_history[job.applied.covers : covers]]
    else:
        source = list(job.client_history[:covers])
    preserved = decide.preserved_tool_content(source, settings=settings)
    return decide.splice_summary(job.working, plan, summary, preserved=preserved)


def stored_compaction(
    job: CompactionJob,
    plan: CompactionPlan,
    covers: int,
    messages: list[Message],
    *,
    created_at: float,
    archive_id: str,
) -> StoredCompaction:
    """The compaction to store: what replaces the client's `history[:covers]` is `messages`
    without its kept tail (`working[plan.split:]`)."""
    replacement = messages[: len(messages) - (len(job.working) - plan.split)]
    return make_compaction(
        job.client_history,
        CompactionPlan(split=covers),
        replacement,
        salt=history_salt(job.tenant, job.client_system),
        created_at=created_at,
        archive_id=archive_id,
    )
