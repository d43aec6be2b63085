"""The cache prewarm after a background compaction (`[tenants.NAME.cache] prewarm`), through the
proxy in front of the fake Anthropic Messages API, driven by the official openai SDK."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

from aiohttp import ClientSession, web

from proxy.compaction.job import CompactionOutcome
from proxy.compaction.policy import CompactSettings
from proxy.server.appkeys import STORE
from proxy.server.prewarm import PREWARMER
from proxy.types import StoredCompaction
from tests.e2e.agent import Agent, assert_all_valid, background_compactions_done, settled
from tests.e2e.conftest import AnthropicProxy, MakeAnthropicProxy
from tests.e2e.session import run_session
from tests.factories import compaction_job, draft, user
from tests.fakes.anthropic_upstream import ErrorReply, Received, Reply, text, tool_use
from tests.server.conftest import MakeProxy
from tests.server.messages_support import MakeMessagesProxy, MessagesAgent, make_messages_proxy

__all__ = ["make_messages_proxy"]  # the fixture, imported for pytest

MODEL = "claude-sonnet-4-5"
SUMMARY = "<summary>Ada runs BLUEFIN on port 8421; a.py and b.py were read.</summary>"
ASYNC = (
    '[tenants.default.compact]\nthreshold_tokens = 2000\nkeep_recent = 2\nmode = "async"\n'
    "soft_ratio = 0.5\n[tenants.default.cache]\nmin_cacheable_tokens = 0\n"
)
SYNC = "[tenants.default.compact]\nthreshold_tokens = 1000\nkeep_recent = 2\n"
PREWARM = "prewarm = true\n"
"""Appended to ASYNC's cache table."""
WORDS = "lorem ipsum dolor sit amet " * 20
WRITTEN = {"input_tokens": 10, "cache_creation_input_tokens": 900, "output_tokens": 1}
"""A prewarm's usage: it writes the prefix. At claude-sonnet-4-5's prices (config/prices.toml:
$3 input, $3.75 cache write, $15 output per million): 10 x 3 + 900 x 3.75 + 15 = $0.00342."""
PRICES = Path(__file__).resolve().parents[2] / "config" / "prices.toml"


async def prewarms_done(app: web.Application) -> None:
    """Wait for the prewarms in flight."""
    await asyncio.gather(*app[PREWARMER]._tasks.values())


async def session(
    proxy: AnthropicProxy,
    *,
    turns: int = 5,
    prewarm_reply: Reply | ErrorReply | None = None,
    wait: bool = True,
) -> Agent:
    """`turns` user turns answered with growing usage: the third's answer passes the soft
    threshold (1,000 tokens), so the fourth request starts the background summary and the
    fifth is the first to carry it. A prewarm is answered `prewarm_reply` (default: one token,
    as the API answers); `wait`: for each turn's prewarm to end."""
    proxy.fake.summary_text = SUMMARY
    usage = iter((400, 700, 1200, 1300, 1400, 1500, 1600))

    def answer(body: dict[str, Any]) -> Reply | ErrorReply:
        if body.get("max_tokens") == 1:
            return prewarm_reply or text("A", stop_reason="max_tokens", usage=WRITTEN)
        return text("answer " + WORDS, usage=_usage(next(usage)))

    proxy.fake.respond = answer
    client = proxy.client(default_headers={"X-Ctx-Session": "warm"})
    agent = Agent(client, proxy.app, model=MODEL)
    for number in range(turns):
        agent.add({"role": "user", "content": f"question {number}: " + WORDS})
        await agent.turn()
        await background_compactions_done(proxy.app)
        if wait:
            await prewarms_done(proxy.app)
        await settled(proxy.app)
    return agent


def prewarms(proxy: AnthropicProxy) -> list[Received]:
    return [r for r in proxy.fake.received if r.body.get("max_tokens") == 1]


def real(proxy: AnthropicProxy) -> list[Received]:
    """The client's requests as sent upstream (not summaries, not prewarms)."""
    summaries = {id(r) for r in proxy.fake.summary_requests}
    return [r for r in proxy.fake.received
            if id(r) not in summaries and r.body.get("max_tokens") != 1]  # fmt: skip


