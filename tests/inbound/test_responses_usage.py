"""Usage and the finished Response read from a Responses upstream's JSON answer and relayed
stream (fed in arbitrary cuts; deltas never parsed)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from proxy.inbound.responses_events import EventWriter, replay_response
from proxy.inbound.responses_response import chat_response_to_response, response_id_for
from proxy.inbound.responses_usage import ResponsesUsageWatcher, usage_of_response
from proxy.usage import Usage
from tests.inbound.test_messages_stream import TOOL_ANSWER
from tests.inbound.test_responses_stream import REQUEST

RESPONSE = chat_response_to_response(
    TOOL_ANSWER, request=REQUEST, response_id=response_id_for("u"), created_at=1
)
STREAM = replay_response(RESPONSE)
EXPECTED = Usage(
    prompt_tokens=900, completion_tokens=12, cached_tokens=800, cache_creation_tokens=0
)


def test_a_json_answers_usage() -> None:
    assert usage_of_response(RESPONSE) == EXPECTED
    assert usage_of_response({"id": "resp_x"}) is None
    usage = {
        "input_tokens": 50,
        "output_tokens": 5,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 40},
    }
    assert usage_of_response({"usage": usage}) == Usage(50, 5, 0, 40)


@given(st.integers(1, 97))
def test_a_streams_usage_and_response_whatever_the_cuts(split: int) -> None:
    watcher = ResponsesUsageWatcher()
    assert watcher.usage is None
    for i in range(0, len(STREAM), split):
        watcher.feed(STREAM[i : i + split])
    assert watcher.usage == EXPECTED
    assert watcher.response == RESPONSE


def test_a_terminal_event_without_output_gets_the_items_of_the_done_events() -> None:
    writer = EventWriter()
    items = RESPONSE["output"]
    stream = b"".join(
        writer.event("response.output_item.done", output_index=n, item=item)
        for n, item in reversed(list(enumerate(items)))
    )
    stream += writer.event("response.completed", response={**RESPONSE, "output": []})
    watcher = ResponsesUsageWatcher()
    watcher.feed(stream)
    assert watcher.response == RESPONSE
