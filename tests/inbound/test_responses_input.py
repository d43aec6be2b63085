"""Changed and new messages → Responses items: re-rendered around what they carry."""

from __future__ import annotations

from typing import Any

from proxy.inbound.responses_input import changed_items, fresh_items, render_items
from proxy.inbound.responses_request import responses_to_internal
from tests.inbound.responses_builders import body, call, output, reasoning, said, user

JSON = dict[str, Any]
IMAGE = {"type": "input_image", "image_url": "https://x.example/shot.png", "detail": "auto"}


def test_a_pruned_output_of_parts_keeps_its_image_and_unknown_keys() -> None:
    parts = [{"type": "input_text", "text": "x" * 900}, IMAGE]
    sent = body(call("c1"), output("c1", parts, x_future="kept"))
    internal, carrier = responses_to_internal(sent)
    tool = {**internal["messages"][1], "content": "x ...(truncated)"}
    [item] = changed_items(tool, carrier.origins[1], carrier)
    assert item == {
        "type": "function_call_output",
        "call_id": "c1",
        "output": [{"type": "input_text", "text": "x ...(truncated)"}, IMAGE],
        "x_future": "kept",
    }
    assert item["output"][1] is IMAGE


def test_a_changed_assistant_text_keeps_reasoning_and_calls_in_place() -> None:
    sent = body(user("go"), reasoning(), said("Let me look."), call("c1"), output("c1"))
    internal, carrier = responses_to_internal(sent)
    turn = internal["messages"][1]
    changed = {**turn, "content": [{"type": "text", "text": "Looking."}]}
    items = changed_items(changed, carrier.origins[1], carrier)
    assert items[0] is sent["input"][1]
    assert items[1] == {
        **sent["input"][2],
        "content": [{"type": "output_text", "text": "Looking.", "annotations": []}],
    }
    assert items[2] is sent["input"][3]


def test_a_late_system_message_turned_user_changes_role_only() -> None:
    late = {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": "note"}],
    }
    sent = body(user("a"), said("b"), late)
    internal, carrier = responses_to_internal(sent)
    turned = {"role": "user", "content": internal["messages"][2]["content"]}
    [item] = changed_items(turned, carrier.origins[2], carrier)
    assert item == {**late, "role": "user"}


def test_fresh_assistant_turn_with_a_custom_tool_call() -> None:
    patch_tool = {"type": "custom", "name": "apply_patch", "format": {"type": "text"}}
    _, carrier = responses_to_internal(body(user("x"), tools=[patch_tool]))
    message = {
        "role": "assistant",
        "content": "Patching.",
        "tool_calls": [
            {
                "id": "p1",
                "type": "function",
                "function": {"name": "apply_patch", "arguments": '{"input": "diff"}'},
            },
            {"id": "s1", "type": "function", "function": {"name": "shell", "arguments": "{}"}},
        ],
    }
    assert fresh_items(message, carrier) == [
        {"type": "message", "role": "assistant", "content": "Patching."},
        {"type": "custom_tool_call", "call_id": "p1", "name": "apply_patch", "input": "diff"},
        {"type": "function_call", "call_id": "s1", "name": "shell", "arguments": "{}"},
    ]


def test_an_empty_fresh_message_renders_to_nothing() -> None:
    _, carrier = responses_to_internal(body(user("x")))
    assert fresh_items({"role": "user", "content": ""}, carrier) == []


def test_dropped_messages_take_their_carried_items_with_them() -> None:
    sent = body(user("old"), reasoning(), said("old answer"), user("new"))
    internal, carrier = responses_to_internal(sent)
    items, pristine = render_items(internal["messages"][2:], carrier.origins, carrier)
    assert items == [sent["input"][3]] and not pristine
