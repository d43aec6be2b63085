"""Background compactions (async mode): at most one task per session, a reference to each kept.

`CompactionTasks` is a mixin base of `Compactor` (`proxy.compaction.compactor`), which sets the
attributes declared below in its `__init__` and provides `run`; it adds no call layer. A task's
outcome is logged and handed to `on_done`; `aclose` cancels and awaits them all (a cancelled one
stores nothing).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from proxy.compaction.job import CompactionJob, CompactionOutcome

# Logged under the compactor's name, as before the tasks had their own module.
log = logging.getLogger("proxy.compaction.compactor")

OnDone = Callable[[CompactionOutcome], Awaitable[None]]


class CompactionTasks:
    _tasks: set[asyncio.Task[CompactionOutcome]]
    _running: dict[tuple[str, str], asyncio.Task[CompactionOutcome]]
    run: Callable[[CompactionJob], Awaitable[CompactionOutcome]]

    def running(self, tenant: str, session: str) -> bool:
        return (tenant, session) in self._running

    def start_background(self, job: CompactionJob, *, on_done: OnDone | None = None) -> bool:
        """Async mode: compact in a task (at most one per session); False if one is running.

        The job is deep-copied first; `on_done` is awaited with the outcome (its errors logged).
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
                await on_done(outcome)
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
