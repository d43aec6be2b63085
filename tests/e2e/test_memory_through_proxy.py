"""Memory that outlives the session, end to end: the openai SDK → ctxproxy → the fake upstream.

Session 1 tells a fact and is compacted; the summarizer's answer carries a `<memory>` block;
session 2 (a new session id) finds the fact in the system prompt sent upstream, after the
workspace's own memory index, while the static part stays byte-identical. Two proxies on one
Redis compacting sessions of one tenant at once keep every fact once.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from proxy.server.appkeys import STORE
from tests.e2e.agent import Agent, assert_all_valid
from tests.e2e.session import COMPACT, run_session
from tests.fakes.openai_upstream import FakeOpenAI, Reply
from tests.server.conftest import MakeProxy
from tests.server.harness import Proxy

LEARNED = "The user's project BLUEFIN deploys on port 8421."
SUMMARY = "<analysis>a</analysis><summary>SUMMARY OF EARLIER TURNS</summary>"
CLIENT_SYSTEM = "You are a careful coding agent."


def system_parts(body: dict[str, Any]) -> tuple[str, str]:
    """(static part, dynamic part) of the system message sent upstream (`openai` cache style:
    one string, static + client + dynamic, a blank line between)."""
    text = body["messages"][0]["content"]
    static, _, dynamic = text.partition(f"\n\n{CLIENT_SYSTEM}\n\n")
    return static, dynamic


def memory_index(dynamic: str) -> list[str]:
    found = re.search(r"<memory_index>\n(.*)\n</memory_index>", dynamic, re.DOTALL)
    assert found, dynamic
    return found.group(1).splitlines()


async def test_a_fact_learned_in_one_session_is_in_the_next_sessions_bootstrap(
    make_proxy: MakeProxy, store: dict[str, str]
) -> None:
    proxy = await make_proxy(tenant_extra=COMPACT, **store)
    proxy.fake.summary_text = f"{SUMMARY}\n<memory>\n- {LEARNED}\n</memory>"
    first = await run_session(proxy)
    assert first.header("X-Ctx-Compacted") == "1"
    before_static, before_dynamic = system_parts(proxy.fake.chat[0].body)
    assert LEARNED not in before_dynamic

    second = Agent(proxy.client(default_headers={"X-Ctx-Session": "another-day"}), proxy.app)
    second.add({"role": "user", "content": "Hi again, where were we?"})
    proxy.fake.script.append(Reply(content="Welcome back."))
    await second.turn()
    static, dynamic = system_parts(proxy.fake.chat[-1].body)
    assert static.encode() == before_static.encode()  # the provider's cache keeps hitting
    index = memory_index(dynamic)
    assert index[-1].endswith(f": {LEARNED}") and re.match(r"- \d{4}-\d{2}-\d{2}: ", index[-1])
    assert index[:-1] == memory_index(before_dynamic)  # after the workspace's own lines
    assert "<memory>" not in str(proxy.fake.chat[-1].body)  # the block never reaches a prompt
    assert_all_valid(r.body for r in proxy.fake.received)


async def test_the_compaction_event_and_the_metrics_count_the_facts(
    make_proxy: MakeProxy,
) -> None:
    proxy = await make_proxy(tenant_extra=COMPACT)
    proxy.fake.summary_text = f"{SUMMARY}<memory>\n- {LEARNED}\n- Ada likes tea.\n</memory>"
    await run_session(proxy)
    events = await (await client_get(proxy, "/v1/ctx/events")).json()
    [compaction] = [e for e in events["events"] if e["kind"] == "compaction"]
    assert (compaction["outcome"], compaction["memory"], compaction["facts_added"]) == (
        "done", "written", "2",
    )  # fmt: skip
    metrics = await (await client_get(proxy, "/metrics")).text()
    assert 'ctxproxy_memory_writes_total{outcome="written",tenant="default"} 1.0' in metrics


async def test_a_summary_without_facts_learns_nothing_and_changes_no_prompt(
    make_proxy: MakeProxy,
) -> None:
    proxy = await make_proxy(tenant_extra=COMPACT)
    await run_session(proxy)  # the fake's summary has no <memory> block
    assert await proxy.app[STORE].read_facts("default", None) == ()
    metrics = await (await client_get(proxy, "/metrics")).text()
    assert 'ctxproxy_memory_writes_total{outcome="none",tenant="default"} 1.0' in metrics


async def test_with_memory_off_the_summarizer_is_not_asked_for_facts(
    make_proxy: MakeProxy,
) -> None:
    proxy = await make_proxy(tenant_extra=COMPACT + "[tenants.default.memory]\nenabled = false\n")
    proxy.fake.summary_text = f"{SUMMARY}<memory>\n- {LEARNED}\n</memory>"
    await run_session(proxy)
    instruction = proxy.fake.summary_requests[0].body["messages"][-1]["content"]
    assert "<memory>" not in instruction
    assert await proxy.app[STORE].read_facts("default", None) == ()


async def client_get(proxy: Proxy, path: str) -> Any:
    session = aiohttp.ClientSession(headers={"Authorization": "Bearer sk-client"})
    try:
        response = await session.get(proxy.server.make_url(path))
        await response.read()
        return response
    finally:
        await session.close()


class LearningFake(FakeOpenAI):
    """Every summary teaches the tenant one fact all sessions share and one of its own session
    (named in its first user message); every chat answer reports 5,000 prompt tokens."""

    def __init__(self) -> None:
        super().__init__()
        self.default = Reply(content="ok", prompt_tokens=5_000)

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())  # aiohttp keeps the bytes for the second read
        first = next(m["content"] for m in body["messages"] if m["role"] == "user")
        owner = first.split()[0]
        if owner.startswith("user"):  # not a compacted request's summary
            # set and read by the parent with no await between: requests at once do not mix
            self.summary_text = (
                f"{SUMMARY}<memory>\n- The team deploys on Fridays.\n"
                f"- {owner} works on port {8000 + int(owner.removeprefix('user'))}.\n</memory>"
            )
        return await super().chat_completions(request)


async def test_two_proxies_on_one_redis_keep_every_fact_of_concurrent_compactions_once(
    make_proxy: MakeProxy, redis_server: Any, key_prefix: str
) -> None:
    fake = LearningFake()
    # the summary folds the first message in (not kept: with keep_recent 4 it would be all)
    extra = COMPACT + "keep_first_user = false\n"
    values = {"store_url": redis_server.url, "key_prefix": key_prefix, "tenant_extra": extra}
    replicas = [await make_proxy(fake=fake, **values) for _ in range(2)]

    async def session(number: int) -> None:
        proxy = replicas[number % 2]
        agent = Agent(proxy.client(default_headers={"X-Ctx-Session": f"s{number}"}), proxy.app)
        agent.add({"role": "user", "content": f"user{number} here. " + "x" * 300},
                  {"role": "assistant", "content": "noted " + "y" * 300},
                  {"role": "user", "content": "more " + "z" * 300})  # fmt: skip
        await agent.turn()  # reports 5,000 prompt tokens: the next request compacts
        agent.add({"role": "user", "content": "go on"})
        await agent.turn()
        assert agent.header("X-Ctx-Compacted") == "1"

    await asyncio.gather(*(session(n) for n in range(8)))
    assert len(fake.summary_requests) == 8
    facts = await replicas[0].app[STORE].read_facts("default", None)
    texts = sorted(line.split(": ", 1)[1] for line in facts)
    assert texts == sorted(["The team deploys on Fridays."] +
                           [f"user{n} works on port {8000 + n}." for n in range(8)])  # fmt: skip
    later = Agent(replicas[1].client(default_headers={"X-Ctx-Session": "later"}), replicas[1].app)
    later.add({"role": "user", "content": "user99 here."})
    await later.turn()
    _, dynamic = system_parts(fake.chat[-1].body)
    assert sorted(line.split(": ", 1)[1] for line in memory_index(dynamic)[-9:]) == texts
