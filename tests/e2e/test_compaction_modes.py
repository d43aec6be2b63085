"""Compaction through the proxy when things are not simple: async mode, a failing summarizer, an
upstream that rejects the prompt as too long. Same scripted session as test_compaction_session."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from aiohttp import ClientSession

from proxy.server.appkeys import STORE
from tests.e2e.agent import Agent, assert_all_valid, background_compactions_done
from tests.e2e.session import COMPACT, FACTS, SESSION, run_session, summary, user
from tests.fakes.openai_upstream import Reply
from tests.server.conftest import MakeProxy

SMALL = (100, 120, 140, 160, 180, 200, 220)
OVERFLOW = {
    "message": "This model's maximum context length is 128000 tokens.",
    "type": "invalid_request_error",
    "param": "messages",
    "code": "context_length_exceeded",
}


async def test_async_mode_summary_is_made_in_the_background_and_picked_up_later(
    make_proxy: MakeProxy, store: dict[str, str]
) -> None:
    proxy = await make_proxy(tenant_extra=COMPACT + 'mode = "async"\nsoft_ratio = 0.5\n', **store)
    tokens = (100, 200, 300, 1400, 500, 600)  # the 5th request starts the summary (1,400 ≥ 1,000)
    agent = await run_session(proxy, tokens=tokens, turns=5)
    await background_compactions_done(proxy.app)
    assert len(proxy.fake.summary_requests) == 1
    await run_session(proxy, tokens=tokens, turns=6, agent=agent)
    sent = proxy.fake.chat[-1].body["messages"]
    assert sent[1:3] == [user(FACTS), summary("SUMMARY OF EARLIER TURNS", covers=5)]
    assert [_shape(m) for m in sent[3:]] == [_shape(m) for m in agent.history[5:-1]]
    assert {agent.header("X-Ctx-Compacted", i) for i in range(6)} == {"0"}
    state = await proxy.app[STORE].load("default", SESSION)
    assert state.int_field("compactions") == 1, "a background compaction counts too"
    events = await proxy.app[STORE].read_events("0-0", block_ms=0, count=1000)
    background = [e for _, e in events if e.get("background") == "1"]
    assert [(e["kind"], e["outcome"]) for e in background] == [("compaction", "done")]
    assert_all_valid(r.body for r in proxy.fake.received)


async def test_failing_summarizer_leaves_the_request_uncompacted_and_successful(
    make_proxy: MakeProxy,
) -> None:
    proxy = await make_proxy(tenant_extra=COMPACT)
    proxy.fake.summary_status = 500
    agent = await run_session(proxy)
    sent = proxy.fake.chat[-1].body["messages"]
    assert len(proxy.fake.summary_requests) == 1
    assert len(sent) == 1 + len(agent.history) - 1
    assert sent[1] == user(agent.history[0]["content"])
    assert agent.header("X-Ctx-Compacted") == "0"
    assert agent.history[-1]["content"] == "ok"


async def test_context_length_error_compacts_and_retries_once(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(tenant_extra=COMPACT)
    agent = await run_session(proxy, tokens=SMALL, turns=6)
    agent.add(user("One more thing."))
    proxy.fake.script.extend([Reply(status=400, error=OVERFLOW), Reply(content="retried")])
    before = len(proxy.fake.chat)
    await agent.turn()
    assert len(proxy.fake.chat) - before == 2
    assert len(proxy.fake.summary_requests) == 1
    retried = proxy.fake.chat[-1].body["messages"]
    assert retried[1] == user(FACTS)
    assert retried[2]["content"].startswith("[Conversation summary]\n")
    assert agent.history[-1]["content"] == "retried"
    assert agent.header("X-Ctx-Compacted") == "1"
    assert_all_valid(r.body for r in proxy.fake.received)


async def test_context_length_error_twice_reaches_the_client_after_one_retry(
    make_proxy: MakeProxy,
) -> None:
    proxy = await make_proxy(tenant_extra=COMPACT)
    agent = await run_session(proxy, tokens=SMALL, turns=6)
    agent.add(user("One more thing."))
    proxy.fake.script.extend([Reply(status=400, error=OVERFLOW)] * 3)
    before = len(proxy.fake.chat)
    with pytest.raises(openai.BadRequestError) as caught:
        await agent.turn()
    assert caught.value.code == "context_length_exceeded"
    assert len(proxy.fake.chat) - before == 2
    assert len(proxy.fake.summary_requests) <= 1


def _shape(message: dict[str, Any]) -> tuple[str, str]:
    """Role and call id: what identifies a message when pruning may have cut its content."""
    calls = ",".join(c["id"] for c in message.get("tool_calls") or ())
    return message["role"], message.get("tool_call_id") or calls


LONG_PROMPT = "You are a code agent. Follow these rules.\n" + "Rule: think, then act.\n" * 300
"""About 7 KB: with a threshold of 1,000 tokens the system prompt alone stays above it."""
SMOL = "[tenants.default.compact]\nthreshold_tokens = 1000\nkeep_recent = 4\n"


async def test_a_system_prompt_above_the_threshold_does_not_summarize_every_request(
    make_proxy: MakeProxy,
) -> None:
    proxy = await make_proxy(workspace=False, tenant_extra=SMOL)
    fake = proxy.fake
    fake.summary_text = "<summary>" + "The agent read data.csv row by row. " * 70 + "</summary>"
    agent = Agent(proxy.client(default_headers={"X-Ctx-Session": "smol"}), proxy.app,
                  system=LONG_PROMPT)  # fmt: skip
    agent.add(user("Find the row with the largest amount in data.csv."))
    for step in range(12):  # observation after observation, as smolagents' code agent sends them
        await agent.turn()
        agent.add(user(f"Observation {step}: " + "row,amount\n" * 20))
    assert len(fake.summary_requests) == 1, "not one summary per request (10 of 12 before)"
    async with ClientSession() as http, http.get(proxy.server.make_url("/metrics")) as response:
        metrics = await response.text()
    assert 'reason="low_savings"' in metrics, "each skipped compaction is counted"
    assert_all_valid(r.body for r in fake.received)
