"""Memory write-back: the facts a compaction's summarizer answered with, kept in the `FactStore`
(issue 19). The async shell around `proxy.memory`, never in the compaction's way.

`MemoryWriter.learn` reads the answer's `<memory>` block, dates and sanitises each fact, leaves
out those the model already knows (`CompactionJob.known_facts`), and adds the rest for the
tenant (or the session, by the tenant's memory scope). It never raises: a missing, empty or
malformed block, a store that fails, or a write slower than `timeout_s` is an outcome, counted
through `on_write(tenant, outcome)`, logged and skipped; the compaction goes on as if it had
learned nothing. Outcomes: `written` (new facts kept), `duplicate` (all were known), `none` (no
or an empty block), `malformed`, `no_answer` (the summarizer failed), `failed`, `timeout`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import NamedTuple

from proxy.compaction.job import CompactionJob
from proxy.memory.block import read_memory
from proxy.memory.fact import fact_key, fact_line
from proxy.ports import FactStore

log = logging.getLogger(__name__)

WRITE_TIMEOUT_S = 2.0
"""How long a compaction waits for its facts to be stored (the Redis store's own bound is
`store.op_timeout_s`, shorter)."""
OnWrite = Callable[[str, str], None]


class Learned(NamedTuple):
    """The outcome of one write-back ("" when the job asked for no facts) and how many facts
    were new."""

    outcome: str = ""
    added: int = 0


class MemoryWriter:
    def __init__(
        self,
        store: FactStore,
        *,
        clock: Callable[[], float] = time.time,
        timeout_s: float = WRITE_TIMEOUT_S,
        on_write: OnWrite | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        self._timeout_s = timeout_s
        self._on_write = on_write

    async def learn(self, job: CompactionJob, answer: str | None) -> Learned:
        """Keep the facts of the summarizer's `answer` (None: it did not answer). Never raises
        but on cancellation."""
        if job.memory is None:
            return Learned()
        learned = await self._learn(job, answer)
        where, outcome = f"{job.tenant}/{job.session}", learned.outcome
        if outcome in ("written", "duplicate"):
            log.info("compaction %s learned %d new facts", where, learned.added)
        elif outcome in ("malformed", "failed", "timeout"):
            log.warning("facts of compaction %s not kept: %s", where, outcome)
        if self._on_write is not None:
            try:
                self._on_write(job.tenant, outcome)
            except Exception:  # observability never costs a compaction
                log.exception("memory write hook failed")
        return learned

    async def _learn(self, job: CompactionJob, answer: str | None) -> Learned:
        memory = job.memory
        assert memory is not None
        if answer is None:
            return Learned("no_answer")
        try:
            found = read_memory(answer)
            day = time.strftime("%Y-%m-%d", time.gmtime(self._clock()))
            lines = [line for text in found.facts if (line := fact_line(text, day=day))]
        except Exception:  # a parser bug must not cost the compaction either
            log.exception("facts of compaction %s/%s unreadable", job.tenant, job.session)
            return Learned("malformed")
        if found.status != "facts":
            return Learned("malformed" if found.status == "malformed" else "none")
        if not lines:
            return Learned("malformed")
        known = {fact_key(line) for line in job.known_facts}
        new = [line for line in lines if fact_key(line) not in known]
        if not new:
            return Learned("duplicate")
        owner = memory.owner(job.session)
        try:
            async with asyncio.timeout(self._timeout_s):
                added = await self._store.add_facts(
                    job.tenant, owner, new, max_lines=memory.max_lines
                )
        except TimeoutError:
            return Learned("timeout")
        except Exception as exc:
            log.warning("facts not stored: %s", type(exc).__name__)
            return Learned("failed")
        return Learned("written" if added else "duplicate", added)
