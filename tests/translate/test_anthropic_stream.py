"""Golden and property tests of Anthropic stream events → chat.completion.chunk SSE bytes."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionChunk

from proxy.sse import SSEDecoder
from proxy.translate.anthropic_stream import AnthropicStreamTranslator
from tests.fakes.anthropic_upstream import Reply, stream_events, text, tool_use

Event = tuple[str, dict[str, Any]]
USAGE = {
    "input_tokens": 7,
    "cache_creation_input_tokens": 100,
    "cache_read_input_tokens": 900,
    "output_tokens": 30,
}


def events_of(reply: Reply) -> list[Event]:
    """The event stream the fake API would send for `reply`."""
    message = {
        "id": "msg_s1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": list(reply.content),
        "stop_reason": reply.stop_reason,
        "stop_sequence": None,
        "usage": reply.usage,
    }
    return list(stream_events(message, reply))


def translate(events: Iterable[Event], *, include_usage: bool = False) -> list[str]:
    """The `data:` payloads the translator sends, each checked to be one whole SSE event."""
    translator = AnthropicStreamTranslator(
        model="claude-sonnet", include_usage=include_usage, created=5
    )
    out = b"".join(translator.feed(name, data) for name, data in events)
    decoded = SSEDecoder().feed(out)
    assert b"".join(event.raw for event in decoded) == out
    return [event.data for event in decoded]


def chunks(payloads: list[str]) -> list[dict[str, Any]]:
    parsed = [json.loads(p) for p in payloads if p != "[DONE]"]
    for chunk in parsed:
        ChatCompletionChunk.model_validate(chunk)
    return parsed


def test_text_stream_role_first_then_deltas_then_finish_then_done() -> None:
    payloads = translate(events_of(text("Hello, streaming world!")))
    assert payloads[-1] == "[DONE]"
    parsed = chunks(payloads)
    assert all(
        c["id"] == "msg_s1" and c["model"] == "claude-sonnet" and c["created"] == 5 for c in parsed
    )
    deltas = [c["choices"][0]["delta"] for c in parsed]
    assert deltas[0] == {"role": "assistant", "content": ""}
    assert "".join(d.get("content") or "" for d in deltas) == "Hello, streaming world!"
    assert [c["choices"][0]["finish_reason"] for c in parsed] == [None] * (len(parsed) - 1) + [
        "stop"
    ]


def test_parallel_tool_calls_get_stable_indexes_and_id_name_first() -> None:
    reply = tool_use(
        ("toolu_a", "ls", {"path": "/", "long": "x" * 30}),
        ("toolu_b", "grep", {"pattern": "needle", "files": ["a", "b"]}),
        lead="Looking.",
    )
    parsed = chunks(translate(events_of(reply)))
    calls = [call for c in parsed for call in c["choices"][0]["delta"].get("tool_calls") or []]
    firsts = [call for call in calls if "id" in call]
    assert firsts == [
        {
            "index": 0,
            "id": "toolu_a",
            "type": "function",
            "function": {"name": "ls", "arguments": ""},
        },
        {
            "index": 1,
            "id": "toolu_b",
            "type": "function",
            "function": {"name": "grep", "arguments": ""},
        },
    ]
    for index, block in enumerate(reply.content[1:]):
        arguments = "".join(c["function"]["arguments"] for c in calls if c["index"] == index)
        assert json.loads(arguments) == block["input"]
    assert parsed[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_a_tool_with_no_input_deltas_gets_empty_object_arguments() -> None:
    events = [
        e
        for e in events_of(tool_use(("toolu_1", "now", {})))
        if e[1].get("delta", {}).get("type") != "input_json_delta"
    ]
    calls = [
        call
        for c in chunks(translate(events))
        for call in c["choices"][0]["delta"].get("tool_calls") or []
    ]
    assert "".join(c["function"]["arguments"] for c in calls) == "{}"


def test_usage_chunk_when_asked_with_cumulative_message_delta_usage() -> None:
    parsed = chunks(translate(events_of(text("hi", usage=USAGE)), include_usage=True))
    assert parsed[-1]["choices"] == []
    assert parsed[-1]["usage"] == {
        "prompt_tokens": 1007,
        "completion_tokens": 30,
        "total_tokens": 1037,
        "prompt_tokens_details": {"cached_tokens": 900},
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 900,
    }
    assert parsed[-2]["choices"][0]["finish_reason"] == "stop"


def test_no_usage_chunk_unless_asked() -> None:
    assert all(c["choices"] for c in chunks(translate(events_of(text("hi")))))


def test_error_event_mid_stream_becomes_an_in_band_error_and_ends_the_stream() -> None:
    events = events_of(
        Reply(
            content=({"type": "text", "text": "partial"}, {"type": "text", "text": "more"}),
            error_after=1,
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))  # anything after an error is ignored
    payloads = translate(events)
    assert "[DONE]" not in payloads
    assert json.loads(payloads[-1]) == {
        "error": {
            "message": "Overloaded",
            "type": "overloaded_error",
            "param": None,
            "code": "overloaded",
        }
    }


def test_thinking_deltas_become_reasoning_content_and_pings_are_ignored() -> None:
    reply = Reply(
        content=(
            {"type": "thinking", "thinking": "let me think", "signature": "s"},
            {"type": "text", "text": "42"},
        )
    )
    deltas = [c["choices"][0]["delta"] for c in chunks(translate(events_of(reply)))]
    assert "".join(d.get("reasoning_content") or "" for d in deltas) == "let me think"
    assert "".join(d.get("content") or "" for d in deltas) == "42"
    assert translate([("ping", {"type": "ping"})]) == []


def test_fail_ends_the_stream_once() -> None:
    translator = AnthropicStreamTranslator(model="m")
    first = translator.fail("idle", "upstream_error", "upstream_timeout")
    assert json.loads(first[len(b"data: ") :])["error"]["code"] == "upstream_timeout"
    assert translator.done and translator.fail("again") == b""


json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(),
    ),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
tool_inputs = st.dictionaries(st.text(max_size=8), json_values, max_size=5)


@settings(max_examples=200, deadline=None)
@given(st.lists(tool_inputs, min_size=1, max_size=3), st.data())
def test_concatenated_argument_deltas_parse_to_the_tool_input(
    inputs: list[dict[str, Any]], data: st.DataObject
) -> None:
    events: list[Event] = [
        ("message_start", {"type": "message_start", "message": {"id": "m", "usage": {}}})
    ]
    for index, tool_input in enumerate(inputs):
        whole = json.dumps(tool_input)
        cuts = sorted(data.draw(st.sets(st.integers(0, len(whole)), max_size=6)))
        pieces = [whole[a:b] for a, b in zip([0, *cuts], [*cuts, len(whole)], strict=True)]
        block = {"type": "tool_use", "id": f"toolu_{index}", "name": "f", "input": {}}
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": block},
            )
        )
        for piece in pieces:
            delta = {"type": "input_json_delta", "partial_json": piece}
            events.append(
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}},
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    calls = [
        call
        for c in chunks(translate(events))
        for call in c["choices"][0]["delta"].get("tool_calls") or []
    ]
    for index, tool_input in enumerate(inputs):
        arguments = "".join(c["function"]["arguments"] for c in calls if c["index"] == index)
        assert json.loads(arguments) == tool_input
