"""Several rounds' Responses streams merged into one client stream: one response, items numbered
across the rounds, events numbered 0, 1, 2 …, the recall tool nowhere, and a reasoning item never
shown without the item it belongs to."""

from __future__ import annotations

import orjson
import pytest

from proxy.recall.responses_rounds import combine_responses
from proxy.recall.responses_stream import ResponsesStreamMerger
from proxy.types import JSON
from tests.fakes.responses_upstream import response_events
from tests.inbound.responses_builders import events_of, valid_response
from tests.recall.test_responses_rounds import TOOL, fn, orphans, response, said, thought


def merged(*rounds: JSON, max_rounds: int = 3, split: int = 0) -> tuple[bytes, list[int]]:
    """The client's stream of `rounds` as the loop feeds them (each stream in `split`-byte
    reads when set), and the number of recall calls each round ended with."""
    merger = ResponsesStreamMerger(tool_name=TOOL)
    out = bytearray()
    calls: list[int] = []
    for number, answer in enumerate(rounds):
        raw = response_events(answer)
        size = split or len(raw)
        for at in range(0, len(raw), size):
            out += merger.feed_bytes(raw[at : at + size])
        ended = merger.end_round()
        calls.append(len(ended.recall_calls))
        assert ended.finish_reason == "completed" and not merger.failed
        if not ended.recall_calls or number == max_rounds:
            break
    out += merger.finish()
    return bytes(out), calls


def shown_order(events: list[JSON]) -> list[JSON]:
    """The items in the order the client saw them start, checked to be numbered 0, 1, 2 …"""
    added = [e for e in events if e["type"] == "response.output_item.added"]
    assert [e["output_index"] for e in added] == list(range(len(added)))
    return [e["item"] for e in added]


ROUNDS = [
    pytest.param(
        (response("resp_1", thought("rs_1"), fn("r1")),
         response("resp_2", thought("rs_2"), said("msg_2", "Done."), tokens=200)),
        ["rs_2", "msg_2"], id="reasoning-then-recall-dropped"),
    pytest.param(
        (response("resp_1", thought("rs_1"), said("msg_1", "Checking."), thought("rs_2"),
                  fn("r1")),
         response("resp_2", said("msg_2", "Done."), tokens=200)),
        ["rs_1", "msg_1", "msg_2"], id="reasoning-then-message-released"),
    pytest.param(
        (response("resp_1", thought("rs_1"), fn("c1", "shell"), said("msg_1", "Hm."), fn("r1")),
         response("resp_2", thought("rs_2"), fn("c2", "shell"), tokens=200)),
        ["msg_1", "rs_2", "fc_c2"], id="mixed-calls"),
    pytest.param(
        (response("resp_1", fn("r1"), thought("rs_1")),
         response("resp_2", thought("rs_2"), fn("r2")),
         response("resp_3", said("msg_3", "Done."), tokens=300)),
        ["msg_3"], id="three-rounds"),
]  # fmt: skip


@pytest.mark.parametrize(("rounds", "ids"), ROUNDS)
@pytest.mark.parametrize("split", [0, 7])
def test_the_client_sees_one_response_and_no_orphan_reasoning(
    rounds: tuple[JSON, ...], ids: list[str], split: int
) -> None:
    raw, calls = merged(*rounds, split=split)
    assert calls[-1] == 0 and len(calls) == len(rounds)
    assert TOOL.encode() not in raw and b"fc_r" not in raw
    events = events_of(raw)  # each valid for the SDK, numbered 0, 1, 2 …
    kinds = [e["type"] for e in events]
    assert kinds.count("response.created") == 1 and kinds.count("response.completed") == 1
    assert kinds[-1] == "response.completed"
    order = shown_order(events)
    assert [item["id"] for item in order] == ids
    assert orphans(order, *rounds) == []
    final = valid_response(events[-1]["response"])
    assert final == combine_responses(list(rounds), tool_name=TOOL)
    assert [item["id"] for item in final["output"]] == ids
    assert final["id"] == events[0]["response"]["id"] == "resp_1"
    assert final["usage"]["input_tokens"] == sum(r["usage"]["input_tokens"] for r in rounds)


def test_a_round_without_a_call_goes_out_as_it_came_but_the_tool_definition() -> None:
    lone = response("resp_1", thought("rs_1"), said("msg_1", "Hi."))
    raw, calls = merged(lone)
    upstream = response_events(lone)
    assert calls == [0] and TOOL.encode() in upstream and TOOL.encode() not in raw
    sent, came = events_of(raw), events_of(upstream)
    assert [e["type"] for e in sent] == [e["type"] for e in came]
    assert sent[2:-1] == came[2:-1]  # items untouched; created/in_progress/completed: no tool


def test_the_last_allowed_round_still_calling_ends_with_its_client_calls() -> None:
    first = response("resp_1", thought("rs_1"), fn("r1"), fn("c1", "shell"))
    raw, calls = merged(first, max_rounds=0)
    assert calls == [1]
    events = events_of(raw)
    assert [item["id"] for item in shown_order(events)] == ["fc_c1"]
    assert events[-1]["type"] == "response.completed" and TOOL.encode() not in raw


def test_a_failed_round_sets_failed_and_is_numbered_on() -> None:
    merger = ResponsesStreamMerger(tool_name=TOOL)
    first = response_events(response("resp_1", said("msg_1", "Hi.")))
    created = first[: first.index(b"\n\n") + 2]
    failed = {"type": "response.failed", "sequence_number": 9, "response": {"id": "resp_1"}}
    out = merger.feed_bytes(created + b"data: " + orjson.dumps(failed) + b"\n\n")
    assert merger.failed and b'"sequence_number":1,' in out.split(b"\n\n")[-2]
    assert merger.end_round().finish_reason is None
