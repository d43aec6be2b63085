"""An Anthropic event stream passed on to the client: whole events as they came, usage read,
the end and errors seen, usage rescaled only when asked."""

from __future__ import annotations

import json

import orjson
import pytest

from proxy.inbound.messages_events import PassedEvents
from proxy.sse import SSEDecoder
from proxy.usage import Usage
from tests.fakes.anthropic_upstream import Reply, stream_events

REPLY = Reply(
    content=({"type": "thinking", "thinking": "hm", "signature": "c2ln"},
             {"type": "text", "text": "Hello there, world."}),
    usage={"input_tokens": 10, "cache_read_input_tokens": 90, "output_tokens": 4},
)  # fmt: skip
MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
           "content": list(REPLY.content), "stop_reason": "end_turn", "stop_sequence": None,
           "usage": REPLY.usage}  # fmt: skip
STREAM = b"".join(
    f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
    for name, data in stream_events(MESSAGE, REPLY)
)


@pytest.mark.parametrize("size", [1, 7, 64, len(STREAM)])
def test_the_stream_passes_byte_for_byte_in_any_chunking(size: int) -> None:
    events = PassedEvents()
    out = b"".join(events.feed(STREAM[i : i + size]) for i in range(0, len(STREAM), size))
    assert out == STREAM
    assert events.complete and not events.failed
    assert events.usage == Usage(prompt_tokens=100, completion_tokens=4, cached_tokens=90)


def test_a_partial_event_is_held_back_until_it_is_whole() -> None:
    events = PassedEvents()
    cut = STREAM.index(b"event: ping")
    assert events.feed(STREAM[: cut + 5]) == STREAM[:cut]
    assert events.pending == b"event"
    assert not events.complete


def test_nothing_after_message_stop_or_an_error_is_passed() -> None:
    events = PassedEvents()
    assert events.feed(STREAM + b"event: ping\ndata: {}\n\n") == STREAM
    assert events.fail("late") == b""
    failing = PassedEvents()
    error = b'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error"}}\n\n'
    head = STREAM[: STREAM.index(b"event: content_block_start")]
    out = failing.feed(head + error + STREAM[len(head) :])
    assert out == head + error and failing.failed and not failing.complete


def test_fail_ends_a_cut_stream_with_the_apis_error_event() -> None:
    events = PassedEvents()
    events.feed(STREAM[:100])
    out = SSEDecoder().feed(events.fail("upstream stream cut"))[0]
    assert out.event == "error"
    assert orjson.loads(out.data) == {
        "type": "error",
        "error": {"type": "api_error", "message": "upstream stream cut"},
    }
    assert events.failed


def test_with_a_scale_only_the_usage_events_change_and_usage_is_read_as_sent() -> None:
    events = PassedEvents(scale=3.0)
    out = events.feed(STREAM)
    decoded = SSEDecoder().feed(out)
    start = orjson.loads(decoded[0].data)
    assert start["message"]["usage"]["input_tokens"] == 210  # (10 + 90) * 3 - 90
    assert [e.raw for e in decoded[1:]] == [e.raw for e in SSEDecoder().feed(STREAM)[1:]]
    assert events.usage is not None and events.usage.prompt_tokens == 100
