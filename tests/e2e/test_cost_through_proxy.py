"""Money through the proxy: every answer priced from the usage it reported (`[server] prices`),
unpriced models counted, never guessed, the estimate of what the client's own body would have
cost, read from `/metrics` and the request events."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from proxy.config import load_settings
from proxy.server.app import Ports, create_app
from proxy.server.appkeys import LIFECYCLE
from tests.e2e.agent import Agent
from tests.e2e.conftest import MakeAnthropicProxy
from tests.fakes.anthropic_upstream import text
from tests.fakes.openai_upstream import FakeOpenAI, Reply
from tests.server.conftest import MakeProxy, Proxy
from tests.server.harness import write_config

PRICES = """
[models."claude-sonnet-4-5"]
input = 3.0
cache_read = 0.3
cache_write = 3.75
cache_write_1h = 6.0
output = 15.0
source = "https://example.com/pricing"
read = 2026-12-03

[models."gpt-4.1"]
input = 2.0
cache_read = 0.5
output = 8.0
source = "https://example.com/pricing"
read = 2026-12-03
"""
ANTHROPIC_USAGE = {
    "input_tokens": 100,
    "cache_read_input_tokens": 2000,
    "cache_creation_input_tokens": 1000,
    "cache_creation": {"ephemeral_5m_input_tokens": 600, "ephemeral_1h_input_tokens": 400},
    "output_tokens": 50,
}
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture
def price_table(tmp_path: Path) -> Path:
    """A price table beside the test's config file: found without a `[server] prices` key."""
    path = tmp_path / "prices.toml"
    path.write_text(PRICES, encoding="utf-8")
    return path


async def get(server_url: Any, path: str) -> aiohttp.ClientResponse:
    async with aiohttp.ClientSession(headers={"Authorization": "Bearer sk-client"}) as http:
        response = await http.get(server_url(path))
        await response.read()
        return response


async def scrape(app: Any, server_url: Any) -> Samples:
    await asyncio.gather(*list(app[LIFECYCLE].tasks))
    async with aiohttp.ClientSession() as http, http.get(server_url("/metrics")) as response:
        exposition = await response.text()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(exposition)
        for s in family.samples
    }


def cost(samples: Samples, kind: str) -> float:
    return samples[("ctxproxy_cost_usd_total", (("kind", kind), ("tenant", "default")))]


async def request_events(server_url: Any) -> list[dict[str, str]]:
    response = await get(server_url, "/v1/ctx/events")
    events: list[dict[str, str]] = (await response.json())["events"]
    return [e for e in events if e["kind"] == "request"]


async def test_anthropic_answers_are_priced_by_kind_with_one_hour_writes_apart(
    make_anthropic_proxy: MakeAnthropicProxy, price_table: Path
) -> None:
    proxy = await make_anthropic_proxy()
    proxy.fake.script(text("One.", usage=ANTHROPIC_USAGE), text("Two.", usage=ANTHROPIC_USAGE))
    agent = Agent(proxy.client(), proxy.app, model="claude-sonnet-4-5")
    for question in ("first", "second"):
        agent.add({"role": "user", "content": question})
        await agent.turn()
    samples = await scrape(proxy.app, proxy.server.make_url)
    assert cost(samples, "input") == pytest.approx(2 * 100 * 3.0 / 1e6)
    assert cost(samples, "cache_read") == pytest.approx(2 * 2000 * 0.3 / 1e6)
    assert cost(samples, "cache_write") == pytest.approx(2 * (600 * 3.75 + 400 * 6.0) / 1e6)
    assert cost(samples, "output") == pytest.approx(2 * 50 * 15.0 / 1e6)
    [first, second] = await request_events(proxy.server.make_url)
    one = (100 * 3.0 + 2000 * 0.3 + 600 * 3.75 + 400 * 6.0 + 50 * 15.0) / 1e6
    assert float(first["cost_usd"]) == pytest.approx(one) == float(second["cost_usd"])
    assert "cost_saved_usd" in second and "unpriced" not in second


