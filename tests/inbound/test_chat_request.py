"""The prepared internal body → an OpenAI-compatible upstream's request."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings

from proxy.inbound.chat_request import chat_request, estimate_input_tokens
from proxy.inbound.messages_request import messages_to_internal
from tests.inbound.builders import chat_problem, fixture, marker_count
from tests.inbound.strategies import bodies

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


def blocks_of(sent: dict[str, Any]) -> list[dict[str, Any]]:
    """Every block of the messages, and those inside tool results."""
    found: list[dict[str, Any]] = []
    for message in sent["messages"]:
        content = message["content"]
        for block in content if isinstance(content, list) else [{"type": "text", "text": content}]:
            found.append(block)
            if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                found += block["content"]
    return found


def texts_of(request: dict[str, Any]) -> list[str]:
    found: list[str] = []
    for message in request["messages"]:
        content = message.get("content")
        if isinstance(content, str):
            found.append(content)
        elif isinstance(content, list):
            found += [p["text"] for p in content if p.get("type") == "text"]
    return found


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(bodies())
def test_translated_requests_keep_every_text_tool_call_and_result(sent: dict[str, Any]) -> None:
    internal, _ = messages_to_internal(sent)
    request = chat_request(internal)
    blocks = blocks_of(sent)
    calls = [c for m in request["messages"] for c in m.get("tool_calls") or ()]
    assert [c["id"] for c in calls] == [b["id"] for b in blocks if b["type"] == "tool_use"]
    results = [m["tool_call_id"] for m in request["messages"] if m["role"] == "tool"]
    assert results == [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
    texts = "\n".join(texts_of(request))
    assert all(b["text"] in texts for b in blocks if b["type"] == "text")
    shape = {k: request[k] for k in ("messages", "tools") if k in request}  # params: as sent
    assert chat_problem({**shape, "model": "m"}) is None


def test_max_output_tokens_lowers_a_larger_ask_and_leaves_a_smaller_one() -> None:
    body = {"model": "m", "messages": [], "max_completion_tokens": 32000}
    assert chat_request(body, max_output_tokens=16384)["max_completion_tokens"] == 16384
    assert chat_request(body, max_output_tokens=64000)["max_completion_tokens"] == 32000
    assert chat_request(body)["max_completion_tokens"] == 32000
    assert body["max_completion_tokens"] == 32000


def test_images_of_tool_results_follow_the_tool_messages_without_markers() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://x/y.png"}, "cache_control": MARK}
    call = {"id": "t1", "type": "function", "function": {"name": "shot", "arguments": "{}"}}
    internal = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "shoot"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "t1", "content": [{"type": "text", "text": "ok"}]},
        ],
    }
    before = copy.deepcopy(internal)
    for keep in (False, True):
        sent = chat_request(internal, keep_markers=keep, images={2: [image]})
        assert sent["messages"][2:] == [
            {
                "role": "tool",
                "tool_call_id": "t1",
                "content": "ok\n[1 image: in the user message after the tool results]",
            },
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "[image from tool call t1]"},
                    {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
                ],
            },
        ]
        assert chat_problem(sent) is None
    assert internal == before
