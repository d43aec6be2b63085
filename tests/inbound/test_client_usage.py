"""Usage rescaled to the client's full history (`report_usage = "client"`)."""

from __future__ import annotations

import copy

import orjson
import pytest

from proxy.inbound.client_usage import (
    prompt_chars,
    rescaled_event,
    usage_scale,
    with_client_input,
)
from proxy.sse import SSEDecoder, SSEvent

USAGE = {"input_tokens": 100, "cache_read_input_tokens": 800, "cache_creation_input_tokens": 100,
         "output_tokens": 7}  # fmt: skip


def event(name: str, payload: object) -> SSEvent:
    raw = f"event: {name}\ndata: ".encode() + orjson.dumps(payload) + b"\n\n"
    return SSEDecoder().feed(raw)[0]


def test_the_whole_prompt_is_scaled_and_the_difference_goes_to_input_tokens() -> None:
    kept = copy.deepcopy(USAGE)
    out = with_client_input(USAGE, 3.0)
    assert out == {**USAGE, "input_tokens": 2100}  # (100 + 800 + 100) * 3 - 800 - 100
    assert kept == USAGE


def test_a_smaller_client_history_lowers_input_but_never_below_zero() -> None:
    assert with_client_input(USAGE, 0.95)["input_tokens"] == 50
    assert with_client_input(USAGE, 0.1)["input_tokens"] == 0


@pytest.mark.parametrize("usage", [{"output_tokens": 9}, None, {"input_tokens": "12"}])
def test_usage_without_input_tokens_is_left_alone(usage: object) -> None:
    assert with_client_input(usage, 2.0) is usage


def test_the_scale_is_client_over_sent_and_one_when_unknown() -> None:
    assert usage_scale(3000, 1000) == 3.0
    assert usage_scale(0, 1000) == usage_scale(1000, 0) == 1.0
    body = {"model": "m", "messages": [{"role": "user", "content": "abc"}], "max_tokens": 5}
    assert prompt_chars(body) == len(b'{"messages":[{"role":"user","content":"abc"}]}')


def test_message_start_and_message_delta_are_rescaled_and_other_events_pass_as_they_came() -> None:
    start = event(
        "message_start", {"type": "message_start", "message": {"id": "m", "usage": USAGE}}
    )
    out = SSEDecoder().feed(rescaled_event(start, 2.0))[0]
    assert out.event == "message_start"
    assert orjson.loads(out.data)["message"]["usage"]["input_tokens"] == 1100
    delta = event("message_delta", {"type": "message_delta", "delta": {}, "usage": USAGE})
    assert (
        orjson.loads(SSEDecoder().feed(rescaled_event(delta, 2.0))[0].data)["usage"]["input_tokens"]
        == 1100
    )
    output_only = event("message_delta", {"type": "message_delta", "usage": {"output_tokens": 3}})
    assert orjson.loads(rescaled_event(output_only, 2.0).split(b"data: ")[1]) == orjson.loads(
        output_only.data
    )
    text = event("content_block_delta", {"type": "content_block_delta", "index": 0})
    assert rescaled_event(text, 2.0) is text.raw
    broken = SSEDecoder().feed(b"event: message_start\ndata: {not json\n\n")[0]
    assert rescaled_event(broken, 2.0) is broken.raw
