"""Usage of an Anthropic upstream's answer, read from its JSON or from its stream as it passes."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from proxy.inbound.messages_usage import MessagesUsageWatcher, usage_of_message
from proxy.usage import Usage
from tests.fakes.anthropic_upstream import stream_events, tool_use

USAGE = {
    "input_tokens": 7,
    "cache_creation_input_tokens": 100,
    "cache_read_input_tokens": 900,
    "output_tokens": 30,
}
MESSAGE: dict[str, Any] = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-x",
    "content": [{"type": "text", "text": "Reading."}],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": USAGE,
}


def recorded_stream() -> bytes:
    """The fake Anthropic API's stream for a text and a tool call, as SSE bytes."""
    reply = tool_use(("toolu_1", "Read", {"file_path": "/a"}), lead="Reading.", usage=USAGE)
    message = {**MESSAGE, "content": list(reply.content)}
    return b"".join(
        b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"
        for name, data in stream_events(message, reply)
    )


def test_a_json_answer_counts_the_whole_prompt() -> None:
    assert usage_of_message(MESSAGE) == Usage(
        prompt_tokens=1007, completion_tokens=30, cached_tokens=900, cache_creation_tokens=100
    )
    assert usage_of_message({"content": []}) is None


@given(st.lists(st.integers(1, 60), max_size=40))
def test_a_stream_gives_message_start_usage_with_message_delta_counters_over_it(
    cuts: list[int],
) -> None:
    whole, start = recorded_stream(), 0
    watcher = MessagesUsageWatcher()
    assert watcher.usage is None
    for size in cuts:
        watcher.feed(whole[start : start + size])
        start += size
    watcher.feed(whole[start:])
    assert watcher.usage == Usage(
        prompt_tokens=1007, completion_tokens=30, cached_tokens=900, cache_creation_tokens=100
    )
    assert watcher.stop_reason == "tool_use"


def test_message_delta_counters_replace_those_of_message_start() -> None:
    watcher = MessagesUsageWatcher()
    start = {
        "type": "message_start",
        "message": {**MESSAGE, "usage": {"input_tokens": 5, "output_tokens": 1}},
    }
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn"},
        "usage": {"input_tokens": 50, "cache_read_input_tokens": None, "output_tokens": 9},
    }
    watcher.feed(b"data: " + orjson.dumps(start) + b"\n\n")  # no event names: found by type
    watcher.feed(b"data: " + orjson.dumps(delta) + b"\n\n")
    assert watcher.usage == Usage(prompt_tokens=50, completion_tokens=9)
