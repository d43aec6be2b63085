"""The compaction shell over the embedded store: lock, archive first, summarize, fenced save."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.adapters.memory.store import MemoryStore
from proxy.compaction.compactor import Compactor
from proxy.compaction.job import CompactionJob, CompactionOutcome, client_covers
from proxy.compaction.plan import SUMMARY_PREFIX
from proxy.compaction.policy import CompactSettings
from proxy.compaction.stored import json_chars, run
from proxy.content import body_with_messages
from proxy.errors import StoreUnavailable
from proxy.ports import Completion
from proxy.types import JSON, Draft, Message, SessionState, StageReport, StoredCompaction
from tests.factories import (
    assistant,
    compaction_job,
    draft,
    exchange,
    matched_turn,
    system,
    user,
)

SYSTEM = system("You are a helpful agent.")
SETTINGS = CompactSettings(keep_recent=4, timeout_s=5.0)


class ScriptedSummarizer:
    """A Summarizer port that records every body and answers with a script."""

    def __init__(self, answer: str = "<analysis>a</analysis><summary>S</summary>") -> None:
        self.answer = answer
        self.bodies: list[JSON] = []
        self.keys: list[str | None] = []
        self.gate: asyncio.Event | None = None
        self.delay = 0.0
        self.started = asyncio.Event()
        self.usage: JSON | None = None

    async def complete(self, body: JSON, *, api_key: str | None) -> Completion:
        self.bodies.append(body)
        self.keys.append(api_key)
        self.started.set()
        if self.gate is not None:
            await self.gate.wait()
        await asyncio.sleep(self.delay)
        return Completion(self.answer, self.usage)


class FailingArchive(MemoryStore):
    async def archive(self, tenant: str, session: str, messages_json: bytes) -> str:
        raise StoreUnavailable("archive down")


def conversation(turns: int, start: int = 0) -> list[Message]:
    out: list[Message] = []
    for i in range(start, start + turns):
        out += [user(f"question {i}"), *exchange(f"c{i}", f"result {i}"), assistant(f"answer {i}")]
    return out


def prefix_body(messages: Sequence[Message]) -> JSON:
    return body_with_messages({"model": "gpt-4o", "tools": [{"type": "function"}]},
                              [SYSTEM, *messages])  # fmt: skip


async def request(compactor: Compactor, store: MemoryStore, history: list[Message]) -> Any:
    """What the engine does: load state, apply the stored compaction, compact."""
    state = await store.load("default", "s1")
    incoming = draft([SYSTEM, *history])
    current = matched_turn(incoming, state)
    working, _ = run(incoming, current, settings=SETTINGS)
    job = compaction_job(
        incoming, settings=SETTINGS, working=working.messages, prefix_body_for=prefix_body,
        api_key="sk-client", applied=current.applied,
    )  # fmt: skip
    return await compactor.run(job)


def apply_stored(client: Draft, state: SessionState) -> tuple[Draft, StageReport]:
    """The compact stage on `client`, the stored compaction matched as the engine matches it."""
    return run(client, matched_turn(client, state), settings=SETTINGS)


def make(store: MemoryStore | None = None, **kw: Any) -> tuple[Compactor, MemoryStore, Any]:
    store = store or MemoryStore()
    summarizer = kw.pop("summarizer", ScriptedSummarizer())
    compactor = Compactor(store=store, summarizers={"openai": summarizer}, **kw)
    return compactor, store, summarizer


async def stored(store: MemoryStore) -> list[Any]:
    detail = await store.session_detail("default", "s1")
    return list(detail["compactions"]) if detail else []


async def test_planted_facts_reach_the_summarizer_and_the_archive_holds_everything(
    tmp_path: Path,
) -> None:
    store = MemoryStore(archive_dir_for=lambda tenant: tmp_path)
    compactor, store, summarizer = make(store)
    history = [user("I'm Ada Lovelace; deploy key ID is K-7731, path /srv/app."), *conversation(3)]
    snapshot = copy.deepcopy(history)
    outcome = await request(compactor, store, history)
    assert outcome.status == "done", outcome.reason
    assert history == snapshot
    body = summarizer.bodies[0]
    assert body["messages"][0] == SYSTEM and body["messages"][1] == history[0]
    assert "K-7731" in orjson.dumps(body["messages"]).decode()
    assert body["tool_choice"] == "none" and summarizer.keys == ["sk-client"]
    assert outcome.messages == (history[0], user(SUMMARY_PREFIX + "S"), *history[-4:])
    line = orjson.loads((tmp_path / "raw.jsonl").read_bytes().splitlines()[0])
    assert line["messages"] == [SYSTEM, *history]


async def test_a_later_full_history_maps_onto_summary_and_newer_messages() -> None:
    compactor, store, _ = make()
    history = conversation(4)
    first = await request(compactor, store, history)
    later = history + conversation(1, start=9)
    state = await store.load("default", "s1")
    out, report = apply_stored(draft([SYSTEM, *later]), state)
    assert report.counters["applied"] == 1
    assert out.messages == (*first.compaction.replacement, *later[first.compaction.covers :])
    assert out.messages[0] == history[0]  # the task, kept before the summary
    assert out.messages[1]["content"].startswith(SUMMARY_PREFIX)


async def test_a_second_compaction_folds_the_first() -> None:
    compactor, store, summarizer = make()
    history = [user("budget is 4200 EUR"), *conversation(3)]
    first = await request(compactor, store, history)
    summarizer.answer = "<summary>S2</summary>"
    longer = history + conversation(3, start=5)
    second = await request(compactor, store, longer)
    assert second.status == "done" and second.compaction.covers > first.compaction.covers
    assert summarizer.bodies[1]["messages"][1:3] == [history[0], user(SUMMARY_PREFIX + "S")]
    state = await store.load("default", "s1")
    out, _ = apply_stored(draft([SYSTEM, *longer, user("next")]), state)
    assert out.messages[:2] == (history[0], user(SUMMARY_PREFIX + "S2"))
    assert out.messages[2:] == (*longer[second.compaction.covers :], user("next"))


async def test_an_edited_history_does_not_pick_up_the_summary() -> None:
    compactor, store, _ = make()
    history = conversation(3)
    await request(compactor, store, history)
    edited = [user("a different start"), *history[1:]]
    state = await store.load("default", "s1")
    out, report = apply_stored(draft([SYSTEM, *edited]), state)
    assert report.counters["applied"] == 0 and out.messages == tuple(edited)


async def test_a_failing_archive_prevents_compaction() -> None:
    compactor, store, summarizer = make(FailingArchive())
    history = conversation(3)
    outcome = await request(compactor, store, history)
    assert (outcome.status, outcome.reason) == ("failed", "archive")
    assert outcome.messages == tuple(history)
    assert summarizer.bodies == [] and await stored(store) == []


@pytest.mark.parametrize(
    ("answer", "delay", "reason"),
    [("<summary>S</summary>", 10.0, "timeout"), ("", 0.0, "empty_summary")],
)
async def test_a_slow_or_empty_summarizer_leaves_nothing_stored(
    answer: str, delay: float, reason: str
) -> None:
    summarizer = ScriptedSummarizer(answer)
    summarizer.delay = delay
    compactor, store, _ = make(summarizer=summarizer)
    settings = CompactSettings(timeout_s=0.05)
    history = conversation(3)
    job = compaction_job(draft([SYSTEM, *history]), settings=settings, prefix_body_for=prefix_body)
    outcome = await compactor.run(job)
    assert (outcome.status, outcome.reason) == ("failed", reason)
    assert await stored(store) == []
    assert await store.acquire_lock("default", "s1", ttl_ms=1000) is not None  # released


async def test_a_raising_summarizer_leaves_nothing_stored() -> None:
    class Broken(ScriptedSummarizer):
        async def complete(self, body: JSON, *, api_key: str | None) -> Completion:
            raise ConnectionError("upstream down")

    compactor, store, _ = make(summarizer=Broken())
    outcome = await request(compactor, store, conversation(3))
    assert (outcome.status, outcome.reason) == ("failed", "summarizer")
    assert await stored(store) == []


async def test_the_lock_lets_only_one_of_two_concurrent_compactions_summarize() -> None:
    compactor, store, summarizer = make()
    summarizer.gate = asyncio.Event()
    history = conversation(3)
    first = asyncio.create_task(request(compactor, store, history))
    await summarizer.started.wait()  # the first holds the lock, inside the summarizer call
    second = await request(compactor, store, history)
    summarizer.gate.set()
    assert (second.status, second.reason) == ("skipped", "locked")
    assert (await first).status == "done" and len(summarizer.bodies) == 1


async def test_a_stale_lock_holders_save_is_refused() -> None:
    now = [1000.0]
    store = MemoryStore(clock=lambda: now[0])

    class Stalling(ScriptedSummarizer):
        async def complete(self, body: JSON, *, api_key: str | None) -> Completion:
            now[0] += 5  # the lock (1 s) expires while we wait; another replica takes it
            assert await store.acquire_lock("default", "s1", ttl_ms=60_000) is not None
            return Completion("<summary>late</summary>")

    compactor, store, _ = make(store, summarizer=Stalling(), lock_ttl_ms=1000)
    outcome = await request(compactor, store, conversation(3))
    assert (outcome.status, outcome.reason) == ("failed", "lock_lost")
    assert await stored(store) == []


async def test_nothing_to_summarize_skips_without_touching_the_store() -> None:
    compactor, store, summarizer = make()
    outcome = await request(compactor, store, [user("hi"), assistant("hello")])
    assert (outcome.status, outcome.reason) == ("skipped", "nothing_to_summarize")
    assert summarizer.bodies == [] and await store.session_detail("default", "s1") is None


def job_for(history: list[Message], **kw: Any) -> CompactionJob:
    incoming = draft([SYSTEM, *history])
    return compaction_job(incoming, settings=SETTINGS, prefix_body_for=prefix_body, **kw)


async def test_a_done_compaction_reports_what_it_saved_and_what_it_folded_in() -> None:
    compactor, _, _ = make()
    history = conversation(3)
    outcome = await compactor.run(job_for(history))
    assert outcome.status == "done"
    assert outcome.folded_chars == json_chars(history[1:-4])  # the task stays: not folded
    summary = [history[0], user(SUMMARY_PREFIX + "S")]
    assert outcome.saved_chars == json_chars(history[:-4]) - json_chars(summary)


async def test_an_outcome_carries_the_summarizers_usage_whether_or_not_it_summarized() -> None:
    compactor, _, summarizer = make()
    summarizer.usage = {"prompt_tokens": 120, "completion_tokens": 9, "total_tokens": 129}
    outcome = await compactor.run(job_for(conversation(3)))
    assert (outcome.status, outcome.usage) == ("done", summarizer.usage)
    summarizer.answer = ""
    outcome = await make(summarizer=summarizer)[0].run(job_for(conversation(3)))
    assert (outcome.reason, outcome.usage) == ("empty_summary", summarizer.usage)
    summarizer.usage = None
    assert (await make(summarizer=summarizer)[0].run(job_for(conversation(3)))).usage is None


async def test_a_compaction_that_cannot_save_five_percent_is_skipped_unless_forced() -> None:
    folded = [user("u" * 800), assistant("a" * 400)]  # about 45% of the request
    history = [*folded, user("x" * 600), assistant("y" * 600), user("z" * 200), assistant("ok")]
    assert (await make()[0].run(job_for(history))).status == "done"
    compactor, store, summarizer = make()
    outcome = await compactor.run(job_for(history, efficiency=0.1))  # summaries saved little
    assert (outcome.status, outcome.reason) == ("skipped", "low_savings")
    assert summarizer.bodies == [] and await store.session_detail("default", "s1") is None
    assert outcome.messages == tuple(history)
    forced = await compactor.run(job_for(history, efficiency=0.1, forced=True))
    assert forced.status == "done" and len(summarizer.bodies) == 1
    small = [user("hi"), assistant("hello"), *history[2:]]  # under 5% even at best
    skipped = await make()[0].run(job_for(small))
    assert (skipped.status, skipped.reason) == ("skipped", "low_savings")


async def test_preserved_tool_results_come_from_the_unpruned_client_history() -> None:
    settings = CompactSettings(keep_recent=2, preserve_tools=("skill",))
    compactor, _, _ = make()
    history = [user("load"), *exchange("k1", "FULL SKILL TEXT", name="skill"), *conversation(1)]
    pruned = [*history[:2], {**history[2], "content": "FULL...(truncated)"}, *history[3:]]
    job = compaction_job(
        draft([SYSTEM, *history]), settings=settings, working=pruned, prefix_body_for=prefix_body
    )
    outcome = await compactor.run(job)
    assert outcome.status == "done"
    assert outcome.messages[:2] == (history[0], user(SUMMARY_PREFIX + "S"))
    assert outcome.messages[2]["role"] == "user"
    assert outcome.messages[2]["content"].endswith("FULL SKILL TEXT")


def test_client_covers_maps_the_working_split_to_the_client_history() -> None:
    applied = StoredCompaction("h", covers=10, replacement=(user("s"), user("p")))
    assert client_covers(5, applied=None, working_len=9, client_len=9) == 5
    assert client_covers(5, applied=applied, working_len=8, client_len=16) == 13
    assert client_covers(2, applied=applied, working_len=8, client_len=16) is None
    assert client_covers(5, applied=applied, working_len=9, client_len=16) is None


async def test_background_compaction_stores_the_summary_for_the_next_request() -> None:
    compactor, store, summarizer = make()
    history = conversation(3)
    job = compaction_job(draft([SYSTEM, *history]), settings=SETTINGS, prefix_body_for=prefix_body)
    done: list[CompactionOutcome] = []
    finished = asyncio.Event()

    async def on_done(copied: CompactionJob, outcome: CompactionOutcome) -> None:
        assert copied == job and copied.working is not job.working  # the deep copy
        done.append(outcome)
        finished.set()

    assert compactor.start_background(job, on_done=on_done)
    assert not compactor.start_background(job)  # at most one per session
    await finished.wait()
    assert [o.status for o in done] == ["done"] and len(summarizer.bodies) == 1
    state = await store.load("default", "s1")
    out, report = apply_stored(draft([SYSTEM, *history, user("more")]), state)
    assert report.counters["applied"] == 1 and out.messages[1] == user(SUMMARY_PREFIX + "S")
    await compactor.aclose()


async def test_a_cancelled_background_compaction_stores_nothing_and_releases_the_lock() -> None:
    compactor, store, summarizer = make()
    summarizer.gate = asyncio.Event()
    history = conversation(3)
    job = compaction_job(draft([SYSTEM, *history]), settings=SETTINGS, prefix_body_for=prefix_body)
    assert compactor.start_background(job)
    await summarizer.started.wait()
    await compactor.aclose()
    assert not compactor.running("default", "s1")
    assert await stored(store) == []
    assert await store.acquire_lock("default", "s1", ttl_ms=1000) is not None


async def test_a_long_task_is_kept_head_and_tail_and_the_summary_names_its_turns() -> None:
    settings = CompactSettings(
        keep_recent=4, timeout_s=5.0, keep_first_user_max_chars=1_000, recall_tool="ctx_recall"
    )
    task = user("TASK: " + "rule. " * 2_000 + "Finish with `submit`.")
    history = [task, *conversation(3)]
    job = compaction_job(
        draft([SYSTEM, *history]), settings=settings, prefix_body_for=prefix_body, forced=True
    )  # forced: the task's cut middle does not count as folded, so little else would be
    outcome = await make()[0].run(job)
    assert outcome.status == "done" and outcome.compaction is not None
    kept, summary = outcome.messages[0]["content"], outcome.messages[1]["content"]
    assert len(kept) <= 1_000 and kept.startswith("TASK: ")
    assert kept.endswith("Finish with `submit`.")
    assert 'chars cut here; full text: ctx_recall(ref="turns:0-0")]' in kept
    last = outcome.compaction.covers - 1
    assert summary == (
        f"{SUMMARY_PREFIX}S\n[Messages 0-{last} are summarized above; "
        f'full text: ctx_recall(ref="turns:0-{last}")]'
    )


async def test_without_keep_first_user_the_summary_comes_first() -> None:
    settings = CompactSettings(keep_recent=4, timeout_s=5.0, keep_first_user=False)
    history = [user("the task"), *conversation(3)]
    job = compaction_job(draft([SYSTEM, *history]), settings=settings, prefix_body_for=prefix_body)
    outcome = await make()[0].run(job)
    assert outcome.messages == (user(SUMMARY_PREFIX + "S"), *history[-4:])
