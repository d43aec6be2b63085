"""`POST /v1/messages` in front of the fake OpenAI-compatible API: the `anthropic` SDK's requests
become chat requests, and the answers (JSON, streams, tool calls, errors, usage) come back as the
Messages API's."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import anthropic
import pytest

from proxy.inbound.messages_errors import TOO_LONG
from tests.e2e.agent import tool_call
from tests.fakes.openai_upstream import Reply
from tests.inbound.builders import chat_problem, fixture, tool_result
from tests.server.messages_support import (
    MakeMessagesProxy,
    MessagesAgent,
    make_messages_proxy,
)

__all__ = ["make_messages_proxy"]  # the fixture, imported for pytest

MODEL = "gpt-4o"
HELLO = [{"role": "user", "content": "hello"}]
READ_TOOL = {
    "name": "read",
    "description": "Read a file",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
}
NO_COMPACTION = "[tenants.default.compact]\nenabled = false\n"


async def test_a_json_answer_is_translated_with_its_usage(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    proxy = await make_messages_proxy(kind="openai")
    proxy.fake.script.append(Reply(content="Hi there.", prompt_tokens=1000, cached_tokens=600))
    async with proxy.client() as client:
        answer = await client.messages.create(
            model=MODEL,
            max_tokens=64,
            messages=HELLO,
            system="Be brief.",
            extra_body={"temperature": 0.2},
        )
    assert answer.content[0].text == "Hi there." and answer.stop_reason == "end_turn"  # type: ignore[union-attr]
    assert answer.model == MODEL and answer.id.startswith("msg_")
    usage = answer.usage
    assert (usage.input_tokens, usage.cache_read_input_tokens, usage.output_tokens) == (400, 600, 7)
    sent = dict(proxy.sent)
    assert sent.pop("prompt_cache_key").startswith("ctxproxy-")  # one per session, by default
    assert sent == {
        "model": MODEL,
        "max_completion_tokens": 64,
        "temperature": 0.2,
        "messages": [{"role": "system", "content": "Be brief."}, *HELLO],
    }


async def test_a_stream_is_translated_event_by_event(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    proxy = await make_messages_proxy(kind="openai")
    proxy.fake.script.append(Reply(content="Streamed words.", chunks=4, prompt_tokens=50))
    async with (
        proxy.client() as client,
        client.messages.stream(model=MODEL, max_tokens=64, messages=HELLO) as stream,
    ):
        kinds = [event.type async for event in stream]
        final = await stream.get_final_message()
    assert final.content[0].text == "Streamed words."  # type: ignore[union-attr]
    assert final.usage.input_tokens == 50 and final.usage.output_tokens == 7
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert proxy.sent["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("stream", [False, True])
async def test_tool_calls_come_back_as_tool_use_and_results_go_up_as_tool_messages(
    make_messages_proxy: MakeMessagesProxy, stream: bool
) -> None:
    proxy = await make_messages_proxy(kind="openai")
    calls = [tool_call("call_1", "read", path="a.py"), tool_call("call_2", "read", path="b.py")]
    proxy.fake.script.extend([Reply(content="", tool_calls=calls), Reply(content="Both read.")])
    agent = MessagesAgent(proxy.client(), proxy.app, model=MODEL)
    agent.add({"role": "user", "content": "read both"})
    if stream:
        async with agent.client.messages.stream(
            model=MODEL, max_tokens=64, messages=agent.history, tools=[READ_TOOL]
        ) as events:
            first: Any = await events.get_final_message()
        agent.add({"role": "assistant", "content": [b.model_dump(exclude_none=True)
                                                    for b in first.content]})  # fmt: skip
    else:
        first = await agent.turn(tools=[READ_TOOL])
    assert first.stop_reason == "tool_use"
    assert [(b.id, b.name, b.input) for b in first.content] == [
        ("call_1", "read", {"path": "a.py"}), ("call_2", "read", {"path": "b.py"})]  # fmt: skip
    agent.add({"role": "user", "content": [tool_result("call_1", "A"), tool_result("call_2", "B")]})
    assert (await agent.turn(tools=[READ_TOOL])).content[0].text == "Both read."
    sent = proxy.sent
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "tool", "tool"]
    assert [c["id"] for c in sent["messages"][1]["tool_calls"]] == ["call_1", "call_2"]
    assert [m["content"] for m in sent["messages"][2:]] == ["A", "B"]
    assert sent["tools"][0]["function"]["parameters"] == READ_TOOL["input_schema"]


async def test_claude_codes_request_is_a_valid_chat_request_without_its_anthropic_only_keys(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    proxy = await make_messages_proxy(kind="openai")
    recorded = fixture("main_turn_thinking")
    headers = {k: v for k, v in recorded["headers"].items() if k != "content-type"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(proxy.base_url + recorded["path"], json=recorded["body"], headers=headers) as got,
    ):
        events = await got.read()
    assert got.status == 200 and events.endswith(b'data: {"type":"message_stop"}\n\n')
    sent = proxy.sent
    assert chat_problem(sent) is None
    for key in ("thinking", "context_management", "metadata"):
        assert key not in sent
    assert "cache_control" not in json.dumps(sent)  # cache_style "openai": no markers
    assert "x-anthropic-billing-header" not in json.dumps(sent)


async def test_max_output_tokens_lowers_claude_codes_ask(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    proxy = await make_messages_proxy(kind="openai")
    capped = await make_messages_proxy(kind="openai", upstream_extra="max_output_tokens = 16384")
    body = {**fixture("main_turn_thinking")["body"], "stream": False}
    for each in (proxy, capped):
        async with aiohttp.ClientSession() as http:
            url = each.base_url + "/v1/messages"
            async with http.post(url, json=body, headers={"x-api-key": "k"}) as got:
                assert got.status == 200
    assert proxy.sent["max_completion_tokens"] == 32000
    assert capped.sent["max_completion_tokens"] == 16384


async def test_upstream_errors_are_translated_with_their_status(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    proxy = await make_messages_proxy(kind="openai", tenant_extra=NO_COMPACTION)
    limited = {"message": "Rate limit reached", "type": "requests", "param": None, "code": None}
    overflow = {"message": "This model's maximum context length is 128000 tokens.",
                "type": "invalid_request_error", "param": "messages",
                "code": "context_length_exceeded"}  # fmt: skip
    proxy.fake.script.extend([
        Reply(status=429, error=limited, headers={"Retry-After": "3"}),
        Reply(status=400, error=overflow),
    ])  # fmt: skip
    async with proxy.client() as client:
        with pytest.raises(anthropic.RateLimitError) as rate:
            await client.messages.create(model=MODEL, max_tokens=10, messages=HELLO)
        with pytest.raises(anthropic.BadRequestError) as long:
            await client.messages.create(model=MODEL, max_tokens=10, messages=HELLO)
    assert rate.value.body == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "Rate limit reached"},
    }
    assert rate.value.response.headers["retry-after"] == "3"
    assert long.value.body["error"]["message"].startswith(TOO_LONG)  # type: ignore[index]


async def test_a_cut_stream_makes_the_sdk_raise(make_messages_proxy: MakeMessagesProxy) -> None:
    proxy = await make_messages_proxy(kind="openai")
    proxy.fake.script.append(Reply(content="never finished", chunks=4, cut_after=2))
    async with proxy.client() as client:
        with pytest.raises(anthropic.APIError):
            async with client.messages.stream(model=MODEL, max_tokens=10, messages=HELLO) as s:
                await s.get_final_message()


async def test_count_tokens_estimates_what_would_be_sent(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    proxy = await make_messages_proxy(kind="openai")
    text = "word " * 400
    async with proxy.client() as client:
        counted = await client.messages.count_tokens(
            model=MODEL, messages=[{"role": "user", "content": text}]
        )
    assert len(text) // 4 < counted.input_tokens < len(text) // 4 + 40
    assert proxy.fake.received == []
