"""What crosses the Messages → chat translation beyond text and tools, through `/v1/messages`
with the `anthropic` SDK in front of an OpenAI-compatible upstream: images inside tool results
reach the model in a user message; thinking blocks (Anthropic's signed data) are left out and
counted nowhere; a server's `reasoning_content` is not turned into unsigned thinking."""

from __future__ import annotations

import json
from typing import Any

from tests.inbound.builders import text, thinking, tool_result, tool_use
from tests.server.messages_support import MakeMessagesProxy, make_messages_proxy
from tests.server.reasoning_upstream import Reasoner

__all__ = ["make_messages_proxy"]  # the fixture, imported for pytest

MODEL = "gpt-4o"
SHOT = {
    "name": "screenshot",
    "description": "Screenshot a page",
    "input_schema": {"type": "object", "properties": {"url": {"type": "string"}}},
}
FUNCTION = {
    "type": "function",
    "function": {
        "name": "screenshot",
        "description": "Screenshot a page",
        "parameters": SHOT["input_schema"],
    },
}
PNG = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}}
JPG = {"type": "image", "source": {"type": "url", "url": "https://example.com/b.jpg"}}
CALLS = [tool_use("t1", "screenshot", url="a"), tool_use("t2", "screenshot", url="b")]
CHAT_CALLS = [
    {"id": f"t{n}", "type": "function",
     "function": {"name": "screenshot", "arguments": json.dumps({"url": u}, separators=(",", ":"))}}
    for n, u in ((1, "a"), (2, "b"))
]  # fmt: skip
NOTE = "in the user message after the tool results]"


def sent_without_session(proxy: Any) -> dict[str, Any]:
    sent = dict(proxy.sent)
    assert sent.pop("prompt_cache_key").startswith("ctxproxy-")
    return sent


async def test_images_in_tool_results_reach_a_chat_upstream_in_a_user_message(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    proxy = await make_messages_proxy(kind="openai")
    history = [
        {"role": "user", "content": "Screenshot a and b."},
        {"role": "assistant", "content": CALLS},
        {"role": "user", "content": [
            tool_result("t1", [text("page a"), PNG]),
            tool_result("t2", [JPG], is_error=False),
            text("Which is bluer?"),
        ]},
    ]  # fmt: skip
    async with proxy.client() as client:
        await client.messages.create(model=MODEL, max_tokens=64, messages=history, tools=[SHOT])
    assert sent_without_session(proxy) == {
        "model": MODEL,
        "max_completion_tokens": 64,
        "tools": [FUNCTION],
        "messages": [
            {"role": "user", "content": "Screenshot a and b."},
            {"role": "assistant", "content": None, "tool_calls": CHAT_CALLS},
            {"role": "tool", "tool_call_id": "t1", "content": f"page a\n[1 image: {NOTE}"},
            {"role": "tool", "tool_call_id": "t2", "content": f"[1 image: {NOTE}"},
            {"role": "user", "content": [
                {"type": "text", "text": "[image from tool call t1]"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR"}},
                {"type": "text", "text": "[image from tool call t2]"},
                {"type": "image_url", "image_url": {"url": "https://example.com/b.jpg"}},
                {"type": "text", "text": "Which is bluer?"},
            ]},
        ],
    }  # fmt: skip


async def test_thinking_blocks_are_left_out_of_a_chat_request_and_counted_nowhere(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    proxy = await make_messages_proxy(kind="openai")
    redacted = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"}
    turn = [thinking("Two pages to look at.", "c2ln" * 40), redacted, text("Looking."), *CALLS]
    results = [tool_result("t1", "page a"), tool_result("t2", "page b")]
    history = [
        {"role": "user", "content": "Screenshot a and b."},
        {"role": "assistant", "content": turn},
        {"role": "user", "content": results},
    ]
    plain = [*history[:1], {"role": "assistant", "content": turn[2:]}, *history[2:]]
    extra = {"thinking": {"type": "enabled", "budget_tokens": 2048}}
    async with proxy.client() as client:
        await client.messages.create(
            model=MODEL, max_tokens=4096, messages=history, tools=[SHOT], extra_body=extra
        )
        counted = await client.messages.count_tokens(model=MODEL, messages=history, tools=[SHOT])
        unthought = await client.messages.count_tokens(model=MODEL, messages=plain, tools=[SHOT])
    assert sent_without_session(proxy) == {
        "model": MODEL,
        "max_completion_tokens": 4096,
        "tools": [FUNCTION],
        "messages": [
            {"role": "user", "content": "Screenshot a and b."},
            {"role": "assistant", "content": "Looking.", "tool_calls": CHAT_CALLS},
            {"role": "tool", "tool_call_id": "t1", "content": "page a"},
            {"role": "tool", "tool_call_id": "t2", "content": "page b"},
        ],
    }
    assert counted.input_tokens == unthought.input_tokens > 0


async def test_reasoning_content_of_a_chat_upstream_does_not_become_a_thinking_block(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    proxy = await make_messages_proxy(kind="openai", fake=Reasoner())
    asked = [{"role": "user", "content": "6 times 7?"}]
    async with proxy.client() as client:
        answer = await client.messages.create(model=MODEL, max_tokens=64, messages=asked)
        async with client.messages.stream(model=MODEL, max_tokens=64, messages=asked) as stream:
            kinds = [event.type async for event in stream]
            streamed = await stream.get_final_message()
    for message in (answer, streamed):
        assert [block.model_dump() for block in message.content] == [
            {"type": "text", "text": "42.", "citations": None}
        ]
    assert "thinking" not in json.dumps(kinds)
