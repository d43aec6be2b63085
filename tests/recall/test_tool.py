"""The recall tool's definition, whether a request gets it, and the rounds' bodies."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from proxy.recall.tool import (
    Offer,
    RecallSettings,
    answering,
    continuation,
    next_round_body,
    offer_recall,
    recall_tool,
    split_calls,
    with_recall_tool,
)
from proxy.types import JSON
from tests.factories import call, user

ON = RecallSettings()


def body(**extra: Any) -> JSON:
    return {"model": "gpt-4o", "messages": [user("hi")], **extra}


def client_tool(name: str) -> JSON:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


def test_the_definition_is_the_same_bytes_every_time() -> None:
    first = orjson.dumps(recall_tool(tool_name="ctx_recall"))
    assert first == orjson.dumps(recall_tool(tool_name="ctx_recall"))
    assert recall_tool(tool_name="ctx_recall") is not recall_tool(tool_name="ctx_recall")
    definition = orjson.loads(first)
    assert definition["function"]["name"] == "ctx_recall"
    assert set(definition["function"]["parameters"]["properties"]) == {"ref", "query", "offset"}


@pytest.mark.parametrize(
    ("request_body", "settings", "cut", "before", "expected"),
    [
        (body(), ON, True, False, Offer(True)),
        (body(), RecallSettings(enabled=False), True, True, Offer(False, "disabled")),
        (body(tool_choice="none"), ON, True, True, Offer(False, "tool_choice_none")),
        (body(n=2), ON, True, False, Offer(False, "several_choices")),
        (body(functions=[{"name": "f"}]), ON, True, False, Offer(False, "legacy_functions")),
        (body(tools=[client_tool("ctx_recall")]), ON, True, False, Offer(False, "name_clash")),
        (
            body(tools=[{"type": "custom", "name": "ctx_recall"}]),
            ON,
            True,
            False,
            Offer(False, "name_clash"),
        ),
        (body(), ON, False, False, Offer(False, "nothing_cut")),
        (body(), ON, False, True, Offer(True)),  # once offered, always offered
        (body(tool_choice="required", tools=[client_tool("bash")]), ON, True, False, Offer(True)),
        (
            body(tools=[client_tool("bash")]),
            RecallSettings(tool_name="recall"),
            True,
            False,
            Offer(True),
        ),
    ],
)
def test_offer_rules(
    request_body: JSON, settings: RecallSettings, cut: bool, before: bool, expected: Offer
) -> None:
    assert offer_recall(request_body, settings=settings, cut=cut, offered_before=before) == expected


def test_the_tool_goes_after_the_clients_own_and_the_input_is_untouched() -> None:
    original = body(tools=[client_tool("bash"), client_tool("read")])
    kept = copy.deepcopy(original)
    out = with_recall_tool(original, settings=ON)
    assert [t["function"]["name"] for t in out["tools"]] == ["bash", "read", "ctx_recall"]
    assert out["tools"][:2] == kept["tools"] and original == kept
    assert with_recall_tool(body(), settings=ON)["tools"] == [recall_tool(tool_name="ctx_recall")]


def test_the_last_round_keeps_the_tools_and_may_call_none() -> None:
    mixed = with_recall_tool(body(tools=[client_tool("bash")], tool_choice="auto"), settings=ON)
    kept = copy.deepcopy(mixed)
    assert answering(mixed, settings=ON) == {**mixed, "tool_choice": "none"} and mixed == kept
    alone = with_recall_tool(body(parallel_tool_calls=False), settings=ON)
    assert answering(alone, settings=ON) == {**alone, "tool_choice": "none"}
    forced = {"type": "function", "function": {"name": "ctx_recall"}}
    assert answering({**alone, "tool_choice": forced}, settings=ON)["tool_choice"] == "none"
    untouched = body()
    assert answering(untouched, settings=ON) is untouched


def test_the_last_round_keeps_a_tool_choice_naming_the_clients_own_tool() -> None:
    named = {"type": "function", "function": {"name": "bash"}}
    sent = with_recall_tool(body(tools=[client_tool("bash")], tool_choice=named), settings=ON)
    assert answering(sent, settings=ON) is sent


def test_split_calls_tells_the_proxys_calls_from_the_clients() -> None:
    calls = [call("a", "ctx_recall"), call("b", "bash"), "junk", call("c", "ctx_recall")]
    recall, client = split_calls(calls, tool_name="ctx_recall")
    assert [c["id"] for c in recall] == ["a", "c"]
    assert [c["id"] for c in client] == ["b"]


def test_continuation_carries_the_recall_calls_and_one_result_each() -> None:
    calls = [call("a", "ctx_recall", {"ref": "x"}), {"function": {"name": "ctx_recall"}}]
    added = continuation("let me look", calls, ["TEXT", "MORE"], round_index=1)
    assert added == [
        {
            "role": "assistant",
            "content": "let me look",
            "tool_calls": [
                {
                    "id": "a",
                    "type": "function",
                    "function": {"name": "ctx_recall", "arguments": '{"ref": "x"}'},
                },
                {
                    "id": "recall_1_1",
                    "type": "function",
                    "function": {"name": "ctx_recall", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "TEXT"},
        {"role": "tool", "tool_call_id": "recall_1_1", "content": "MORE"},
    ]
    assert continuation("", calls[:1], ["T"], round_index=0)[0]["content"] is None
    with pytest.raises(ValueError):
        continuation(None, calls, ["one"], round_index=0)


def test_the_next_round_appends_to_the_prefix_and_the_last_may_call_no_tool() -> None:
    first = with_recall_tool(body(), settings=ON)
    added = continuation(None, [call("a", "ctx_recall")], ["T"], round_index=0)
    second = next_round_body(first, added, last=False, settings=ON)
    assert second["messages"] == [*first["messages"], *added]
    assert second["tools"] == first["tools"]
    final = next_round_body(second, added, last=True, settings=ON)
    assert final["tools"] == first["tools"] and final["tool_choice"] == "none"
    assert len(final["messages"]) == 5


@pytest.mark.parametrize(
    "bad",
    [
        {"tool_name": "has space"},
        {"tool_name": ""},
        {"tool_name": "x" * 65},
        {"max_result_chars": 999},
        {"max_rounds": 0},
    ],
)
def test_settings_are_checked_once(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        RecallSettings(**bad)
