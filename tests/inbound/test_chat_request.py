"""The prepared internal body → an OpenAI-compatible upstream's request."""

from __future__ import annotations

import copy

from proxy.inbound.chat_request import chat_request, estimate_input_tokens
from proxy.inbound.messages_request import messages_to_internal
from tests.inbound.builders import chat_problem, fixture, marker_count

MARK = {"type": "ephemeral"}


def test_markers_go_and_text_only_contents_become_strings() -> None:
    internal = {
        "model": "m",
        "cache_control": MARK,
        "messages": [
            {
                "role": "system",
                "content": [
                    {"type": "text", "text": "a", "cache_control": MARK},
                    {"type": "text", "text": "b"},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
                    {"type": "text", "text": "c"},
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "1",
                        "type": "function",
                        "function": {"name": "f", "arguments": "{}"},
                        "cache_control": MARK,
                    }
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "1",
                "content": [{"type": "text", "text": "r"}],
                "cache_control": MARK,
            },
        ],
        "tools": [
            {"type": "function", "function": {"name": "f", "parameters": {}}, "cache_control": MARK}
        ],
    }
    kept = copy.deepcopy(internal)
    out = chat_request(internal)
    assert internal == kept
    assert marker_count(out) == 0
    assert out["messages"][0] == {"role": "system", "content": "a\nb"}
    assert out["messages"][1]["content"][1] == {"type": "text", "text": "c"}  # an image: parts kept
    assert out["messages"][3] == {"role": "tool", "tool_call_id": "1", "content": "r"}
    assert chat_problem(out) is None


def test_a_gateway_that_takes_markers_gets_them_and_the_parts_that_carry_them() -> None:
    internal, _ = messages_to_internal(fixture("main_turn_thinking")["body"])
    out = chat_request(internal, keep_markers=True)
    assert marker_count(out) == marker_count(internal) == 3
    assert isinstance(out["messages"][0]["content"], list)


def test_recorded_requests_become_valid_chat_requests_without_anthropic_keys() -> None:
    sent = fixture("main_turn_thinking")["body"]
    internal, _ = messages_to_internal(sent)
    out = chat_request(internal)
    assert chat_problem(out) is None
    assert not {"context_management", "thinking", "metadata", "system"} & set(out)
    assert out["max_completion_tokens"] == 32000 and out["stream"] is True


def test_the_estimate_is_a_quarter_of_the_characters() -> None:
    body = {"messages": [{"role": "user", "content": "x" * 400}], "model": "m" * 1000}
    assert (
        estimate_input_tokens(body)
        == len('{"messages":[{"role":"user","content":""}]}' + "x" * 400) // 4
    )
