"""A scripted agent session: the openai SDK → ctxproxy → the fake OpenAI upstream, whose reported
`prompt_tokens` grow turn by turn until the tenant's compaction threshold (2,000) is passed."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import redis.asyncio as redis

from tests.e2e.agent import Agent, assert_all_valid, text_of, tool_call
from tests.e2e.session import (
    COMPACT,
    FACTS,
    LISTING,
    SESSION,
    answer,
    result,
    run_session,
    summary,
    user,
)
from tests.server.conftest import MakeProxy
from tests.server.harness import Proxy

CUT_MARKER = '...(truncated, original: 755 chars; full text: ctx_recall(ref="c1"))'
"""The pruning marker of the listing (c1): recall is on, so it names the call to read it back."""


@pytest.fixture
async def session_proxy(make_proxy: MakeProxy, store: dict[str, str]) -> Proxy:
    return await make_proxy(tenant_extra=COMPACT, **store)


async def archived(proxy: Proxy) -> list[list[dict[str, Any]]]:
    """Every archived history of the session, oldest first, from the configured store."""
    store = proxy.settings.store
    if store.url.startswith("memory://"):
        lines = (proxy.workspace / "sessions" / "raw.jsonl").read_bytes().splitlines()
        return [orjson.loads(line)["messages"] for line in lines]
    client = redis.from_url(store.url)
    try:
        entries = await client.xrange(f"{store.key_prefix}{{default:{SESSION}}}:raw")
    finally:
        await client.aclose()
    return [orjson.loads(fields[b"messages"]) for _, fields in entries]


async def test_compaction_replaces_the_old_turns_by_a_summary_and_archives_them(
    session_proxy: Proxy,
) -> None:
    agent = await run_session(session_proxy)
    fake = session_proxy.fake
    sent = fake.chat[-1].body["messages"]
    kept = agent.history[9:-1]  # the parallel calls, their results, the answer, the new question
    assert sent[0]["role"] == "system" and agent.system in sent[0]["content"]
    assert sent[1] == user(FACTS), "the task stays before the summary"
    assert sent[2] == summary("SUMMARY OF EARLIER TURNS", covers=9)
    assert sent[3:] == kept, "the split moved so the calls keep their results"
    assert [agent.header("X-Ctx-Compacted", i) for i in range(7)] == ["0"] * 6 + ["1"]
    assert await archived(session_proxy) == [agent.messages[:-1]]
    summarizer_text = "\n".join(text_of(m) for m in fake.summary_requests[0].body["messages"])
    assert "BLUEFIN" in summarizer_text and "8421" in summarizer_text
    assert_all_valid(r.body for r in fake.received)


async def test_later_requests_with_the_full_history_are_mapped_onto_the_summary(
    session_proxy: Proxy,
) -> None:
    agent = await run_session(session_proxy)
    fake = session_proxy.fake
    for question in ("And then?", "Anything else?"):
        agent.add({"role": "user", "content": question})
        fake.script.append(answer(prompt_tokens=1000))
        await agent.turn()
        sent = fake.chat[-1].body["messages"]
        assert sent[1] == user(FACTS)
        assert sent[2]["content"].startswith("[Conversation summary]\n")
        assert sent[3:] == agent.history[9:-1]
        assert agent.header("X-Ctx-Compacted") == "0"
    assert len(fake.summary_requests) == 1
    assert_all_valid(r.body for r in fake.received)


async def test_old_tool_result_arrives_pruned_and_the_cut_is_replayed_byte_identically(
    make_proxy: MakeProxy,
) -> None:
    proxy = await make_proxy(tenant_extra=COMPACT)
    await run_session(proxy)
    cut = LISTING[:200] + CUT_MARKER
    fourth, fifth = (proxy.fake.chat[i].body["messages"] for i in (3, 4))
    assert _content(fourth, "c1") == cut and _content(fourth, "c2") == "x" * 280
    assert _content(fifth, "c1") == cut
    assert orjson.dumps(_message(fourth, "c1")) == orjson.dumps(_message(fifth, "c1"))


async def test_pruned_characters_are_reported_in_a_response_header(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(tenant_extra=COMPACT)
    agent = await run_session(proxy)
    cut = LISTING[:200] + CUT_MARKER
    assert agent.header("X-Ctx-Pruned-Chars", 2) == "0"
    assert agent.header("X-Ctx-Pruned-Chars", 3) == str(755 - len(cut))


def _message(messages: list[dict[str, Any]], call_id: str) -> dict[str, Any]:
    return next(m for m in messages if m.get("tool_call_id") == call_id)


def _content(messages: list[dict[str, Any]], call_id: str) -> Any:
    return _message(messages, call_id)["content"]


async def test_second_compaction_folds_the_first_summary_in(session_proxy: Proxy) -> None:
    agent = await run_session(session_proxy)
    fake = session_proxy.fake
    fake.summary_text = "<analysis>a</analysis><summary>SECOND SUMMARY</summary>"
    for question, tokens in (("And then?", 2500), ("Anything else?", 800), ("Bye.", 800)):
        agent.add(user(question))
        fake.script.append(answer(prompt_tokens=tokens))
        await agent.turn()
    second, later = (r.body["messages"] for r in fake.chat[-2:])
    assert "SUMMARY OF EARLIER TURNS" in text_of(fake.summary_requests[1].body["messages"][2])
    for sent, end in ((second, -3), (later, -1)):
        assert sent[1:3] == [user(FACTS), summary("SECOND SUMMARY", covers=14)]
        assert sent[3:] == agent.history[14:end]
    assert [agent.header("X-Ctx-Compacted", i) for i in (-3, -2, -1)] == ["0", "1", "0"]
    assert [len(history) for history in await archived(session_proxy)] == [15, 19]
    assert_all_valid(r.body for r in fake.received)


TASK = "Refactor the billing module; keep every public name. " + "Details follow. " * 244
"""A long first user message (about 4,000 characters): its own prompt passes the threshold."""
LOW_THRESHOLD = (
    "[tenants.default.compact]\nthreshold_tokens = 500\nkeep_recent = 4\n"
    "keep_first_user = false\n"  # the task alone is summarized here: it must not be kept
)


async def test_rerunning_a_task_sends_the_task_itself_not_its_stored_summary(
    make_proxy: MakeProxy,
) -> None:
    proxy = await make_proxy(workspace=False, tenant_extra=LOW_THRESHOLD)
    first = Agent(proxy.client(), proxy.app)  # no session header: derived from system and task
    first.add(user(TASK))
    for step in ("c1", "c2", "c3"):  # a tool loop; the third request summarizes the task alone
        proxy.fake.script.append(answer(tool_call(step, cmd="step"), prompt_tokens=1200))
        await first.turn()
        if step != "c3":
            first.add(result(step, "done"))
    assert len(proxy.fake.summary_requests) == 1
    rerun = Agent(proxy.client(), proxy.app)
    rerun.add(user(TASK))
    proxy.fake.script.append(answer(tool_call("c1", cmd="again"), prompt_tokens=1200))
    await rerun.turn()
    sent = proxy.fake.chat[-1].body["messages"]
    assert sent == [{"role": "system", "content": rerun.system}, user(TASK)]
    assert rerun.header("X-Ctx-Compacted") == "0"
    assert rerun.header("X-Ctx-Session") == first.header("X-Ctx-Session")
    rerun.add(result("c1", "again done"))  # now the request goes on past the summarized task
    await rerun.turn()
    sent = proxy.fake.chat[-1].body["messages"]
    assert sent[1]["content"].startswith("[Conversation summary]\n")
    assert sent[2:] == rerun.history[1:-1], "ends with the client's own last message"
    assert_all_valid(r.body for r in proxy.fake.received)


async def test_resuming_from_an_earlier_point_is_not_compacted_for_the_size_reached_later(
    make_proxy: MakeProxy,
) -> None:
    proxy = await make_proxy(workspace=False, tenant_extra=LOW_THRESHOLD)
    first = Agent(proxy.client(), proxy.app)
    first.add(user("Count the files."))
    for step, tokens in (("c1", 100), ("c2", 200), ("c3", 300), ("c4", 5000)):
        proxy.fake.script.append(answer(tool_call(step, cmd="ls"), prompt_tokens=tokens))
        await first.turn()
        first.add(result(step, "12 files"))
    resumed = Agent(proxy.client(), proxy.app)  # a checkpoint of the same run, two steps in
    resumed.add(*first.history[:5])
    proxy.fake.script.append(answer(tool_call("c3", cmd="ls"), prompt_tokens=300))
    await resumed.turn()
    assert proxy.fake.summary_requests == [], "5,000 tokens were measured on a longer request"
    assert proxy.fake.chat[-1].body["messages"][1:] == first.history[:5]
    assert resumed.header("X-Ctx-Session") == first.header("X-Ctx-Session")
