"""The openai SDK → ctxproxy → the fake Anthropic Messages API (`kind = "anthropic"`), which
checks every request the way the real API does (pairing, first message `user`, ≤ 4 breakpoints)."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from proxy.server.appkeys import STORE
from tests.e2e.agent import Agent, settled
from tests.e2e.conftest import MakeAnthropicProxy
from tests.fakes.anthropic_upstream import Reply, overloaded, text, tool_use

MODEL = "claude-sonnet-4-5"
BIG = 123456789012345678901234567890
TOOLS = [
    {"type": "function", "function": {"name": name, "description": f"{name} a thing",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}
    for name in ("read", "grep")
]  # fmt: skip
PARALLEL = tool_use(
    ("toolu_1", "read", {"path": "a.py"}), ("toolu_2", "grep", {"path": "b.py"}), lead="Looking."
)


async def test_text_answer_arrives_as_a_chat_completion(
    make_anthropic_proxy: MakeAnthropicProxy,
) -> None:
    proxy = await make_anthropic_proxy()
    proxy.fake.script(text("Hi there."))
    async with proxy.client() as client:
        done = await client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hello"}]
        )
    assert done.choices[0].message.content == "Hi there."
    assert done.choices[0].finish_reason == "stop"
    sent = proxy.fake.received[-1].body
    assert sent["messages"][-1]["role"] == "user" and sent["max_tokens"] > 0


async def test_parallel_tool_calls_and_their_results_round_trip(
    make_anthropic_proxy: MakeAnthropicProxy,
) -> None:
    proxy = await make_anthropic_proxy()
    proxy.fake.script(PARALLEL, text("Both read."))
    agent = Agent(proxy.client(), proxy.app, model=MODEL)
    agent.add({"role": "user", "content": "inspect"})
    answer = await agent.turn(tools=TOOLS)
    calls = answer["tool_calls"]
    assert [(c["id"], c["function"]["name"]) for c in calls] == [
        ("toolu_1", "read"), ("toolu_2", "grep")]  # fmt: skip
    assert json.loads(calls[1]["function"]["arguments"]) == {"path": "b.py"}
    agent.add(
        *({"role": "tool", "tool_call_id": c["id"], "content": f"out {c['id']}"} for c in calls)
    )
    answer = await agent.turn(tools=TOOLS)
    assert answer["content"] == "Both read."
    last = proxy.fake.received[-1].body["messages"][-1]
    assert [(b["type"], b["tool_use_id"]) for b in last["content"][:2]] == [
        ("tool_result", "toolu_1"), ("tool_result", "toolu_2")]  # fmt: skip


async def test_stream_keeps_tool_call_indexes_stable_and_arguments_whole(
    make_anthropic_proxy: MakeAnthropicProxy,
) -> None:
    proxy = await make_anthropic_proxy()
    proxy.fake.script(PARALLEL)
    async with proxy.client() as client:
        stream = await client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "go"}], tools=TOOLS, stream=True
        )
        chunks = [chunk async for chunk in stream]
    calls: dict[int, dict[str, str]] = {}
    for chunk in chunks:
        for delta in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            entry = calls.setdefault(delta.index, {"id": "", "args": ""})
            entry["id"] += delta.id or ""
            entry["args"] += (delta.function.arguments if delta.function else None) or ""
    assert [calls[i]["id"] for i in sorted(calls)] == ["toolu_1", "toolu_2"]
    assert json.loads(calls[0]["args"]) == {"path": "a.py"}
    assert json.loads(calls[1]["args"]) == {"path": "b.py"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


async def test_usage_with_cache_reads_is_mapped_and_recorded(
    make_anthropic_proxy: MakeAnthropicProxy,
) -> None:
    proxy = await make_anthropic_proxy()
    usage = {"input_tokens": 100, "cache_read_input_tokens": 900,
             "cache_creation_input_tokens": 50, "output_tokens": 5}  # fmt: skip
    proxy.fake.script(Reply(usage=usage), Reply(usage=usage))
    agent = Agent(proxy.client(default_headers={"X-Ctx-Session": "cache"}), proxy.app, model=MODEL)
    agent.add({"role": "user", "content": "one"})
    async with agent.client as client:
        raw = await client.chat.completions.with_raw_response.create(
            model=MODEL, messages=agent.messages
        )
        await settled(proxy.app)
        assert raw.headers["x-ctx-cached-tokens"] == "0"
        done = raw.parse()
        assert done.usage is not None and done.usage.prompt_tokens == 1050
        assert done.usage.prompt_tokens_details.cached_tokens == 900  # type: ignore[union-attr]
        raw = await client.chat.completions.with_raw_response.create(
            model=MODEL, messages=agent.messages
        )
        await settled(proxy.app)
    assert raw.headers["x-ctx-cached-tokens"] == "900"
    assert raw.headers["x-ctx-last-prompt-tokens"] == "1050"
    state = await proxy.app[STORE].load("default", "cache")
    assert state.int_field("last_cached_tokens") == 900


async def test_overloaded_upstream_reaches_the_sdk_as_529_with_an_openai_body(
    make_anthropic_proxy: MakeAnthropicProxy,
) -> None:
    proxy = await make_anthropic_proxy()
    proxy.fake.script(overloaded())
    async with proxy.client() as client:
        with pytest.raises(openai.APIStatusError) as caught:
            await client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "hello"}]
            )
    assert caught.value.status_code == 529
    body: Any = caught.value.body
    assert body["message"] == "Overloaded" and body["type"] == "overloaded_error"


async def test_error_event_mid_stream_makes_the_sdk_raise(
    make_anthropic_proxy: MakeAnthropicProxy,
) -> None:
    proxy = await make_anthropic_proxy()
    blocks = ({"type": "text", "text": "partial answer"}, {"type": "text", "text": "never"})
    proxy.fake.script(Reply(content=blocks, error_after=1))
    async with proxy.client() as client:
        stream = await client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "go"}], stream=True
        )
        got: list[str] = []
        with pytest.raises(openai.APIError):
            async for chunk in stream:
                got.append(chunk.choices[0].delta.content or "" if chunk.choices else "")
    assert "".join(got) == "partial answer"


async def test_anthropic_version_and_beta_headers_from_the_client_pass_through(
    make_anthropic_proxy: MakeAnthropicProxy,
) -> None:
    proxy = await make_anthropic_proxy()
    headers = {"anthropic-version": "2023-06-01", "anthropic-beta": "context-1m-2025-08-07"}
    async with proxy.client(default_headers=headers) as client:
        await client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hello"}]
        )
    sent = proxy.fake.received[-1].headers
    assert sent["anthropic-beta"] == "context-1m-2025-08-07"
    assert sent["anthropic-version"] == "2023-06-01"
    assert sent["x-api-key"] == "sk-ant-upstream"


@pytest.mark.parametrize("end_delay_s", [0.0, 0.5])
async def test_a_stream_after_message_stop_is_recorded_with_its_usage(
    make_anthropic_proxy: MakeAnthropicProxy, end_delay_s: float
) -> None:
    proxy = await make_anthropic_proxy()
    usage = {"input_tokens": 4321, "output_tokens": 5}
    proxy.fake.script(text("Done.", usage=usage, end_delay_s=end_delay_s))
    async with proxy.client() as client:
        stream = await client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "go"}],
            stream=True,
            extra_headers={"X-Ctx-Session": "after-stop"},
        )
        chunks = [chunk async for chunk in stream]
    assert chunks[-1].choices[0].finish_reason == "stop"
    await settled(proxy.app)
    detail = await proxy.app[STORE].session_detail("default", "after-stop")
    assert detail is not None and detail["state"]["last_prompt_tokens"] == "4321"


async def test_a_big_integer_in_tool_content_reaches_anthropic_exactly(
    make_anthropic_proxy: MakeAnthropicProxy,
) -> None:
    proxy = await make_anthropic_proxy()
    call = {"id": "t1", "type": "function", "function": {"name": "count", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "count"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "t1", "content": {"total": BIG}},
    ]
    schema = {"type": "object", "properties": {"n": {"type": "integer", "maximum": BIG}}}
    tools = [{"type": "function", "function": {"name": "count", "parameters": schema}}]
    async with proxy.client() as client:
        await client.chat.completions.create(
            model=MODEL,
            messages=messages,  # type: ignore[arg-type]
            tools=tools,  # type: ignore[arg-type]
        )
    sent = proxy.fake.received[-1].body  # parsed by the stdlib: integers exact
    assert str(BIG) in str(sent["messages"][-1]["content"][0])
    assert sent["tools"][0]["input_schema"]["properties"]["n"]["maximum"] == BIG
