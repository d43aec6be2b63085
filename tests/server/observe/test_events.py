"""Events per request and per compaction, in a real Redis stream; never content or secrets."""

from __future__ import annotations

import asyncio
import logging

import orjson
import pytest

from proxy.adapters.redis.store import RedisStore
from proxy.compaction.job import CompactionOutcome
from proxy.server.appkeys import LIFECYCLE
from proxy.server.observe.events import (
    background_compaction_event,
    compaction_event,
    request_event,
)
from proxy.types import StageReport
from tests.factories import make_trace
from tests.fakes.openai_upstream import Reply
from tests.redis_server import RedisServer
from tests.server.conftest import MakeProxy
from tests.server.harness import Proxy
from tests.server.observe.test_metrics import COMPACT_AT_100, PRUNED_755, tool_history

SECRET = "sk-client-SECRET-123"
CONTENT = "MY-PRIVATE-CONTENT"


def test_request_event_rounds_timings_to_a_tenth_of_a_millisecond() -> None:
    event = request_event(make_trace(prepare_s=0.00004999, upstream_s=1.23456), now=1.5)
    assert (event["prepare_ms"], event["upstream_ms"], event["latency_ms"]) == (
        "0.0",
        "1234.6",
        "1234.6",
    )
    assert event["ts"] == "1.500"


def test_stage_summary_leaves_zero_counters_out_and_names_a_skipped_stage() -> None:
    trace = make_trace(
        StageReport("prune", {"chars_pruned": 0, "pruned": 2}),
        StageReport("cache", {"breakpoints": 0}),
        StageReport("budgets", {"persisted": 1}, skipped="KeyError"),
        prepare_s=0.0,
        upstream_s=0.0,
    )
    assert orjson.loads(request_event(trace, now=0.0)["stages"]) == {
        "prune": {"pruned": 2},
        "cache": {},
        "budgets": {"persisted": 1, "skipped": "KeyError"},
    }


async def settle(proxy: Proxy) -> None:
    await asyncio.gather(*list(proxy.app[LIFECYCLE].tasks))


async def events_of(
    redis_server: RedisServer, key_prefix: str, *, at_least: int = 0
) -> list[dict[str, str]]:
    """The events written so far; with `at_least`, waits (up to 10 s: a bound, not a speed) until
    that many are there, since a streamed answer's event is written after its client has read it."""
    store = RedisStore(redis_server.url, key_prefix=key_prefix, op_timeout_s=5.0)
    try:
        deadline = asyncio.get_running_loop().time() + 10
        while True:
            events = [fields for _, fields in await store.read_events("0", block_ms=0, count=100)]
            if len(events) >= at_least or asyncio.get_running_loop().time() > deadline:
                return events
            await asyncio.sleep(0.02)
    finally:
        await store.close()


async def test_one_request_event_with_tokens_stages_and_latency(
    make_proxy: MakeProxy, redis_server: RedisServer, key_prefix: str
) -> None:
    proxy = await make_proxy(store_url=redis_server.url, key_prefix=key_prefix)
    proxy.fake.default = Reply(prompt_tokens=900, cached_tokens=512, completion_tokens=12)
    async with proxy.client() as client:
        await client.chat.completions.create(
            model="gpt-4o",
            messages=tool_history([755, 50, 50]),
            extra_headers={"X-Ctx-Session": "s-1"},
        )
    await settle(proxy)
    [event] = await events_of(redis_server, key_prefix, at_least=1)
    assert event["kind"] == "request" and event["tenant"] == "default"
    assert event["session"] == "s-1" and event["model"] == "gpt-4o"
    assert (event["prompt_tokens"], event["cached_tokens"], event["completion_tokens"]) == (
        "900",
        "512",
        "12",
    )
    assert event["status"] == "200" and event["outcome"] == "ok" and event["store"] == "ok"
    stages = orjson.loads(event["stages"])
    assert stages["prune"]["chars_pruned"] == 755 - len(PRUNED_755)
    assert stages["prune"]["pruned"] == 1
    assert stages["bootstrap"]["sections"] >= 3
    tokens = orjson.loads(event["tokens"])  # estimated, anchored on the upstream's 900
    assert list(tokens) == ["prune", "bootstrap"]
    assert tokens["bootstrap"][1] == 900 and tokens["prune"][1] == tokens["bootstrap"][0]
    assert tokens["prune"][0] - tokens["prune"][1] == round((755 - len(PRUNED_755)) / 4)
    assert float(event["latency_ms"]) >= float(event["prepare_ms"]) >= 0
    assert event["compaction"] == ""
    [sent] = proxy.fake.chat
    assert int(event["bytes_out"]) == len(orjson.dumps(sent.body))  # what went upstream


async def test_a_compaction_emits_its_own_event(
    make_proxy: MakeProxy, redis_server: RedisServer, key_prefix: str
) -> None:
    proxy = await make_proxy(
        store_url=redis_server.url, key_prefix=key_prefix, tenant_extra=COMPACT_AT_100
    )
    history = tool_history([50] * 4)
    async with proxy.client() as client:
        await client.chat.completions.create(model="m", messages=history)
        await settle(proxy)
        history += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "next"}]
        await client.chat.completions.create(model="m", messages=history)
    await settle(proxy)
    events = await events_of(redis_server, key_prefix, at_least=3)
    assert [e["kind"] for e in events] == ["request", "compaction", "request"]
    compaction = events[1]
    assert compaction["outcome"] == "done" and compaction["reason"] == "compacted"
    assert compaction["messages_in"] == "11" and int(compaction["covers"]) > 0
    assert events[2]["compaction"] == "done"
    tokens = orjson.loads(events[2]["tokens"])
    before, after = tokens["compaction"]
    assert before > after, tokens  # the summary stands for more than it takes


async def test_store_outage_never_fails_the_request(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(store_url="redis://127.0.0.1:1/0")
    async with proxy.client() as client:
        done = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
    await settle(proxy)
    assert done.choices[0].message.content


async def test_events_and_logs_never_carry_content_or_keys(
    make_proxy: MakeProxy,
    redis_server: RedisServer,
    key_prefix: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    proxy = await make_proxy(
        store_url=redis_server.url, key_prefix=key_prefix, tenant_extra=COMPACT_AT_100
    )
    proxy.fake.summary_text = "<analysis>x</analysis>"  # a failed compaction logs too
    history = tool_history([400] * 4, question=CONTENT)
    async with proxy.client(api_key=SECRET) as client:
        await client.chat.completions.create(model="m", messages=history)
        await settle(proxy)
        history += [{"role": "assistant", "content": CONTENT}, {"role": "user", "content": "go"}]
        await client.chat.completions.create(model="m", messages=history, stream=True)
    await settle(proxy)
    events = await events_of(redis_server, key_prefix, at_least=3)
    assert len(events) == 3
    text = orjson.dumps(events).decode() + "\n".join(r.getMessage() for r in caplog.records)
    assert CONTENT not in text and SECRET not in text and "line 0" not in text
    assert "sk-upstream-secret" not in text


def test_a_compaction_event_says_what_became_of_its_facts() -> None:
    learned = CompactionOutcome("done", "compacted", (), memory="written", facts_added=2)
    event = background_compaction_event("t", "s", learned, now=1.0)
    assert (event["memory"], event["facts_added"]) == ("written", "2")
    trace = make_trace(compaction=learned)
    found = compaction_event(trace, now=1.0)
    assert found is not None and (found["memory"], found["facts_added"]) == ("written", "2")
    unasked = background_compaction_event("t", "s", CompactionOutcome("done", "x", ()), now=1.0)
    assert "memory" not in unasked and "facts_added" not in unasked
