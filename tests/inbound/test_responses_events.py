"""A finished Response replayed as the API's event stream: valid events, and the SDK's stream
accumulator rebuilds the same Response."""

from __future__ import annotations

from typing import Any

from proxy.inbound.responses_events import EventWriter, in_progress, replay_response
from proxy.inbound.responses_response import chat_response_to_response, response_id_for
from tests.inbound.responses_builders import events_of, valid_response
from tests.inbound.test_messages_stream import TOOL_ANSWER
from tests.inbound.test_responses_stream import (
    REQUEST,
    accumulated,
    valid_and_dumped,
    without_parsed,
)

JSON = dict[str, Any]
RID = response_id_for("replay")


def test_a_json_answer_replayed_as_events_accumulates_to_itself() -> None:
    response = valid_response(
        chat_response_to_response(TOOL_ANSWER, request=REQUEST, response_id=RID, created_at=1)
    )
    events = events_of(replay_response(response))
    assert events[-1] == {
        "type": "response.completed",
        "sequence_number": len(events) - 1,
        "response": response,
    }
    texts = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    assert texts == ["Let me check."]
    assert without_parsed(accumulated(events)) == valid_and_dumped(response)


def test_a_refusal_and_an_incomplete_status_replay_with_their_own_events() -> None:
    refusal = {"type": "refusal", "refusal": "No."}
    item = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "incomplete",
        "content": [refusal],
    }
    response = valid_response(
        {
            **chat_response_to_response(
                TOOL_ANSWER, request=REQUEST, response_id=RID, created_at=1
            ),
            "status": "incomplete",
            "incomplete_details": {"reason": "content_filter"},
            "output": [item],
        }
    )
    kinds = [e["type"] for e in events_of(replay_response(response))]
    assert "response.refusal.delta" in kinds and "response.refusal.done" in kinds
    assert kinds[-1] == "response.incomplete"


def test_items_are_announced_empty_and_in_progress() -> None:
    call = {
        "id": "fc_1",
        "type": "function_call",
        "call_id": "c",
        "name": "f",
        "arguments": "{}",
        "status": "completed",
    }
    assert in_progress(call) == {**call, "arguments": "", "status": "in_progress"}
    writer = EventWriter()
    writer.event("response.in_progress", response={})
    assert writer.sequence == 1
