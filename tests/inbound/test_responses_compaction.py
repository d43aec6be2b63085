"""The compaction contract: which requests ask for one, and exactly one compaction item back —
valid for the openai SDK as a Response, as a stream (the shape Codex's remote compaction v2
checks) and as a `response.compaction` object."""

from __future__ import annotations

from typing import Any

from openai.types.responses import CompactedResponse

from proxy.inbound.compaction_handle import sign_handle
from proxy.inbound.responses_compaction import (
    compacted_response,
    compaction_item,
    compaction_response,
    handles_in,
    is_compaction_request,
    without_trigger,
)
from proxy.inbound.responses_events import replay_response
from proxy.inbound.responses_response import response_id_for
from tests.inbound.responses_builders import body, events_of, fixture, said, user, valid_response

JSON = dict[str, Any]
TOKEN = sign_handle(
    secret=b"k" * 32, tenant="default", prefix_hash="ab12", summary_id="s1", expires_at=2e9
)
RID = response_id_for("compact-1")
USAGE = {"prompt_tokens": 3000, "completion_tokens": 200, "total_tokens": 3200}


def test_a_trigger_item_marks_a_compaction_request_and_is_left_out_of_the_conversation() -> None:
    sent = fixture("codex_compaction_trigger")["body"]
    assert is_compaction_request(sent)
    assert not is_compaction_request(fixture("codex_turn")["body"])
    assert not is_compaction_request({"model": "m", "input": "compaction_trigger"})
    conversation = without_trigger(sent)
    assert conversation["input"] == sent["input"][:-1]
    assert sent["input"][-1] == {"type": "compaction_trigger"}


def test_handles_are_found_only_in_ctxproxys_compaction_items() -> None:
    ours = {"type": "compaction", "id": "cmp_1", "encrypted_content": TOKEN}
    theirs = {"type": "compaction", "id": "cmp_2", "encrypted_content": "gAAAAAB-openai"}
    assert handles_in(body(user("a"), theirs, ours, said("b"))) == [(2, TOKEN)]


def test_the_answer_to_a_trigger_is_one_compaction_item_streamed_as_codex_expects() -> None:
    item = compaction_item(TOKEN, response_id=RID)
    assert item == {"id": f"cmp_{RID[5:]}_0", "type": "compaction", "encrypted_content": TOKEN}
    request = fixture("codex_compaction_trigger")["body"]
    response = valid_response(
        compaction_response(
            request, item=item, response_id=RID, created_at=1_700_000_000, usage=USAGE
        )
    )
    assert response["output"] == [item] and response["status"] == "completed"
    events = events_of(replay_response(response))
    assert [e["type"] for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert done == [item]  # exactly one compaction item (Codex fails on any other count)
    assert events[-1]["response"]["usage"]["input_tokens"] == 3000


def test_the_compact_endpoint_answers_a_response_compaction_object() -> None:
    item = compaction_item(TOKEN, response_id=RID)
    out = compacted_response(item=item, response_id=RID, created_at=1_700_000_000, usage=USAGE)
    CompactedResponse.model_validate(out)
    assert out["object"] == "response.compaction" and out["output"] == [item]
    assert out["usage"]["output_tokens"] == 200
