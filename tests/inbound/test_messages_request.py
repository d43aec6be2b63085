"""A Messages body → the internal chat body: what each block becomes, what is carried only."""

from __future__ import annotations

import copy
import json

import pytest

from proxy.history import history_salt
from proxy.inbound.chat_request import chat_request
from proxy.inbound.messages_request import messages_to_internal, request_problem
from tests.inbound.builders import (
    EPHEMERAL,
    assistant,
    body,
    chat_problem,
    fixture,
    fixture_names,
    text,
    thinking,
    tool_result,
    tool_use,
    user,
)


def call(call_id: str, arguments: str, name: str = "Bash") -> dict[str, object]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_tool_results_become_tool_messages_before_the_users_other_blocks() -> None:
    sent = body(
        user("list it"),
        assistant(text("Listing."), tool_use("t1", command="ls"), tool_use("t2", command="pwd")),
        user(
            tool_result("t1", "a b", is_error=True),
            tool_result("t2", [text("/repo")], cache_control=EPHEMERAL),
            text("and now?"),
        ),
    )
    internal, _ = messages_to_internal(sent)
    assert internal["messages"][1:] == [
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Listing."}],
            "tool_calls": [call("t1", '{"command":"ls"}'), call("t2", '{"command":"pwd"}')],
        },
        {"role": "tool", "tool_call_id": "t1", "content": "a b"},
        {
            "role": "tool",
            "tool_call_id": "t2",
            "content": [{"type": "text", "text": "/repo"}],
            "cache_control": EPHEMERAL,
        },
        {"role": "user", "content": [{"type": "text", "text": "and now?"}]},
    ]  # fmt: skip


def test_system_blocks_become_one_system_message_with_the_clients_markers() -> None:
    blocks = [text("billing"), text("You are an agent.", cache_control=EPHEMERAL)]
    internal, carrier = messages_to_internal(body(user("hi"), system=blocks))
    assert internal["messages"][0] == {"role": "system", "content": blocks}
    assert internal["messages"][0]["content"][1] is not blocks[1]  # a stage may not reach it
    assert carrier.system is not None and carrier.system.internal is internal["messages"][0]
    internal, _ = messages_to_internal(body(user("hi"), system="Be brief."))
    assert internal["messages"][0] == {"role": "system", "content": "Be brief."}


def test_claude_codes_attribution_line_is_carried_so_the_conversation_stays_one() -> None:
    first, second = (
        copy.deepcopy(fixture("main_turn_thinking")["body"]),
        fixture("main_turn_thinking")["body"],
    )
    first["system"][0] = text(
        "x-anthropic-billing-header: cc_version=2.1.80.a1b; cc_entrypoint=cli; cch=91f0e;"
    )
    one, carrier = messages_to_internal(first)
    two, _ = messages_to_internal(second)
    assert one["messages"][0] == two["messages"][0]
    assert [p["text"][:20] for p in one["messages"][0]["content"]] == [
        "You are Claude Code,",
        "(Agent instructions:",
    ]
    assert carrier.system is not None and carrier.system.slots == (1, 2)
    assert history_salt("t", [one["messages"][0]]) == history_salt("t", [two["messages"][0]])


def test_blocks_a_chat_model_cannot_read_are_carried_only() -> None:
    sent = fixture("server_tools_citations")["body"]
    internal, carrier = messages_to_internal(sent)
    reply = internal["messages"][2]
    assert reply == {
        "role": "assistant",
        "content": [text("The sky is blue."), text("Paris is sunny today.")],
        "tool_calls": [
            {
                "id": "toolu_01A09q90qw90lq917835lq9",
                "type": "function",
                "function": {"name": "lookup", "arguments": '{"term":"sunny"}'},
            }
        ],
    }
    # redacted thinking, server tool use and its result: only in the carrier
    assert carrier.origins[1].blocks == (0, 1, 2, 3, 4, 5)
    assert carrier.origins[1].slots == (1, 4, 5)
    # a tool result of search results only, then an unknown block and a text
    assert internal["messages"][3] == {
        "role": "tool",
        "tool_call_id": "toolu_01A09q90qw90lq917835lq9",
        "content": "",
    }
    assert internal["messages"][4] == {"role": "user", "content": [text("Thanks. And tomorrow?")]}
    assert [t["function"]["name"] for t in internal["tools"]] == ["lookup"]  # web_search carried


PDF = "application/pdf"


def test_images_and_documents_become_parts_a_chat_model_reads() -> None:
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "AAA"},
    }
    linked = {"type": "image", "source": {"type": "url", "url": "https://x.example/a.png"}}
    pdf = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"},
        "title": "spec.pdf",
    }
    plain = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "T"},
    }
    internal, _ = messages_to_internal(body(user(image, linked, pdf, plain)))
    assert internal["messages"][0]["content"] == [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}},
        {"type": "image_url", "image_url": {"url": "https://x.example/a.png"}},
        {"type": "file", "file": {"file_data": f"data:{PDF};base64,JVBE", "filename": "spec.pdf"}},
        {"type": "text", "text": "T"},
    ]  # fmt: skip