async def test_a_model_without_a_price_is_counted_unpriced_never_guessed(
    make_proxy: MakeProxy, price_table: Path
) -> None:
    proxy: Proxy = await make_proxy()
    client = proxy.client()
    for model in ("gpt-4.1-2025-04-14", "gpt-4.1-turbo-unknown"):
        await client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "hi"}]
        )
    samples = await scrape(proxy.app, proxy.server.make_url)
    assert samples[("ctxproxy_unpriced_requests_total", (("tenant", "default"),))] == 1.0
    assert cost(samples, "output") == pytest.approx(7 * 8.0 / 1e6)  # the dated snapshot's
    events = await request_events(proxy.server.make_url)
    assert [e.get("unpriced") for e in events] == [None, "1"]
    assert "cost_usd" not in events[1]


async def test_openai_cache_writes_are_priced_as_input_where_the_table_has_no_write_price(
    make_proxy: MakeProxy, price_table: Path
) -> None:
    proxy = await make_proxy()
    proxy.fake.script.append(Reply(prompt_tokens=3000, cached_tokens=1024, cache_write_tokens=500))
    await proxy.client().chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": "hi"}]
    )
    samples = await scrape(proxy.app, proxy.server.make_url)
    assert cost(samples, "cache_write") == pytest.approx(500 * 2.0 / 1e6)
    assert cost(samples, "input") == pytest.approx((3000 - 1024 - 500) * 2.0 / 1e6)
    assert cost(samples, "cache_read") == pytest.approx(1024 * 0.5 / 1e6)


async def test_without_a_price_table_nothing_is_priced_or_counted(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy()
    await proxy.client().chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": "hi"}]
    )
    samples = await scrape(proxy.app, proxy.server.make_url)
    assert not [key for key in samples if key[0].startswith(("ctxproxy_cost", "ctxproxy_unpr"))]


