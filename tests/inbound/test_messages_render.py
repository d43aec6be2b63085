"""The prepared internal body → the Messages body: untouched parts come back as sent, changed
parts are re-rendered only where they changed."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.inbound.messages_render import internal_to_messages
from proxy.inbound.messages_request import messages_to_internal
from tests.inbound.builders import (
    EPHEMERAL,
    assistant,
    body,
    fixture,
    fixture_names,
    marker_count,
    text,
    thinking,
    tool_result,
    tool_use,
    user,
    wire_problem,
)
from tests.inbound.strategies import bodies

JSON = dict[str, Any]
LATER: JSON = {"type": "ephemeral", "ttl": "1h"}


def with_messages(internal: JSON, messages: list[JSON]) -> JSON:
    return {**internal, "messages": messages}


def replaced(internal: JSON, index: int, **fields: Any) -> JSON:
    messages = list(internal["messages"])
    messages[index] = {**messages[index], **fields}
    return with_messages(internal, messages)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(bodies())
def test_any_body_no_stage_touched_comes_back_as_sent(sent: JSON) -> None:
    kept = copy.deepcopy(sent)
    internal, carrier = messages_to_internal(sent)
    out = internal_to_messages(internal, carrier)
    assert out == kept
    assert list(out) == list(kept)  # the client's key order too
    assert all(a is b for a, b in zip(out["messages"], sent["messages"], strict=True))
    assert sent == kept


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(bodies())
def test_hidden_message_markers_come_back_on_their_blocks(sent: JSON) -> None:
    internal, carrier = messages_to_internal(sent, hide_message_markers=True)
    assert marker_count(internal["messages"][1 if carrier.system else 0 :]) == 0
    assert internal_to_messages(internal, carrier) == sent


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(bodies())
def test_copied_messages_are_still_recognised(sent: JSON) -> None:
    """A stage that copies every message (identity lost) changes nothing in the output."""
    internal, carrier = messages_to_internal(sent)
    assert internal_to_messages(copy.deepcopy(internal), carrier) == sent


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(bodies(), st.data())
def test_a_changed_tool_result_is_the_only_block_that_changes(
    sent: JSON, data: st.DataObject
) -> None:
    internal, carrier = messages_to_internal(sent)
    tools = [i for i, m in enumerate(internal["messages"]) if m["role"] == "tool"]
    if not tools:
        return
    index = data.draw(st.sampled_from(tools))
    out = internal_to_messages(replaced(internal, index, content="(pruned)"), carrier)
    origin = carrier.origins[index - (1 if carrier.system else 0)]
    changed = origin.message
    for i, (new, old) in enumerate(zip(out["messages"], sent["messages"], strict=True)):
        if i != changed:
            assert new is old
    blocks = out["messages"][changed]["content"]
    before = sent["messages"][changed]["content"]
    assert len(blocks) == len(before)
    for new, old in zip(blocks, before, strict=True):
        if old is not before[origin.blocks[0]]:
            assert new is old
    result = blocks[origin.blocks[0]]
    old_result = before[origin.blocks[0]]
    assert {k: v for k, v in result.items() if k != "content"} == {
        k: v for k, v in old_result.items() if k != "content"
    }
    texts = (
        [b for b in result["content"] if isinstance(b, dict) and b.get("type") == "text"]
        if isinstance(result["content"], list)
        else [result["content"]]
    )
    assert "(pruned)" in [t if isinstance(t, str) else t["text"] for t in texts]


@pytest.mark.parametrize("name", fixture_names())
def test_each_recorded_request_converts_and_back_unchanged(name: str) -> None:
    sent = fixture(name)["body"]
    internal, carrier = messages_to_internal(sent)
    out = internal_to_messages(internal, carrier)
    assert out == sent
    assert out["messages"] == sent["messages"]


def test_a_pruned_tool_result_keeps_its_error_flag_images_and_marker() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "A"}}
    sent = body(
        user("look"),
        assistant(thinking(), tool_use("t1")),
        user(
            tool_result(
                "t1", [text("long output " * 50), image], is_error=True, cache_control=EPHEMERAL
            )
        ),
        assistant("seen"),
        user("next"),
    )
    internal, carrier = messages_to_internal(sent)
    out = internal_to_messages(replaced(internal, 2, content="long output ...(truncated)"), carrier)
    assert out["messages"][2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "t1",
            "content": [text("long output ...(truncated)"), image],
            "is_error": True,
            "cache_control": EPHEMERAL,
        }
    ]
    assert out["messages"][1] is sent["messages"][1]  # thinking and its signature untouched
    assert wire_problem(out) is None


def test_a_string_tool_result_stays_a_string_when_pruned() -> None:
    sent = body(user("go"), assistant(tool_use("t1")), user(tool_result("t1", "x" * 500)))
    internal, carrier = messages_to_internal(sent)
    out = internal_to_messages(replaced(internal, 2, content="x...(cut)"), carrier)
    assert out["messages"][2]["content"] == [tool_result("t1", "x...(cut)")]


def test_a_marker_a_stage_adds_changes_only_its_block() -> None:
    sent = fixture("main_turn_thinking")["body"]
    internal, carrier = messages_to_internal(sent)
    last = len(internal["messages"]) - 1
    reply = 2  # the first assistant turn: thinking, text, tool_use
    prepared = replaced(
        internal,
        reply,
        content=[{**internal["messages"][reply]["content"][0], "cache_control": EPHEMERAL}],
    )
    out = internal_to_messages(prepared, carrier)
    blocks = out["messages"][1]["content"]
    original = sent["messages"][1]["content"]
    assert blocks[0] is original[0]  # thinking first, as sent
    assert blocks[1] == {**original[1], "cache_control": EPHEMERAL}
    assert blocks[2] is original[2]
    assert [m is s for m, s in zip(out["messages"], sent["messages"], strict=True)] == [
        True,
        False,
        True,
        True,
        True,
    ]
    assert out["messages"][-1] is sent["messages"][-1] and last > 0


def test_a_string_user_message_given_a_marker_becomes_one_marked_text_block() -> None:
    sent = body(user("hello"), assistant("hi"), user("again"))
    internal, carrier = messages_to_internal(sent)
    out = internal_to_messages(
        replaced(internal, 2, content=[text("again", cache_control=EPHEMERAL)]), carrier
    )
    assert out["messages"][2] == user(text("again", cache_control=EPHEMERAL))
    assert out["messages"][:2] == sent["messages"][:2]


def test_bootstrap_system_is_static_part_then_the_clients_blocks_as_sent_then_dynamic() -> None:
    client = [text("billing header"), text("You are Claude Code.", cache_control=EPHEMERAL)]
    sent = body(user("hi"), system=client)
    internal, carrier = messages_to_internal(sent)
    laid_out = {
        "role": "system",
        "content": [
            text("<soul>static</soul>", cache_control=LATER),
            *internal["messages"][0]["content"],
            text("<user_profile>dynamic</user_profile>"),
        ],
    }
    out = internal_to_messages(
        with_messages(internal, [laid_out, *internal["messages"][1:]]), carrier
    )
    assert out["system"] == [
        text("<soul>static</soul>", cache_control=LATER),
        client[0],
        client[1],
        text("<user_profile>dynamic</user_profile>"),
    ]
    assert out["system"][1] is client[0] and out["system"][2] is client[1]


def test_a_string_system_merged_by_bootstrap_becomes_blocks() -> None:
    sent = body(user("hi"), system="Be brief.")
    internal, carrier = messages_to_internal(sent)
    laid_out = {
        "role": "system",
        "content": [text("static"), text("Be brief.", cache_control=EPHEMERAL), text("dyn")],
    }
    out = internal_to_messages(
        with_messages(internal, [laid_out, internal["messages"][1]]), carrier
    )
    assert out["system"] == [
        text("static"),
        text("Be brief.", cache_control=EPHEMERAL),
        text("dyn"),
    ]


def test_bootstrap_adds_a_system_the_client_did_not_send() -> None:
    sent = body(user("hi"))
    internal, carrier = messages_to_internal(sent)
    prepared = with_messages(
        internal, [{"role": "system", "content": "static"}, *internal["messages"]]
    )
    out = internal_to_messages(prepared, carrier)
    assert out["system"] == [text("static")]
    assert out["messages"] == sent["messages"]


def test_a_summary_replacing_the_covered_turns_leads_the_kept_ones() -> None:
    sent = body(
        user("start"),
        assistant(thinking(), tool_use("t1")),
        user(tool_result("t1", "r1")),
        assistant("done with step one"),
        user("now step two"),
        assistant(thinking("again"), tool_use("t2")),
        user(tool_result("t2", "r2")),
    )
    internal, carrier = messages_to_internal(sent)
    summary = {"role": "user", "content": "[Conversation summary]\nStep one is done."}
    kept = internal["messages"][4:]  # from "now step two"
    out = internal_to_messages(with_messages(internal, [summary, *kept]), carrier)
    assert out["messages"][0] == user(
        text("[Conversation summary]\nStep one is done."), text("now step two")
    )
    assert out["messages"][1:] == sent["messages"][5:]
    assert all(a is b for a, b in zip(out["messages"][1:], sent["messages"][5:], strict=True))
    assert wire_problem(out) is None


def test_a_placeholder_result_joins_the_user_turn_with_the_other_results_first() -> None:
    sent = body(
        user("go"),
        assistant(tool_use("t1"), tool_use("t2")),
        user(tool_result("t1", "one"), text("and also")),
    )
    internal, carrier = messages_to_internal(sent)
    messages = internal["messages"]
    placeholder = {"role": "tool", "tool_call_id": "t2", "content": "[no result]"}
    out = internal_to_messages(
        with_messages(internal, [*messages[:3], placeholder, messages[3]]), carrier
    )
    assert out["messages"][2]["content"] == [
        sent["messages"][2]["content"][0],
        tool_result("t2", "[no result]"),
        text("and also"),
    ]
    assert wire_problem(out) is None


def test_two_user_turns_the_client_sent_apart_stay_apart() -> None:
    sent = body(user("one"), user("two"))
    internal, carrier = messages_to_internal(sent)
    prepared = replaced(internal, 1, content=[text("two", cache_control=EPHEMERAL)])
    out = internal_to_messages(prepared, carrier)
    assert [m["content"] for m in out["messages"]] == [
        "one",
        [text("two", cache_control=EPHEMERAL)],
    ]


def test_markers_of_ours_go_first_when_blocks_the_chat_form_hides_bring_the_total_over_four() -> (
    None
):
    sent = fixture("server_tools_citations")["body"]  # a marked server tool: hidden from stages
    sent = {**sent, "system": [text("client system", cache_control=EPHEMERAL)]}
    internal, carrier = messages_to_internal(sent)
    assert marker_count(internal) == 1  # the stages see one client marker ...
    messages = list(internal["messages"])
    for index in (1, 2, 4):  # ... and add three of their own: 4 in their view, 5 in truth
        parts = list(messages[index]["content"])
        parts[-1] = {**parts[-1], "cache_control": EPHEMERAL}
        messages[index] = {**messages[index], "content": parts}
    out = internal_to_messages(with_messages(internal, messages), carrier)
    assert marker_count(out) == 4
    assert (
        out["tools"][0]["cache_control"] == EPHEMERAL
        and out["system"][0]["cache_control"] == EPHEMERAL
    )
    assert out["messages"][-1]["content"][-1].get("cache_control") is None  # newest of ours gone


def test_the_clients_four_markers_pass_through_untouched() -> None:
    sent = fixture("four_markers")["body"]
    internal, carrier = messages_to_internal(sent)
    assert marker_count(internal) == 4
    out = internal_to_messages(internal, carrier)
    assert marker_count(out) == 4 and out == sent


def test_changed_parameters_and_tools_are_rendered_and_the_rest_kept() -> None:
    lookup = {"name": "lookup", "input_schema": {"type": "object"}}
    search = {"type": "web_search_20250305", "name": "web_search"}
    sent = body(
        user("q"), tools=[search, lookup], tool_choice={"type": "auto"}, metadata={"user_id": "u"}
    )
    internal, carrier = messages_to_internal(sent)
    recall = {
        "type": "function",
        "function": {
            "name": "recall",
            "description": "Find it.",
            "parameters": {"type": "object", "properties": {}},
        },
    }
    prepared = {
        **internal,
        "tools": [*internal["tools"], recall],
        "max_completion_tokens": 99,
        "tool_choice": "required",
    }
    del prepared["model"]
    out = internal_to_messages(prepared, carrier)
    assert out == {
        "max_tokens": 99,
        "messages": sent["messages"],
        "tools": [
            search,
            lookup,
            {
                "name": "recall",
                "input_schema": {"type": "object", "properties": {}},
                "description": "Find it.",
            },
        ],
        "tool_choice": {"type": "any"},
        "metadata": {"user_id": "u"},
    }
    assert out["tools"][1] is lookup


def test_parallel_tool_calls_off_renders_as_disable_parallel_tool_use() -> None:
    sent = body(user("q"), tools=[{"name": "f", "input_schema": {"type": "object"}}])
    internal, carrier = messages_to_internal(sent)
    out = internal_to_messages({**internal, "parallel_tool_calls": False}, carrier)
    assert out["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}


def test_an_assistant_turn_with_new_text_keeps_thinking_first_and_tool_use_after() -> None:
    sent = body(
        user("q"), assistant(thinking(), text("old"), tool_use("t1")), user(tool_result("t1"))
    )
    internal, carrier = messages_to_internal(sent)
    out = internal_to_messages(replaced(internal, 1, content=[text("new")]), carrier)
    assert out["messages"][1]["content"] == [thinking(), text("new"), tool_use("t1")]