async def test_a_background_compaction_is_followed_by_one_prewarm_of_the_next_prefix(
    make_anthropic_proxy: MakeAnthropicProxy, tmp_path: Path
) -> None:
    shutil.copy(PRICES, tmp_path / "prices.toml")  # found beside the config file
    proxy = await make_anthropic_proxy(tenant_extra=ASYNC + PREWARM)
    await session(proxy)
    assert len(proxy.fake.summary_requests) == 1
    [warm] = prewarms(proxy)
    received = proxy.fake.received
    assert received.index(warm) == received.index(proxy.fake.summary_requests[0]) + 1
    assert warm.body.get("stream") is not True
    after = real(proxy)[4]  # the next request: the first to carry the summary
    assert "[Conversation summary]" in str(after.body["messages"])
    assert "[Conversation summary]" in str(warm.body["messages"])
    length = marked_prefix_length(warm.body)
    assert length > len(warm.body["messages"]) - 1, "the breakpoint is on its last message"
    assert prefix(warm.body, length) == prefix(after.body, length)
    assert warm.body.get("tools") == after.body.get("tools")
    assert warm.headers["x-api-key"] == "sk-ant-upstream", "the key the summarizer used"
    state = await proxy.app[STORE].load("default", "warm")
    assert state.int_field("requests") == 5, "a prewarm is not a turn"
    metrics = await scrape(proxy)
    assert 'ctxproxy_prewarms_total{outcome="done",tenant="default"} 1.0' in metrics
    assert 'ctxproxy_cost_usd_total{kind="prewarm",tenant="default"} 0.00342' in metrics
    events = await proxy.app[STORE].read_events("0-0", block_ms=0, count=1000)
    [event] = [e for _, e in events if e["kind"] == "prewarm"]
    assert (event["outcome"], event["cost_usd"], event["cache_creation_tokens"]) == (
        "done", "0.00342000", "900")  # fmt: skip
    assert_all_valid(r.body for r in proxy.fake.received)


async def test_no_prewarm_by_default(make_anthropic_proxy: MakeAnthropicProxy) -> None:
    proxy = await make_anthropic_proxy(tenant_extra=ASYNC)
    await session(proxy)
    assert len(proxy.fake.summary_requests) == 1 and prewarms(proxy) == []
    assert "ctxproxy_prewarms_total{" not in await scrape(proxy)


async def test_no_prewarm_after_a_sync_compaction(
    make_anthropic_proxy: MakeAnthropicProxy,
) -> None:
    """The request that compacted carries the new prefix itself and writes the cache."""
    proxy = await make_anthropic_proxy(
        tenant_extra=SYNC + "[tenants.default.cache]\nprewarm = true\n"
    )
    await session(proxy)
    assert len(proxy.fake.summary_requests) >= 1 and prewarms(proxy) == []


async def test_a_failing_prewarm_is_counted_and_changes_nothing(
    make_anthropic_proxy: MakeAnthropicProxy,
) -> None:
    proxy = await make_anthropic_proxy(tenant_extra=ASYNC + PREWARM)
    failing = ErrorReply(500, "api_error", "Internal server error")
    agent = await session(proxy, prewarm_reply=failing)
    assert len(prewarms(proxy)) == 1 and agent.history[-1]["content"].startswith("answer")
    assert "[Conversation summary]" in str(real(proxy)[4].body["messages"])
    metrics = await scrape(proxy)
    assert 'ctxproxy_prewarms_total{outcome="failed",tenant="default"} 1.0' in metrics
    state = await proxy.app[STORE].load("default", "warm")
    assert state.int_field("requests") == 5 and state.int_field("compactions") == 1


async def test_a_hanging_prewarm_is_one_per_session_and_cancelled_at_shutdown(
    make_anthropic_proxy: MakeAnthropicProxy,
) -> None:
    proxy = await make_anthropic_proxy(tenant_extra=ASYNC + PREWARM)
    hanging = text("A", delay_s=60)
    agent = await session(proxy, prewarm_reply=hanging, wait=False)
    prewarmer = proxy.app[PREWARMER]
    assert prewarmer.in_flight("default", "warm") and len(prewarms(proxy)) == 1
    [task] = prewarmer._tasks.values()
    assert agent.history[-1]["content"].startswith("answer"), "the session goes on meanwhile"
    job = compaction_job(draft([user("again")]), settings=CompactSettings(), session="warm")
    stored = StoredCompaction(prefix_hash="h", covers=1, replacement=())
    await prewarmer.on_background(job, CompactionOutcome("done", "compacted", (), stored))
    assert len(prewarmer._tasks) == 1 and len(prewarms(proxy)) == 1
    assert 'ctxproxy_prewarms_total{outcome="skipped",tenant="default"} 1.0' in await scrape(proxy)
    await proxy.server.close()
    assert task.cancelled() and not prewarmer.in_flight("default", "warm")


async def test_a_prewarm_past_the_upstreams_timeout_is_counted_failed(
    make_anthropic_proxy: MakeAnthropicProxy,
) -> None:
    proxy = await make_anthropic_proxy(tenant_extra=ASYNC + PREWARM, timeout_s=1)
    agent = await session(proxy, prewarm_reply=text("A", delay_s=5))
    assert len(prewarms(proxy)) == 1 and len(agent.history) == 10
    metrics = await scrape(proxy)
    assert 'ctxproxy_prewarms_total{outcome="failed",tenant="default"} 1.0' in metrics
    events = await proxy.app[STORE].read_events("0-0", block_ms=0, count=1000)
    [event] = [e for _, e in events if e["kind"] == "prewarm"]
    assert event["reason"] == "UpstreamTimeout" and "cost_usd" not in event


