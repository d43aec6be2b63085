"""Memory write-back: the facts of a summarizer's answer kept for the tenant (or the session),
dated, sanitised, known ones left out; every other outcome counted, never raised."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from proxy.adapters.memory.store import MemoryStore
from proxy.compaction.job import CompactionJob
from proxy.compaction.policy import CompactSettings
from proxy.compaction.writeback import Learned, MemoryWriter
from proxy.errors import StoreUnavailable
from proxy.memory.ledger import MemorySettings
from tests.factories import compaction_job, draft, user

DEC_3 = 1796256000.0  # 2026-12-03 00:00 UTC
FACTS = "<summary>S</summary><memory>\n- Lives in Lisbon.\n- Prefers short answers.\n</memory>"


TENANT_SCOPE = MemorySettings()


def job(memory: MemorySettings | None = TENANT_SCOPE, **kw: object) -> CompactionJob:
    client = draft([user("a"), user("b"), user("c")])
    return compaction_job(client, settings=CompactSettings(keep_recent=1), memory=memory, **kw)


class Counted:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def __call__(self, tenant: str, outcome: str) -> None:
        self.seen.append((tenant, outcome))


def writer(store: object, **kw: object) -> tuple[MemoryWriter, Counted]:
    counted = Counted()
    return MemoryWriter(store, clock=lambda: DEC_3, on_write=counted, **kw), counted  # type: ignore[arg-type]


async def test_facts_are_kept_dated_for_the_tenant() -> None:
    store = MemoryStore()
    memory, counted = writer(store)
    assert await memory.learn(job(), FACTS) == Learned("written", 2)
    assert await store.read_facts("default", None) == (
        "- 2026-12-03: Lives in Lisbon.",
        "- 2026-12-03: Prefers short answers.",
    )
    assert counted.seen == [("default", "written")]


async def test_with_session_scope_facts_are_the_sessions_own() -> None:
    store = MemoryStore()
    memory, _ = writer(store)
    await memory.learn(job(MemorySettings(scope="session")), FACTS)
    assert await store.read_facts("default", None) == ()
    assert len(await store.read_facts("default", "s1")) == 2


async def test_facts_the_model_already_knows_are_not_written() -> None:
    store = MemoryStore()
    memory, _ = writer(store)
    known = ("# index", "- 2026-11-01: lives in LISBON", "- 2026-11-02: Prefers short answers")
    assert await memory.learn(job(known_facts=known), FACTS) == Learned("duplicate", 0)
    assert await store.read_facts("default", None) == ()
    assert await memory.learn(job(), FACTS) == Learned("written", 2)
    assert await memory.learn(job(), FACTS) == Learned("duplicate", 0)


@pytest.mark.parametrize(
    ("answer", "outcome"),
    [
        ("<summary>S</summary>", "none"),
        ("<summary>S</summary><memory></memory>", "none"),
        ("<summary>S</summary><memory>nothing here</memory>", "malformed"),
        ("<memory>- <soul></soul>\n- !!!</memory>", "malformed"),
        (None, "no_answer"),
    ],
)
async def test_an_answer_without_usable_facts_writes_nothing_and_says_why(
    answer: str | None, outcome: str
) -> None:
    store = MemoryStore()
    memory, counted = writer(store)
    assert await memory.learn(job(), answer) == Learned(outcome, 0)
    assert await store.read_facts("default", None) == ()
    assert counted.seen == [("default", outcome)]


async def test_without_memory_settings_nothing_is_asked_nor_counted() -> None:
    memory, counted = writer(MemoryStore())
    assert await memory.learn(job(None), FACTS) == Learned()
    assert counted.seen == []


class BrokenFacts(MemoryStore):
    def __init__(self, *, delay: float = 0.0, error: Exception | None = None) -> None:
        super().__init__()
        self.delay, self.error = delay, error

    async def add_facts(
        self, tenant: str, owner: str | None, lines: Sequence[str], *, max_lines: int
    ) -> int:
        await asyncio.sleep(self.delay)
        if self.error is not None:
            raise self.error
        return await super().add_facts(tenant, owner, lines, max_lines=max_lines)


@pytest.mark.parametrize(
    "error", [StoreUnavailable("down"), OSError("read-only"), RuntimeError("bug")]
)
async def test_a_failing_store_is_counted_and_never_raises(error: Exception) -> None:
    memory, counted = writer(BrokenFacts(error=error))
    assert await memory.learn(job(), FACTS) == Learned("failed", 0)
    assert counted.seen == [("default", "failed")]


async def test_a_slow_store_is_given_up_on_after_the_timeout() -> None:
    memory, counted = writer(BrokenFacts(delay=5.0), timeout_s=0.05)
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await memory.learn(job(), FACTS) == Learned("timeout", 0)
    assert loop.time() - started < 1.0
    assert counted.seen == [("default", "timeout")]


async def test_a_failing_hook_costs_nothing() -> None:
    def broken(tenant: str, outcome: str) -> None:
        raise RuntimeError("metrics down")

    memory = MemoryWriter(MemoryStore(), on_write=broken)
    assert (await memory.learn(job(), FACTS)).outcome == "written"
