"""The recall rounds in the Messages API's form: a round read, the turns the next round appends,
the next request, and the rounds' messages combined into the client's one answer."""

from __future__ import annotations

import copy
from typing import Any

import pydantic
import pytest
from anthropic.types import Message

from proxy.recall.messages_rounds import (
    combine_messages,
    message_round,
    next_messages_body,
    recall_turns,
)
from proxy.types import JSON
from tests.fakes.anthropic_rules import request_problem

THOUGHT = {"type": "thinking", "thinking": "Look it up.", "signature": "c2ln"}
RECALL = {"type": "tool_use", "id": "toolu_r", "name": "ctx_recall", "input": {"ref": "toolu_1"}}
READ = {"type": "tool_use", "id": "toolu_c", "name": "Read", "input": {"path": "a.py"}}
SAID = {"type": "text", "text": "Checking. "}
MESSAGE = pydantic.TypeAdapter(Message)


def message(msg_id: str, *blocks: JSON, usage: tuple[int, int] = (100, 10)) -> JSON:
    uses = any(b["type"] == "tool_use" for b in blocks)
    return {
        "id": msg_id, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": list(blocks), "stop_reason": "tool_use" if uses else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1],
                  "cache_read_input_tokens": usage[0] // 2, "service_tier": "standard"},
    }  # fmt: skip


def test_a_round_splits_the_proxys_calls_from_the_clients() -> None:
    ended = message_round(message("m1", THOUGHT, SAID, RECALL, READ), tool_name="ctx_recall")
    assert ended.recall_calls == (RECALL,) and ended.client_calls == (READ,)
    assert ended.content == (THOUGHT, SAID, RECALL, READ)
    assert ended.finish_reason == "tool_use" and ended.usage is not None


def test_the_turns_keep_thinking_and_the_recall_calls_and_drop_the_clients() -> None:
    content = (THOUGHT, {"type": "text", "text": ""}, SAID, RECALL, READ)
    before = copy.deepcopy(content)
    turns = recall_turns(content, ["the log"], tool_name="ctx_recall", round_index=0)
    assert turns == [
        {"role": "assistant", "content": [THOUGHT, SAID, RECALL]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_r", "content": "the log"}]},
    ]  # fmt: skip
    assert content == before


def test_a_call_without_an_id_gets_one_in_both_turns() -> None:
    nameless = {"type": "tool_use", "name": "ctx_recall", "input": {}}
    assistant, user = recall_turns([nameless], ["x"], tool_name="ctx_recall", round_index=2)
    assert assistant["content"][0]["id"] == user["content"][0]["tool_use_id"]
    assert user["content"][0]["tool_use_id"] == "toolu_recall_2_0"


def test_one_answer_per_call_is_required() -> None:
    with pytest.raises(ValueError, match="one answer per recall call"):
        recall_turns([RECALL], [], tool_name="ctx_recall", round_index=0)
    with pytest.raises(ValueError, match="one answer per recall call"):
        recall_turns([RECALL], ["a", "b"], tool_name="ctx_recall", round_index=0)


TOOLS = [{"name": "Read", "input_schema": {"type": "object"}},
         {"name": "ctx_recall", "input_schema": {"type": "object"}}]  # fmt: skip
ASKED = {"model": "claude-sonnet-4-5", "max_tokens": 100, "tools": TOOLS,
         "messages": [{"role": "user", "content": "What was in a.py?"}]}  # fmt: skip


@pytest.mark.parametrize(
    ("choice", "last_choice"),
    [
        (None, {"type": "none"}),
        ({"type": "auto"}, {"type": "none"}),
        ({"type": "any"}, {"type": "none"}),
        ({"type": "tool", "name": "Read"}, {"type": "tool", "name": "Read"}),
    ],
)
def test_the_next_request_appends_the_turns_and_the_last_keeps_the_tools_but_no_choice(
    choice: Any, last_choice: JSON
) -> None:
    asked = {**ASKED, "tool_choice": choice} if choice else ASKED
    turns = recall_turns([SAID, RECALL], ["the log"], tool_name="ctx_recall", round_index=0)
    going = next_messages_body(asked, turns, last=False, tool_name="ctx_recall")
    assert going["messages"] == [*ASKED["messages"], *turns] and going["tools"] == TOOLS
    assert going.get("tool_choice") == choice
    assert request_problem(going) is None
    last = next_messages_body(asked, turns, last=True, tool_name="ctx_recall")
    assert last["tools"] == TOOLS and last["tool_choice"] == last_choice
    assert request_problem(last) is None
    assert "tool_choice" not in ASKED


def test_one_message_without_a_recall_call_comes_back_as_it_is() -> None:
    only = message("m1", SAID, READ)
    assert combine_messages([only], tool_name="ctx_recall") is only


def test_rounds_combine_into_one_message_without_the_tool_and_usage_summed() -> None:
    first = message("m1", THOUGHT, SAID, RECALL, READ, usage=(100, 10))
    second = message("m2", {"type": "text", "text": "Line 7 is x."}, usage=(300, 20))
    rounds = copy.deepcopy([first, second])
    combined = combine_messages(rounds, tool_name="ctx_recall")
    assert rounds == [first, second]
    assert combined["id"] == "m1" and combined["stop_reason"] == "end_turn"
    assert combined["content"] == [THOUGHT, SAID, {"type": "text", "text": "Line 7 is x."}]
    assert combined["usage"] == {"input_tokens": 400, "output_tokens": 30,
        "cache_read_input_tokens": 200, "service_tier": "standard"}  # fmt: skip
    MESSAGE.validate_python(combined)


def test_the_last_rounds_client_calls_are_kept_and_its_recall_calls_dropped() -> None:
    first = message("m1", RECALL)
    last = message("m2", SAID, RECALL, READ)
    combined = combine_messages([first, last], tool_name="ctx_recall")
    assert combined["content"] == [SAID, READ] and combined["stop_reason"] == "tool_use"
    stopped = combine_messages([first, message("m2", RECALL)], tool_name="ctx_recall")
    assert stopped["content"] == [] and stopped["stop_reason"] == "end_turn"
