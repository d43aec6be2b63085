"""When a request compacts: now when due, in the background past the soft threshold (async)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from proxy.adapters.memory.store import MemoryStore
from proxy.compaction.compactor import Compactor
from proxy.compaction.job import CompactionJob, CompactionOutcome
from proxy.compaction.policy import CompactSettings
from proxy.compaction.trigger import CompactionTrigger
from proxy.ports import Completion
from proxy.types import JSON, Message
from tests.factories import assistant, compaction_job, draft, exchange, system, turn, user

SYNC = CompactSettings(keep_recent=2, timeout_s=5.0)
ASYNC = CompactSettings(keep_recent=2, timeout_s=5.0, mode="async")
HISTORY: tuple[Message, ...] = (
    user("q1"),
    *exchange("c1", "r1"),
    assistant("a1"),
    user("q2"),
    assistant("a2"),
)


class Summarizer:
    """A Summarizer port that counts its calls and, when gated, waits to answer."""

    def __init__(self) -> None:
        self.calls = 0
        self.gate: asyncio.Event | None = None

    async def complete(self, body: JSON, *, api_key: str | None) -> Completion:
        self.calls += 1
        if self.gate is not None:
            await self.gate.wait()
        return Completion("<summary>S</summary>")


def prefix_body(messages: Sequence[Message]) -> JSON:
    return {"model": "gpt-4o", "messages": [system("sys"), *messages]}


def job_maker() -> tuple[Callable[[], CompactionJob], list[CompactionJob]]:
    """A job factory for `compact_if_due` and the list of the jobs it built."""
    built: list[CompactionJob] = []

    def make() -> CompactionJob:
        client = draft([system("sys"), *HISTORY])
        job = compaction_job(client, settings=SYNC, prefix_body_for=prefix_body)
        built.append(job)
        return job

    return make, built


class Heard:
    """An `on_background` hook that records what it is told."""

    def __init__(self) -> None:
        self.told: list[tuple[str, str, CompactionOutcome]] = []
        self.done = asyncio.Event()

    async def __call__(self, job: CompactionJob, outcome: CompactionOutcome) -> None:
        self.told.append((job.tenant, job.session, outcome))
        self.done.set()


def make_trigger() -> tuple[CompactionTrigger, Compactor, MemoryStore, Summarizer, Heard]:
    store, summarizer, heard = MemoryStore(), Summarizer(), Heard()
    compactor = Compactor(store=store, summarizers={"openai": summarizer})
    trigger = CompactionTrigger(store=store, compactor=compactor, on_background=heard)
    return trigger, compactor, store, summarizer, heard


async def test_a_disabled_compaction_never_builds_a_job() -> None:
    trigger, _, _, summarizer, _ = make_trigger()
    make, built = job_maker()
    off = CompactSettings(enabled=False)
    assert await trigger.compact_if_due(off, turn(), make, due=True, soft=True) is None
    assert built == [] and summarizer.calls == 0


async def test_a_due_compaction_runs_now_and_hands_back_its_outcome() -> None:
    trigger, _, _, summarizer, heard = make_trigger()
    make, built = job_maker()
    outcome = await trigger.compact_if_due(SYNC, turn(), make, due=True, soft=True)
    assert outcome is not None and outcome.status == "done"
    assert len(built) == 1 and summarizer.calls == 1
    assert heard.told == []  # only background compactions are told


async def test_past_the_soft_threshold_sync_mode_does_nothing_yet() -> None:
    trigger, compactor, _, summarizer, _ = make_trigger()
    make, built = job_maker()
    assert await trigger.compact_if_due(SYNC, turn(), make, due=False, soft=True) is None
    assert built == [] and summarizer.calls == 0
    assert not compactor.running("default", "s1")


async def test_past_the_soft_threshold_async_mode_compacts_in_the_background_and_counts_it() -> (
    None
):
    trigger, compactor, store, _, heard = make_trigger()
    make, built = job_maker()
    assert await trigger.compact_if_due(ASYNC, turn(), make, due=False, soft=True) is None
    assert len(built) == 1
    await asyncio.wait_for(heard.done.wait(), 5)
    [(tenant, session, outcome)] = heard.told
    assert (tenant, session, outcome.status) == ("default", "s1", "done")
    state = await store.load("default", "s1")
    assert state.int_field("compactions") == 1
    assert state.int_field("compaction_folded_chars") == outcome.folded_chars > 0
    assert state.int_field("compaction_saved_chars") == outcome.saved_chars != 0
    await compactor.aclose()


async def test_a_due_request_in_async_mode_does_not_wait_for_a_running_background_summary() -> None:
    trigger, compactor, _, summarizer, heard = make_trigger()
    summarizer.gate = asyncio.Event()
    make, built = job_maker()
    await trigger.compact_if_due(ASYNC, turn(), make, due=False, soft=True)
    assert compactor.running("default", "s1")
    assert await trigger.compact_if_due(ASYNC, turn(), make, due=True, soft=True) is None
    assert len(built) == 1
    summarizer.gate.set()
    await asyncio.wait_for(heard.done.wait(), 5)
    assert summarizer.calls == 1
    await compactor.aclose()


async def test_below_both_thresholds_nothing_runs() -> None:
    trigger, compactor, _, _, _ = make_trigger()
    make, built = job_maker()
    for settings in (SYNC, ASYNC):
        assert await trigger.compact_if_due(settings, turn(), make, due=False, soft=False) is None
    assert built == [] and not compactor.running("default", "s1")
