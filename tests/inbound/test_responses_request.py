"""A Responses body → the internal chat body: what the stages and a chat upstream see."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from proxy.inbound.chat_request import chat_request
from proxy.inbound.compaction_handle import sign_handle
from proxy.inbound.responses_request import responses_to_internal
from tests.inbound.builders import chat_problem
from tests.inbound.responses_builders import (
    body,
    call,
    developer,
    output,
    reasoning,
    said,
    shell_tool,
    user,
)
from tests.inbound.responses_strategies import bodies

JSON = dict[str, Any]
PATCH_TOOL = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Edit files.",
    "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch hunk+"},
}


def test_a_codex_turn_becomes_plain_chat_messages() -> None:
    sent = body(
        developer("Sandbox: read-only."),
        user("List the files."),
        reasoning(),
        call("c1", command="ls"),
        output("c1", "a.py"),
        said("One file."),
        instructions="You are Codex.",
        tools=[shell_tool(), {"type": "web_search"}],
        tool_choice="auto",
        parallel_tool_calls=False,
        reasoning={"effort": "high", "summary": "auto"},
        text={"verbosity": "low"},
        store=False,
        max_output_tokens=500,
        prompt_cache_key="thread-1",
    )
    kept = copy.deepcopy(sent)
    internal, _ = responses_to_internal(sent)
    assert sent == kept
    assert internal["messages"] == [
        {"role": "system", "content": [{"type": "text", "text": "You are Codex."}]},
        {"role": "developer", "content": [{"type": "text", "text": "Sandbox: read-only."}]},
        {"role": "user", "content": [{"type": "text", "text": "List the files."}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "shell", "arguments": '{"command":"ls"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        {"role": "assistant", "content": [{"type": "text", "text": "One file."}]},
    ]
    assert internal["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "shell",
                "description": "Run a command.",
                "parameters": shell_tool()["parameters"],
                "strict": False,
            },
        }
    ]
    assert {
        k: internal[k]
        for k in ("tool_choice", "parallel_tool_calls", "reasoning_effort", "verbosity")
    } == {
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "reasoning_effort": "high",
        "verbosity": "low",
    }
    assert internal["max_completion_tokens"] == 500 and internal["prompt_cache_key"] == "thread-1"
    assert "store" not in internal and "include" not in internal
    assert chat_problem(chat_request(internal)) is None


def test_parallel_calls_and_reasoning_make_one_assistant_turn_and_its_results_follow() -> None:
    sent = body(user("go"), reasoning(), call("a"), call("b"), output("a"), output("b"))
    internal, carrier = responses_to_internal(sent)
    roles = [m["role"] for m in internal["messages"]]
    assert roles == ["user", "assistant", "tool", "tool"]
    assert [c["id"] for c in internal["messages"][1]["tool_calls"]] == ["a", "b"]
    assert carrier.origins[1].items == (1, 2, 3)


def test_items_a_chat_model_cannot_read_are_carried_by_the_message_before_them() -> None:
    search = {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search"},
    }
    theirs = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA-openai"}
    sent = body(
        theirs, user("hi"), search, said("found"), {"type": "item_reference", "id": "msg_0"}
    )
    internal, carrier = responses_to_internal(sent)
    assert [m["role"] for m in internal["messages"]] == ["user", "assistant"]
    assert [o.items for o in carrier.origins] == [(0, 1, 2), (3, 4)]
    assert chat_problem(chat_request(internal)) is None


def test_images_and_files_reach_a_chat_model_and_file_ids_are_carried() -> None:
    parts = [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "high"},
        {"type": "input_image", "file_id": "file-1", "detail": "auto"},
        {
            "type": "input_file",
            "file_data": "data:application/pdf;base64,JVBE",
            "filename": "a.pdf",
        },
    ]
    internal, carrier = responses_to_internal(body({"role": "user", "content": parts}))
    assert internal["messages"][0]["content"] == [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "high"}},
        {
            "type": "file",
            "file": {"file_data": "data:application/pdf;base64,JVBE", "filename": "a.pdf"},
        },
    ]
    assert carrier.origins[0].slots == (0, 1, 3)
    assert chat_problem(chat_request(internal)) is None


def test_a_custom_tool_is_a_function_of_one_string_and_its_calls_carry_the_input() -> None:
    patch = "*** Begin Patch\n*** End Patch"
    custom_call = {
        "type": "custom_tool_call",
        "call_id": "p1",
        "name": "apply_patch",
        "input": patch,
    }
    done = {"type": "custom_tool_call_output", "call_id": "p1", "output": "Done!"}
    internal, carrier = responses_to_internal(
        body(user("fix"), custom_call, done, tools=[PATCH_TOOL])
    )
    tool = internal["tools"][0]["function"]
    assert tool["name"] == "apply_patch" and "start: begin_patch hunk+" in tool["description"]
    assert tool["parameters"]["required"] == ["input"]
    arguments = internal["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert arguments == '{"input": "*** Begin Patch\\n*** End Patch"}'
    assert internal["messages"][2] == {"role": "tool", "tool_call_id": "p1", "content": "Done!"}
    assert carrier.custom == {"apply_patch"} and carrier.custom_calls == {"p1"}


def test_a_compaction_item_of_ctxproxys_stands_for_its_stored_summary() -> None:
    token = sign_handle(
        secret=b"s" * 32, tenant="t", prefix_hash="p", summary_id="s1", expires_at=10
    )
    item = {"type": "compaction", "id": "cmp_1", "encrypted_content": token}
    summary = {"role": "user", "content": "[Conversation summary]\nWe fixed a bug."}
    internal, carrier = responses_to_internal(
        body(user("old ask"), item, user("next")), summaries={token: [summary]}
    )
    assert internal["messages"][1] is summary
    assert carrier.origins[1].expanded
    with pytest.raises(ValueError, match="not opened"):
        responses_to_internal(body(item))


def test_tool_outputs_keep_their_text_as_string_or_text_parts() -> None:
    listed = [
        {"type": "input_text", "text": "line"},
        {"type": "input_image", "image_url": "https://x/a.png", "detail": "auto"},
    ]
    internal, _ = responses_to_internal(
        body(call("a"), output("a", listed), call("b"), output("b", ""))
    )
    assert internal["messages"][1]["content"] == [{"type": "text", "text": "line"}]
    assert internal["messages"][3]["content"] == ""


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(bodies())
def test_every_internal_message_is_one_a_chat_api_takes_in_shape(sent: JSON) -> None:
    internal, carrier = responses_to_internal(sent)
    assert len(carrier.origins) == len(internal["messages"])
    for message, origin in zip(internal["messages"], carrier.origins, strict=True):
        assert message is origin.internal
        assert message["role"] in ("system", "developer", "user", "assistant", "tool")
        parts = message.get("content")
        assert parts is None or isinstance(parts, str | list)
        items = [
            *(parts if isinstance(parts, list) else [parts] if parts else []),
            *message.get("tool_calls", ()),
        ]
        assert len(origin.slots) == len(items)
