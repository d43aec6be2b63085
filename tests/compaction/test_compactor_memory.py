"""A compaction that asks for facts: one summarizer call answers both; the facts are kept beside
the summary whatever becomes of it, and never fail, delay or undo it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from proxy.adapters.memory.store import MemoryStore
from proxy.compaction.compactor import Compactor
from proxy.compaction.plan import SUMMARY_PREFIX
from proxy.compaction.policy import CompactSettings
from proxy.compaction.writeback import MemoryWriter
from proxy.memory.block import MEMORY_INSTRUCTION
from proxy.memory.ledger import MemorySettings
from proxy.ports import Completion
from proxy.types import JSON
from tests.compaction.test_compactor import SYSTEM, ScriptedSummarizer, conversation, prefix_body
from tests.factories import compaction_job, draft, user

SETTINGS = CompactSettings(keep_recent=4, timeout_s=5.0)
ANSWER = "<analysis>a</analysis><summary>S</summary>\n<memory>\n- Likes tea.\n</memory>"


def make(
    answer: str = ANSWER, *, store: MemoryStore | None = None, **kw: Any
) -> tuple[Compactor, MemoryStore, ScriptedSummarizer]:
    store = store or MemoryStore()
    summarizer = kw.pop("summarizer", None) or ScriptedSummarizer(answer)
    memory = MemoryWriter(store, **kw)
    compactor = Compactor(store=store, summarizers={"openai": summarizer}, memory=memory)
    return compactor, store, summarizer


TENANT_SCOPE = MemorySettings()


def job(memory: MemorySettings | None = TENANT_SCOPE) -> Any:
    history = draft([SYSTEM, *conversation(3)])
    return compaction_job(history, settings=SETTINGS, prefix_body_for=prefix_body, memory=memory)


async def test_one_call_gives_the_summary_and_the_facts() -> None:
    compactor, store, summarizer = make()
    outcome = await compactor.run(job())
    assert (outcome.status, outcome.memory, outcome.facts_added) == ("done", "written", 1)
    assert outcome.messages[1] == user(SUMMARY_PREFIX + "S")  # no facts in the summary
    assert len(summarizer.bodies) == 1
    assert summarizer.bodies[0]["messages"][-1]["content"].endswith(MEMORY_INSTRUCTION)
    assert (await store.read_facts("default", None))[0].endswith(": Likes tea.")


async def test_without_memory_the_summarizer_is_not_asked_for_facts() -> None:
    compactor, store, summarizer = make()
    outcome = await compactor.run(job(memory=None))
    assert (outcome.status, outcome.memory) == ("done", "")
    assert "<memory>" not in summarizer.bodies[0]["messages"][-1]["content"]
    assert await store.read_facts("default", None) == ()


async def test_facts_are_kept_even_when_the_summary_is_unusable() -> None:
    compactor, store, _ = make("<memory>\n- Likes tea.\n</memory>")
    outcome = await compactor.run(job())
    assert (outcome.status, outcome.reason) == ("failed", "empty_summary")
    assert (outcome.memory, outcome.facts_added) == ("written", 1)
    assert len(await store.read_facts("default", None)) == 1


async def test_a_failing_summarizer_answers_no_facts() -> None:
    class Broken(ScriptedSummarizer):
        async def complete(self, body: JSON, *, api_key: str | None) -> Completion:
            raise ConnectionError("down")

    compactor, _, _ = make(summarizer=Broken())
    outcome = await compactor.run(job())
    assert (outcome.status, outcome.reason, outcome.memory) == ("failed", "summarizer", "no_answer")


class StuckFacts(MemoryStore):
    async def add_facts(
        self, tenant: str, owner: str | None, lines: Sequence[str], *, max_lines: int
    ) -> int:
        await asyncio.sleep(60)
        return 0


async def test_a_stuck_fact_store_neither_fails_nor_holds_up_the_compaction() -> None:
    compactor, store, _ = make(store=StuckFacts(), timeout_s=0.05)
    loop = asyncio.get_running_loop()
    started = loop.time()
    outcome = await compactor.run(job())
    assert loop.time() - started < 1.0
    assert (outcome.status, outcome.memory) == ("done", "timeout")
    state = await store.load("default", "s1")
    assert len(state.compactions) == 1  # the summary was stored all the same


@pytest.mark.parametrize("scope", ["tenant", "session"])
async def test_the_facts_go_where_the_scope_says(scope: str) -> None:
    compactor, store, _ = make()
    await compactor.run(job(MemorySettings(scope=scope)))  # type: ignore[arg-type]
    owner = None if scope == "tenant" else "s1"
    assert len(await store.read_facts("default", owner)) == 1
    assert await store.read_facts("default", "s1" if owner is None else None) == ()
