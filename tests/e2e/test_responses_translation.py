"""What crosses the Responses → chat translation beyond text and tools, through `/v1/responses`
with the `openai` SDK in front of a chat-completions upstream: the images of a
`function_call_output` reach the model in a user message; `reasoning` items (OpenAI's encrypted
data) are left out; a server's `reasoning_content` does not come back as a reasoning item."""

from __future__ import annotations

from typing import Any

from tests.e2e.conftest import MakeAnthropicProxy
from tests.fakes.openai_upstream import FakeOpenAI
from tests.inbound import responses_builders as r
from tests.server.conftest import MakeProxy
from tests.server.reasoning_upstream import Reasoner

MODEL = "gpt-5"
SHOT_CALLS = [
    {"id": f"c{n}", "type": "function", "function": {"name": "shot", "arguments": "{}"}}
    for n in (1, 2)
]
NOTE = "in the user message after the tool results]"


def sent_without_session(fake: FakeOpenAI) -> dict[str, Any]:
    sent = dict(fake.chat[-1].body)
    sent.pop("prompt_cache_key", None)
    return sent


async def test_images_of_a_function_call_output_reach_a_chat_upstream_in_a_user_message(
    make_proxy: MakeProxy,
) -> None:
    proxy = await make_proxy(workspace=False)
    image = {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "high"}
    data = {"type": "input_image", "image_url": "data:image/png;base64,iVBOR", "detail": "auto"}
    items = [
        r.user("Screenshot both."),
        r.reasoning("rs_1", "gAAAAABsecret"),
        r.call("c1", "shot"),
        r.call("c2", "shot"),
        r.output("c1", [{"type": "input_text", "text": "page a"}, image]),
        r.output("c2", [data]),
    ]
    async with proxy.client() as client:
        await client.responses.create(model=MODEL, input=items)  # type: ignore[arg-type]
    assert sent_without_session(proxy.fake) == {
        "model": MODEL,
        "messages": [
            {"role": "user", "content": "Screenshot both."},
            {"role": "assistant", "content": None, "tool_calls": SHOT_CALLS},
            {"role": "tool", "tool_call_id": "c1", "content": f"page a\n[1 image: {NOTE}"},
            {"role": "tool", "tool_call_id": "c2", "content": f"[1 image: {NOTE}"},
            {"role": "user", "content": [
                {"type": "text", "text": "[image from tool call c1]"},
                {"type": "image_url",
                 "image_url": {"url": "https://example.com/a.png", "detail": "high"}},
                {"type": "text", "text": "[image from tool call c2]"},
                {"type": "image_url",
                 "image_url": {"url": "data:image/png;base64,iVBOR", "detail": "auto"}},
            ]},
        ],
    }  # fmt: skip
    assert "gAAAAABsecret" not in str(proxy.fake.chat[-1].raw)


async def test_images_of_a_function_call_output_reach_an_anthropic_upstream_in_its_tool_result(
    make_anthropic_proxy: MakeAnthropicProxy,
) -> None:
    proxy = await make_anthropic_proxy()
    image = {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "high"}
    data = {"type": "input_image", "image_url": "data:image/png;base64,iVBOR", "detail": "auto"}
    items = [
        r.user("Screenshot both."),
        r.call("c1", "shot"),
        r.call("c2", "shot"),
        r.output("c1", [{"type": "input_text", "text": "page a"}, image]),
        r.output("c2", [data]),
    ]
    async with proxy.client() as client:
        await client.responses.create(model="claude-x", input=items, tools=[SHOT])  # type: ignore[arg-type]
    results = proxy.fake.received[-1].body["messages"][-1]["content"]
    assert [(b["type"], b["tool_use_id"]) for b in results] == [
        ("tool_result", "c1"), ("tool_result", "c2")
    ]  # fmt: skip
    assert results[0]["content"] == [
        {"type": "text", "text": "page a"},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
    ]
    assert results[1]["content"] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}}
    ]


SHOT = {"type": "function", "name": "shot", "parameters": {"type": "object", "properties": {}}}


async def test_reasoning_content_of_a_chat_upstream_is_not_returned_as_a_reasoning_item(
    make_proxy: MakeProxy,
) -> None:
    proxy = await make_proxy(workspace=False, fake=Reasoner())
    async with proxy.client() as client:
        answer = await client.responses.create(model=MODEL, input="6 times 7?")
        async with client.responses.stream(model=MODEL, input="6 times 7?") as stream:
            kinds = [event.type async for event in stream]
            streamed = await stream.get_final_response()
    for response in (answer, streamed):
        assert [item.type for item in response.output] == ["message"]
        assert response.output_text == "42."
    assert not any("reasoning" in kind for kind in kinds)