async def test_the_saving_is_estimated_against_the_clients_own_body(
    make_proxy: MakeProxy, price_table: Path
) -> None:
    """Budgets cut a 60,000-character `bash` result to 30,000: the client's own body, sent again
    and again, is simulated to cost more than what ctxproxy sent; nothing costs extra."""
    proxy = await make_proxy(workspace=False)
    big = "line of tool output\n" * 3000  # 60,000 characters
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "run it"},
        {"role": "assistant", "content": None, "tool_calls": [_call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": big},
    ]
    client = proxy.client()
    for turn in range(3):
        messages.append({"role": "user", "content": f"and now {turn}"})
        await client.chat.completions.create(model="gpt-4.1", messages=messages)
        messages.append({"role": "assistant", "content": f"done {turn}"})
    samples = await scrape(proxy.app, proxy.server.make_url)
    saved = samples[("ctxproxy_cost_saved_usd_total", (("tenant", "default"),))]
    assert saved > 0.0
    assert ("ctxproxy_cost_extra_usd_total", (("tenant", "default"),)) not in samples
    events = await request_events(proxy.server.make_url)
    assert sum(float(e["cost_saved_usd"]) for e in events) == pytest.approx(saved)


def _call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": "{}"}}


async def test_misses_are_counted_by_cause_and_the_session_shows_the_last(
    aiohttp_server: Any, tmp_path: Path
) -> None:
    """Behind the fake OpenAI API (automatic caching): a history that extends and reads it all
    is no miss; an edited one is the client's; one after 11 idle minutes is the cache's ttl."""
    clock = [1000.0]
    fake = FakeOpenAI()
    upstream = await aiohttp_server(fake.app())
    config = write_config(tmp_path, upstream=str(upstream.make_url("")).rstrip("/"))
    settings = load_settings(config, environ={"FAKE_UPSTREAM_KEY": "sk-upstream-secret"})
    app = create_app(settings, Ports(clock=lambda: clock[0]))
    server = await aiohttp_server(app)
    client = openai.AsyncOpenAI(
        base_url=str(server.make_url("/v1")), api_key="sk-client", max_retries=0
    )
    history: list[dict[str, Any]] = [{"role": "user", "content": "first"}]
    steps = [  # (reported cached tokens, the client's history, seconds later)
        (0, history, 0.0),
        (4992, [*history, {"role": "assistant", "content": "a"}], 10.0),  # all of 5,000: no miss
        (1024, [{"role": "user", "content": "edited"}], 10.0),  # client
        (1024, [{"role": "user", "content": "edited"}, {"role": "user", "content": "b"}], 700.0),
    ]
    for cached, messages, later in steps:
        clock[0] += later
        fake.script.append(Reply(prompt_tokens=5000, cached_tokens=cached))
        await client.chat.completions.create(
            model="gpt-4.1", messages=messages, extra_headers={"X-Ctx-Session": "s1"}
        )
    samples = await scrape(app, server.make_url)
    misses = {
        dict(labels)["cause"]: v
        for (name, labels), v in samples.items()
        if name == "ctxproxy_cache_misses_total"
    }
    assert misses == {"client": 1.0, "ttl": 1.0}
    events = await request_events(server.make_url)
    assert [e.get("cache_miss") for e in events] == [None, None, "client", "ttl"]
    detail = await (await get(server.make_url, "/v1/ctx/sessions/s1")).json()
    assert detail["state"]["last_miss_cause"] == "ttl"


@pytest.mark.parametrize("stream", [False, True])
async def test_anthropic_cache_diagnostics_are_asked_when_opted_in_and_recorded_beside_ours(
    make_anthropic_proxy: MakeAnthropicProxy, stream: bool
) -> None:
    """`cache_diagnostics = true`: each request names the session's previous answer (null on the
    first); the provider's reason lands in the request event and the session's state."""
    proxy = await make_anthropic_proxy(upstream_extra="cache_diagnostics = true\n")
    reason = {"type": "system_changed", "cache_missed_input_tokens": 900}
    proxy.fake.script(text("One."), text("Two.", miss_reason=reason))
    client = proxy.client()
    for question in ("first", "second"):
        await _ask(client, question, stream=stream)
    asked = [r.body.get("diagnostics") for r in proxy.fake.received]
    assert asked == [{"previous_message_id": None}, {"previous_message_id": "msg_fake0001"}]
    events = await request_events(proxy.server.make_url)
    assert [e.get("cache_miss_provider") for e in events] == [None, "system_changed"]
    detail = await (await get(proxy.server.make_url, "/v1/ctx/sessions/s1")).json()
    assert detail["state"]["last_miss_provider"] == "system_changed"
    assert detail["state"]["answer_id"] == "msg_fake0002"


async def test_anthropic_cache_diagnostics_are_not_asked_by_default(
    make_anthropic_proxy: MakeAnthropicProxy,
) -> None:
    proxy = await make_anthropic_proxy()
    proxy.fake.script(text("One."), text("Two.", miss_reason={"type": "model_changed"}))
    client = proxy.client()
    for question in ("first", "second"):
        await _ask(client, question, stream=False)
    assert all("diagnostics" not in r.body for r in proxy.fake.received)
    events = await request_events(proxy.server.make_url)
    assert [e.get("cache_miss_provider") for e in events] == [None, None]


async def _ask(client: openai.AsyncOpenAI, question: str, *, stream: bool) -> None:
    messages: Any = [{"role": "user", "content": question}]
    headers = {"X-Ctx-Session": "s1"}
    if not stream:
        await client.chat.completions.create(
            model="claude-sonnet-4-5", messages=messages, extra_headers=headers
        )
        return
    chunks = await client.chat.completions.create(
        model="claude-sonnet-4-5", messages=messages, extra_headers=headers, stream=True
    )
    async for _ in chunks:
        pass


async def test_openai_style_sends_one_prompt_cache_key_per_session_unless_the_client_did(
    make_proxy: MakeProxy,
) -> None:
    proxy = await make_proxy()
    client = proxy.client()
    for session in ("s1", "s1", "s2"):
        await client.chat.completions.create(
            model="gpt-4.1",
            messages=[{"role": "user", "content": "hi"}],
            extra_headers={"X-Ctx-Session": session},
        )
    await client.chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": "hi"}], prompt_cache_key="mine"
    )
    keys = [r.body.get("prompt_cache_key") for r in proxy.fake.received]
    assert keys[0] == keys[1] != keys[2] and str(keys[0]).startswith("ctxproxy-")
    assert keys[3] == "mine"