def marked_prefix_length(body: dict[str, Any]) -> int:
    """How many messages the body's last message breakpoint covers (its index + 1)."""
    marked = [i for i, m in enumerate(body["messages"]) if "cache_control" in str(m)]
    return marked[-1] + 1 if marked else 0


def prefix(body: dict[str, Any], length: int) -> tuple[Any, Any]:
    """System and the first `length` messages as the cache sees them: markers left out and a
    string content as its one text block (the API caches the same bytes either way)."""
    return unmarked(body.get("system")), [unmarked(_blocks(m)) for m in body["messages"][:length]]


def _blocks(message: dict[str, Any]) -> dict[str, Any]:
    content = message["content"]
    if isinstance(content, str):
        return {**message, "content": [{"type": "text", "text": content}]}
    return message


def unmarked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    return value


async def scrape(proxy: AnthropicProxy) -> str:
    async with ClientSession() as http, http.get(proxy.server.make_url("/metrics")) as response:
        return await response.text()


def _usage(input_tokens: int, output_tokens: int = 5) -> dict[str, int]:
    return {"input_tokens": input_tokens, "output_tokens": output_tokens}


async def test_through_an_openai_upstream_the_prewarm_asks_one_completion_token(
    make_proxy: MakeProxy,
) -> None:
    """`max_completion_tokens` (the chat API's field; `max_tokens` is deprecated there) and the
    session's own `prompt_cache_key`: OpenAI routes by it, so the next request meets the
    prefix. Pruning waits for a cold cache (the default): a new cut would change the prefix
    whatever was warmed."""
    proxy = await make_proxy(
        tenant_extra="[tenants.default.compact]\nthreshold_tokens = 2000\nkeep_recent = 4\n"
        'mode = "async"\nsoft_ratio = 0.5\n[tenants.default.cache]\nprewarm = true\n'
    )
    tokens = (100, 200, 300, 1400, 500, 600)  # the 5th request starts the summary
    agent = await run_session(proxy, tokens=tokens, turns=5)
    await background_compactions_done(proxy.app)
    await prewarms_done(proxy.app)
    [warm] = [r.body for r in proxy.fake.chat if "max_completion_tokens" in r.body]
    assert warm["max_completion_tokens"] == 1 and "max_tokens" not in warm
    assert "stream" not in warm and "stream_options" not in warm
    await run_session(proxy, tokens=tokens, turns=6, agent=agent)
    after = proxy.fake.chat[-1].body
    assert after["prompt_cache_key"] == warm["prompt_cache_key"]
    assert after["prompt_cache_key"].startswith("ctxproxy-")
    assert after["messages"][: len(warm["messages"])] == warm["messages"]
    assert "[Conversation summary]" in str(warm["messages"])


async def test_on_the_messages_route_the_prewarm_prefix_is_the_next_requests(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    """A Messages client (the Anthropic SDK) with tools, tool use and results, a marked system
    block: the prewarm, rendered as the chat route would, has the same tools, system and
    messages up to its breakpoint as the route's next request."""
    proxy = await make_messages_proxy(tenant_extra=ASYNC + PREWARM)
    proxy.fake.summary_text = SUMMARY
    usage = iter((400, 700, 1200, 1300, 1400, 1500))

    def answer(body: dict[str, Any]) -> Reply | ErrorReply:
        if body.get("max_tokens") == 1:
            return text("A", usage=WRITTEN)
        n = next(usage)
        return tool_use((f"toolu_{n}", "read", {"path": "a.py"}), lead="ok " + WORDS,
                        usage=_usage(n))  # fmt: skip

    proxy.fake.respond = answer
    client = proxy.client(default_headers={"X-Claude-Code-Session-Id": "cc"})
    system = [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}]
    agent = MessagesAgent(client, proxy.app, system=system)
    agent.add({"role": "user", "content": "start " + WORDS})
    for number in range(5):
        await agent.turn(tools=[READ])
        await background_compactions_done(proxy.app)
        await prewarms_done(proxy.app)
        call = agent.history[-1]["content"][-1]
        result = {"type": "tool_result", "tool_use_id": call["id"], "content": "x = 1\n" * 30}
        agent.add({"role": "user", "content": [result, {"type": "text", "text": f"q{number}"}]})
    bodies = [r.body for r in proxy.fake.received]
    [warm] = [b for b in bodies if b.get("max_tokens") == 1]
    after = bodies[bodies.index(warm) + 1]
    length = marked_prefix_length(warm)
    assert length == len(warm["messages"]) and "[Conversation summary]" in str(warm["messages"])
    assert prefix(warm, length) == prefix(after, length)
    assert warm["tools"] == after["tools"]


READ = {
    "name": "read",
    "description": "Read a file",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
}
