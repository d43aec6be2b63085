"""Sessions whose prewarm would warm nothing the next request reads, or warm it for someone
else: skipped and counted (`ctxproxy_prewarms_total{outcome="skipped"}`, the event's reason)."""

from __future__ import annotations

from typing import Any

from proxy.server.appkeys import STORE
from tests.e2e.agent import Agent, background_compactions_done, settled
from tests.e2e.conftest import MakeAnthropicProxy
from tests.e2e.test_prewarm_through_proxy import (
    ASYNC,
    MODEL,
    PREWARM,
    READ,
    SUMMARY,
    WORDS,
    WRITTEN,
    _usage,
    prewarms_done,
    scrape,
)
from tests.fakes.anthropic_upstream import ErrorReply, Reply, text, tool_use
from tests.server.messages_support import (
    UPSTREAM_KEY,
    MakeMessagesProxy,
    MessagesAgent,
    MessagesProxy,
    make_messages_proxy,
)

__all__ = ["make_messages_proxy"]  # the fixture, imported for pytest

THINKING = {"type": "enabled", "budget_tokens": 1024}


def answered(fake: Any) -> None:
    """The fake answers a one-token request as the prewarm it is, others with growing usage
    (the third passes the soft threshold: the fourth request starts the background summary)."""
    fake.summary_text = SUMMARY
    usage = iter((400, 700, 1200, 1300, 1400, 1500, 1600))

    def answer(body: dict[str, Any]) -> Reply | ErrorReply:
        if body.get("max_tokens") == 1:
            return text("A", usage=WRITTEN)
        return tool_use(("toolu_1", "read", {"path": "a.py"}), lead="ok " + WORDS,
                        usage=_usage(next(usage)))  # fmt: skip

    fake.respond = answer


async def messages_session(proxy: MessagesProxy, client: Any, **extra: Any) -> None:
    """Five Messages turns of a tool-using agent, waiting for each background job."""
    answered(proxy.fake)
    agent = MessagesAgent(client, proxy.app)
    agent.add({"role": "user", "content": "start " + WORDS})
    for number in range(5):
        await agent.turn(tools=[READ], **extra)
        await background_compactions_done(proxy.app)
        await prewarms_done(proxy.app)
        await settled(proxy.app)
        call = agent.history[-1]["content"][-1]
        result = {"type": "tool_result", "tool_use_id": call["id"], "content": "x = 1\n" * 30}
        agent.add({"role": "user", "content": [result, {"type": "text", "text": f"q{number}"}]})


async def skipped_for(proxy: Any) -> list[str]:
    """The reasons of the session's skipped prewarms, as the events tell them."""
    events = await proxy.app[STORE].read_events("0-0", block_ms=0, count=1000)
    return [e["reason"] for _, e in events if e["kind"] == "prewarm" and e["outcome"] == "skipped"]


def one_token_requests(proxy: Any) -> list[Any]:
    return [r for r in proxy.fake.received if r.body.get("max_tokens") == 1]


async def test_a_messages_session_that_thinks_gets_no_prewarm(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    """One token is below any thinking budget (the API refuses it), and a prewarm without
    the session's `thinking` would warm a prefix its requests do not read."""
    proxy = await make_messages_proxy(tenant_extra=ASYNC + PREWARM)
    async with proxy.client(default_headers={"X-Claude-Code-Session-Id": "t"}) as client:
        await messages_session(proxy, client, thinking=THINKING, max_tokens=2048)
    assert len(proxy.fake.summary_requests) == 1
    assert one_token_requests(proxy) == []
    assert await skipped_for(proxy) == ["thinking"]
    assert 'ctxproxy_prewarms_total{outcome="skipped",tenant="default"} 1.0' in await scrape(proxy)


async def test_a_chat_session_asking_reasoning_of_an_anthropic_upstream_gets_no_prewarm(
    make_anthropic_proxy: MakeAnthropicProxy,
) -> None:
    """`reasoning_effort` becomes `thinking` in the Anthropic translation."""
    proxy = await make_anthropic_proxy(tenant_extra=ASYNC + PREWARM)
    answered(proxy.fake)
    agent = Agent(proxy.client(default_headers={"X-Ctx-Session": "r"}), proxy.app, model=MODEL)
    for number in range(5):
        agent.add({"role": "user", "content": f"question {number}: " + WORDS})
        await agent.turn(reasoning_effort="low")
        await background_compactions_done(proxy.app)
        await prewarms_done(proxy.app)
        await settled(proxy.app)
        agent.history[-1].pop("tool_calls", None)
    assert len(proxy.fake.summary_requests) == 1
    assert one_token_requests(proxy) == []
    assert await skipped_for(proxy) == ["thinking"]


async def test_a_messages_session_sent_with_the_clients_bearer_gets_no_prewarm(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    """The session's requests go with the client's OAuth token, which the background task
    does not hold: a prewarm with the upstream's own key would warm another organisation's
    cache. (Here both are the one key the fake accepts, so only the skip tells them apart.)"""
    proxy = await make_messages_proxy(tenant_extra=ASYNC + PREWARM, forward_client_key=True)
    headers = {"X-Claude-Code-Session-Id": "b"}
    async with proxy.client(api_key=None, auth_token=UPSTREAM_KEY,
                            default_headers=headers) as client:  # fmt: skip
        await messages_session(proxy, client)
    real = [r for r in proxy.fake.received if r not in proxy.fake.summary_requests]
    assert real[0].headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert len(proxy.fake.summary_requests) == 1
    assert one_token_requests(proxy) == []
    assert await skipped_for(proxy) == ["credential"]
