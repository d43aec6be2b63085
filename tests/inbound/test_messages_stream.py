"""An OpenAI upstream's chat SSE → the Messages event stream: every event a valid SDK event,
and the SDK's own accumulator builds the same message the JSON translation gives."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pydantic
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import Message, RawMessageStreamEvent
from hypothesis import given
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionChunk

from proxy.inbound.chat_stream import CUT_SHORT
from proxy.inbound.messages_response import chat_response_to_messages
from proxy.inbound.messages_stream import MessagesStreamTranslator
from proxy.sse import SSEDecoder

JSON = dict[str, Any]
EVENTS = pydantic.TypeAdapter(RawMessageStreamEvent)
USAGE = {
    "prompt_tokens": 900,
    "completion_tokens": 12,
    "total_tokens": 912,
    "prompt_tokens_details": {"cached_tokens": 800},
}


def chunk(delta: JSON | None = None, finish: str | None = None, **extra: Any) -> bytes:
    """One recorded-shape `chat.completion.chunk` event, checked against the openai SDK."""
    payload: JSON = {
        "id": "chatcmpl-42",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "gpt-4o",
        "choices": []
        if delta is None
        else [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        **extra,
    }
    ChatCompletionChunk.model_validate(payload)
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def call(index: int, call_id: str | None = None, name: str | None = None, args: str = "") -> JSON:
    function: JSON = {"arguments": args}
    if name is not None:
        function["name"] = name
    out: JSON = {"index": index, "function": function}
    if call_id is not None:
        out.update(id=call_id, type="function")
    return out


TOOL_STREAM = [
    chunk({"role": "assistant", "content": ""}),
    chunk({"content": "Let me "}),
    chunk({"content": "check."}),
    chunk({"tool_calls": [call(0, "call_a", "Read")]}),
    chunk({"tool_calls": [call(0, args='{"file_')]}),
    chunk({"tool_calls": [call(0, args='path": "/a"}')]}),
    chunk({"tool_calls": [call(1, "call_b", "Bash", '{"command":"ls"}')]}),
    chunk({}, "tool_calls"),
    chunk(None, usage=USAGE),
    b"data: [DONE]\n\n",
]
TOOL_ANSWER = {
    "id": "chatcmpl-42",
    "object": "chat.completion",
    "created": 1_700_000_000,
    "model": "gpt-4o",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": "Let me check.",
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "Read", "arguments": '{"file_path": "/a"}'},
                    },
                    {
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "Bash", "arguments": '{"command":"ls"}'},
                    },
                ],
            },
        }
    ],
    "usage": USAGE,
}


def translate(chunks: list[bytes], *, end: bool = True) -> tuple[list[tuple[str, JSON]], bytes]:
    translator = MessagesStreamTranslator(model="claude-sonnet-4-5")
    out = b"".join(translator.feed(c) for c in chunks)
    if end:
        out += translator.finish()
    assert translator.done or not end
    decoded = SSEDecoder().feed(out)
    assert b"".join(e.raw for e in decoded) == out  # whole events only
    return [(e.event, json.loads(e.data)) for e in decoded], out


def accumulated(events: list[tuple[str, JSON]]) -> Message:
    """The message the anthropic SDK's stream helper builds from `events` (each validated)."""
    snapshot: Any = None
    buffers: dict[int, bytes] = {}
    for name, data in events:
        assert name == data["type"]
        if name == "ping":
            continue
        event = EVENTS.validate_python(data)
        snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=buffers)
    return Message.model_validate(snapshot.to_dict())


def test_text_and_tool_calls_stream_as_the_event_sequence_the_sdk_expects() -> None:
    events, _ = translate(TOOL_STREAM)
    assert [name for name, _ in events] == [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    message = accumulated(events)
    expected = chat_response_to_messages(TOOL_ANSWER, model="claude-sonnet-4-5")
    assert message.model_dump(exclude_none=True) == Message.model_validate(expected).model_dump(
        exclude_none=True
    )
    assert events[-2][1]["usage"] == {
        "input_tokens": 100,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 800,
        "output_tokens": 12,
    }


@given(st.lists(st.integers(1, 40), max_size=30))
def test_how_the_bytes_are_cut_never_changes_the_events(cuts: list[int]) -> None:
    whole = b"".join(TOOL_STREAM)
    pieces, start = [], 0
    for size in cuts:
        pieces.append(whole[start : start + size])
        start += size
    pieces.append(whole[start:])
    assert translate(pieces)[1] == translate(TOOL_STREAM)[1]


def test_a_stream_without_done_ends_cleanly_after_its_finish_reason() -> None:
    events, _ = translate([chunk({"content": "hi"}), chunk({}, "length")])
    assert events[-2][1]["delta"] == {"stop_reason": "max_tokens", "stop_sequence": None}
    assert accumulated(events).content[0].text == "hi"  # type: ignore[union-attr]


def test_a_stream_that_stops_short_ends_with_an_error_event() -> None:
    events, _ = translate([chunk({"content": "hal"})])
    assert events[-1] == (
        "error",
        {"type": "error", "error": {"type": "api_error", "message": CUT_SHORT}},
    )
    assert "message_stop" not in [name for name, _ in events]


def test_an_in_band_upstream_error_becomes_an_anthropic_error_event() -> None:
    bad = b'data: {"error": {"message": "Rate limit reached", "type": "rate_limit_error"}}\n\n'
    events, _ = translate([chunk({"content": "x"}), bad, chunk({"content": "ignored"})])
    assert events[-1] == (
        "error",
        {"type": "error", "error": {"type": "rate_limit_error", "message": "Rate limit reached"}},
    )


def test_an_empty_answer_still_starts_and_stops_the_message() -> None:
    events, _ = translate([b"data: [DONE]\n\n"])
    assert [name for name, _ in events] == [
        "message_start",
        "ping",
        "message_delta",
        "message_stop",
    ]
    assert accumulated(events).content == []


def test_late_fragments_of_an_interleaved_call_keep_their_block_index() -> None:
    events, _ = translate(
        [
            chunk({"tool_calls": [call(0, "call_a", "f", '{"a":')]}),
            chunk({"tool_calls": [call(1, "call_b", "g", '{"b":2}')]}),
            chunk({"tool_calls": [call(0, args="1}")]}),
            chunk({}, "tool_calls"),
        ]
    )
    message = accumulated(events)
    assert [b.input for b in message.content] == [{"a": 1}, {"b": 2}]  # type: ignore[union-attr]


def test_usage_is_read_as_it_passes() -> None:
    translator = MessagesStreamTranslator(model="m")
    assert translator.usage is None
    translator.feed(b"".join(TOOL_STREAM))
    usage = translator.usage
    assert usage is not None and (usage.prompt_tokens, usage.cached_tokens) == (900, 800)


def test_failed_tells_an_error_end_from_a_whole_answer() -> None:
    whole = MessagesStreamTranslator(model="m")
    whole.feed(chunk({"content": "hi"}) + chunk({}, "stop") + b"data: [DONE]\n\n")
    assert whole.done and not whole.failed
    short = MessagesStreamTranslator(model="m")
    short.feed(chunk({"content": "hal"}))
    short.finish()
    assert short.done and short.failed
