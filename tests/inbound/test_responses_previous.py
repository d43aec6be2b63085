"""`previous_response_id`: a continued request is expanded to the whole conversation."""

from __future__ import annotations

import copy

from proxy.inbound.responses_previous import (
    StoredResponse,
    expand_previous,
    record_from_json,
    record_json,
    stored_response,
)
from tests.inbound.responses_builders import body, call, output, said, user, wire_problem


def test_a_continued_request_is_the_records_input_its_output_then_its_own_input() -> None:
    first = body(user("List files."), instructions="Be brief.")
    answer = {"id": "resp_1", "output": [call("c1", command="ls")]}
    record = stored_response(first, answer)
    assert record == StoredResponse("resp_1", (user("List files."),), (call("c1", command="ls"),))
    follow = body(
        output("c1", "a.py"), previous_response_id="resp_1", instructions="Be terse.", store=False
    )
    kept = copy.deepcopy(follow)
    expanded = expand_previous(follow, record)
    assert follow == kept
    assert expanded == {
        "model": "gpt-5-codex",
        "input": [user("List files."), call("c1", command="ls"), output("c1", "a.py")],
        "instructions": "Be terse.",
        "store": False,
    }
    assert wire_problem(expanded) is None


def test_a_string_input_continues_as_a_user_message_and_records_round_trip() -> None:
    record = StoredResponse("resp_2", (user("hi"),), (said("Hello."),))
    follow = {"model": "m", "input": "and now?", "previous_response_id": "resp_2"}
    assert expand_previous(follow, record)["input"][-1] == {"role": "user", "content": "and now?"}
    assert record_from_json(record_json(record)) == record
    assert record_from_json({"id": 3}) is None
    assert record_from_json({"id": "r", "input": "x", "output": []}) is None
