"""The prepared internal body → the Messages body: untouched parts come back as sent, changed
parts are re-rendered only where they changed."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from proxy.inbound.messages_render import internal_to_messages
from proxy.inbound.messages_request import messages_to_internal
from tests.inbound.builders import (
    EPHEMERAL,
    body,
    fixture,
    fixture_names,
    marker_count,
    text,
    user,
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


@pytest.mark.parametrize("name", fixture_names())
def test_each_recorded_request_converts_and_back_unchanged(name: str) -> None:
    sent = fixture(name)["body"]
    internal, carrier = messages_to_internal(sent)
    out = internal_to_messages(internal, carrier)
    assert out == sent
    assert out["messages"] == sent["messages"]


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
