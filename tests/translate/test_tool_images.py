"""A chat request whose tool results had images: each tool message keeps its text with a note,
the images follow in a user message after the run of tool messages."""

from __future__ import annotations

import copy
from typing import Any

from proxy.translate.anthropic_request import to_messages_request
from proxy.translate.tool_images import keep_tool_images, move_tool_images
from tests.fakes.anthropic_rules import request_problem

PNG = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR"}}
JPG = {"type": "image_url", "image_url": {"url": "https://example.com/chart.jpg"}}
ASKED = {"role": "user", "content": "screenshot both"}
CALLS = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": "t1", "type": "function", "function": {"name": "shot", "arguments": "{}"}},
        {"id": "t2", "type": "function", "function": {"name": "shot", "arguments": "{}"}},
    ],
}


def tool(call_id: str, content: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def test_images_follow_the_tool_messages_in_a_user_message_naming_each_call() -> None:
    messages = [ASKED, CALLS, tool("t1", "page one"), tool("t2", "")]
    before = copy.deepcopy(messages)
    out = move_tool_images(messages, {2: [PNG], 3: [JPG, PNG]})
    assert out == [
        ASKED,
        CALLS,
        tool("t1", "page one\n[1 image: in the user message after the tool results]"),
        tool("t2", "[2 images: in the user message after the tool results]"),
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "[image from tool call t1]"},
                PNG,
                {"type": "text", "text": "[2 images from tool call t2]"},
                JPG,
                PNG,
            ],
        },
    ]
    assert messages == before


def test_the_images_lead_the_user_message_that_follows_the_tool_messages() -> None:
    after = {"role": "user", "content": "now compare them", "name": "me"}
    out = move_tool_images([ASKED, CALLS, tool("t1", "a"), tool("t2", "b"), after], {3: [JPG]})
    assert out[2] == tool("t1", "a")
    assert out[4:] == [
        {
            "role": "user",
            "name": "me",
            "content": [
                {"type": "text", "text": "[image from tool call t2]"},
                JPG,
                {"type": "text", "text": "now compare them"},
            ],
        }
    ]


def test_an_assistant_message_after_the_tool_messages_comes_after_the_images() -> None:
    answer = {"role": "assistant", "content": "I see a chart."}
    out = move_tool_images([CALLS, tool("t1", "x"), answer], {1: [JPG]})
    assert [m["role"] for m in out] == ["assistant", "tool", "user", "assistant"]
    assert out[3] is answer


def test_a_tool_content_of_parts_gets_the_note_as_one_more_part() -> None:
    marked = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
    out = move_tool_images([CALLS, tool("t1", [marked])], {1: [PNG]})
    note = {"type": "text", "text": "[1 image: in the user message after the tool results]"}
    assert out[1]["content"] == [marked, note]


def test_nothing_moves_without_images_or_for_a_message_that_is_not_a_tool_result() -> None:
    messages = [ASKED, CALLS, tool("t1", "a")]
    out = move_tool_images(messages, {0: [PNG], 2: []})
    assert out == messages and all(a is b for a, b in zip(out, messages, strict=True))


def test_for_anthropic_the_images_stay_in_their_tool_results_after_the_text() -> None:
    messages = [ASKED, CALLS, tool("t1", "page one"), tool("t2", "")]
    before = copy.deepcopy(messages)
    out = keep_tool_images(messages, {2: [PNG], 3: [JPG], 0: [PNG]})
    assert out[:2] == [ASKED, CALLS] and messages == before
    assert out[2:] == [
        tool("t1", [{"type": "text", "text": "page one"}, PNG]),
        tool("t2", [JPG]),
    ]
    request = to_messages_request({"model": "claude-x", "messages": out, "tools": []})
    assert request_problem(request) is None
    first, second = request["messages"][-1]["content"]
    assert [b["type"] for b in first["content"]] == ["text", "image"]
    assert first["content"][1]["source"] == {
        "type": "base64", "media_type": "image/png", "data": "iVBOR"
    }  # fmt: skip
    assert second["content"] == [
        {"type": "image", "source": {"type": "url", "url": "https://example.com/chart.jpg"}}
    ]