def test_a_user_turn_of_carried_blocks_rides_with_its_last_tool_result() -> None:
    unknown = {"type": "container_upload", "file_id": "f1"}
    sent = body(user("go"), assistant(tool_use("t1")), user(tool_result("t1"), unknown))
    internal, carrier = messages_to_internal(sent)
    assert [m["role"] for m in internal["messages"]] == ["user", "assistant", "tool"]
    assert carrier.origins[-1].blocks == (0, 1)


def test_parameters_map_and_anthropic_only_keys_stay_behind() -> None:
    sent = body(
        user("hi"),
        stop_sequences=["END"],
        temperature=0.2,
        stream=True,
        metadata={"user_id": "u"},
        thinking={"type": "enabled", "budget_tokens": 2048},
        context_management={"edits": []},
        top_k=3,
        tools=[{"name": "f", "input_schema": {"type": "object"}, "cache_control": EPHEMERAL}],
        tool_choice={"type": "any", "disable_parallel_tool_use": True},
    )
    internal, _ = messages_to_internal(sent)
    assert internal == {
        "model": "claude-sonnet-4-5",
        "messages": [{"role": "user", "content": "hi"}],
        "max_completion_tokens": 1024,
        "temperature": 0.2,
        "stop": ["END"],
        "stream": True,
        "tools": [
            {
                "type": "function",
                "function": {"name": "f", "parameters": {"type": "object"}},
                "cache_control": EPHEMERAL,
            }
        ],
        "tool_choice": "required",
        "parallel_tool_calls": False,
    }


NAMED = {"name": "f"}


@pytest.mark.parametrize(
    ("choice", "internal"),
    [
        ({"type": "auto"}, {"tool_choice": "auto"}),
        ({"type": "none"}, {"tool_choice": "none"}),
        ({"type": "tool", "name": "f"}, {"tool_choice": {"type": "function", "function": NAMED}}),
    ],
)  # fmt: skip
def test_tool_choice_maps_to_the_chat_form(
    choice: dict[str, str], internal: dict[str, object]
) -> None:
    tools = [{"name": "f", "input_schema": {"type": "object"}}]
    converted, _ = messages_to_internal(body(user("x"), tools=tools, tool_choice=choice))
    assert {k: converted[k] for k in internal} == internal


def test_without_custom_tools_no_tools_and_no_tool_choice_are_sent() -> None:
    server = [{"type": "web_search_20250305", "name": "web_search"}]
    converted, _ = messages_to_internal(body(user("x"), tools=server, tool_choice={"type": "any"}))
    assert "tools" not in converted and "tool_choice" not in converted


@pytest.mark.parametrize("hide", [False, True])
@pytest.mark.parametrize("name", fixture_names())
def test_fixtures_convert_without_touching_the_input_into_valid_chat_requests(
    name: str, hide: bool
) -> None:
    sent = fixture(name)["body"]
    kept = copy.deepcopy(sent)
    internal, carrier = messages_to_internal(sent, hide_message_markers=hide)
    assert sent == kept
    assert chat_problem(chat_request(internal)) is None
    if hide:  # the markers are gone from the messages and their items
        history = internal["messages"][1 if carrier.system else 0 :]
        assert "cache_control" not in json.dumps(history)
        assert [o.internal for o in carrier.origins] == history


def test_thinking_is_not_in_the_internal_form() -> None:
    internal, _ = messages_to_internal(body(user("q"), assistant(thinking(), text("a"))))
    assert internal["messages"][1] == {"role": "assistant", "content": [text("a")]}


ROLE = "role: Input should be 'user' or 'assistant'"
CONTENT = "content: Input should be a string or a list of objects"


@pytest.mark.parametrize(
    ("sent", "problem"),
    [
        ([], "body: Input should be an object"),
        ({"messages": []}, "model: Field required"),
        ({"model": "m"}, "messages: Field required"),
        ({"model": "m", "messages": [{"role": "system", "content": "x"}]}, f"messages.0.{ROLE}"),
        ({"model": "m", "messages": [{"role": "user", "content": 3}]}, f"messages.0.{CONTENT}"),
        ({"model": "m", "messages": [], "system": [1]}, f"system{CONTENT[7:]}"),
        ({"model": "m", "messages": [], "tools": {}}, "tools: Input should be a list of objects"),
        ({"model": "m", "messages": [{"role": "user", "content": [text("x")]}]}, None),
    ],
)  # fmt: skip
def test_request_problem_names_what_the_conversion_cannot_take(
    sent: object, problem: str | None
) -> None:
    assert request_problem(sent) == problem
