"""Golden tests of `tools` / `tool_choice` translation; every result checked by the API's rules."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from proxy.translate.anthropic_request import to_messages_request
from proxy.translate.anthropic_tools import HISTORY_TOOL_DESCRIPTION, history_tools, tools_request
from tests.factories import assistant, call, tool, user
from tests.fakes.anthropic_rules import request_problem

EPHEMERAL = {"type": "ephemeral"}


def translate(**body: Any) -> dict[str, Any]:
    """The tools part of a translated request, checked to be acceptable and the input untouched."""
    request = {"model": "m", "messages": [{"role": "user", "content": "hi"}], **body}
    before = copy.deepcopy(request)
    out = tools_request(request)
    assert request == before
    full = to_messages_request(request)
    assert request_problem(full) is None, request_problem(full)
    return out


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
            "strict": True,
        },
    },
    {"type": "function", "function": {"name": "now"}, "cache_control": EPHEMERAL},
]


def test_tools_become_name_description_and_input_schema() -> None:
    assert translate(tools=TOOLS)["tools"] == [
        {
            "name": "get_weather",
            "description": "Weather for a city",
            "input_schema": TOOLS[0]["function"]["parameters"],
            "strict": True,
        },
        {
            "name": "now",
            "input_schema": {"type": "object", "properties": {}},
            "cache_control": EPHEMERAL,
        },
    ]


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("required", {"type": "any"}),
        ({"type": "function", "function": {"name": "now"}}, {"type": "tool", "name": "now"}),
    ],
)
def test_tool_choice_mapping(choice: Any, expected: dict[str, Any]) -> None:
    assert translate(tools=TOOLS, tool_choice=choice)["tool_choice"] == expected


def test_parallel_tool_calls_false_disables_parallel_tool_use() -> None:
    out = translate(tools=TOOLS, parallel_tool_calls=False)
    assert out["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    named = {"type": "function", "function": {"name": "now"}}
    out = translate(tools=TOOLS, tool_choice=named, parallel_tool_calls=False)
    assert out["tool_choice"] == {"type": "tool", "name": "now", "disable_parallel_tool_use": True}


def test_no_tools_means_no_tool_choice() -> None:
    assert translate(tool_choice="required") == {}
    assert translate(tools=[], tool_choice="auto") == {}


def history_request(**body: Any) -> dict[str, Any]:
    """A request whose history calls `read` twice and `bash` once, translated and checked."""
    messages = [
        user("go"),
        assistant(None, call("toolu_1", "read"), call("toolu_2", "bash")),
        tool("toolu_1", "a"),
        tool("toolu_2", "b"),
        assistant(None, call("toolu_3", "read")),
        tool("toolu_3", "c"),
    ]
    request = {"model": "m", "messages": messages, **body}
    before = copy.deepcopy(request)
    out = to_messages_request(request)
    assert request == before
    assert request_problem(out) is None, request_problem(out)
    return out


def test_a_tool_history_without_tools_declares_the_called_tools_and_calls_none() -> None:
    out = history_request(tool_choice="auto")
    declared = {"description": HISTORY_TOOL_DESCRIPTION, "input_schema": {"type": "object"}}
    assert out["tools"] == [{"name": "read", **declared}, {"name": "bash", **declared}]
    assert out["tool_choice"] == {"type": "none"}


def test_the_clients_tools_are_sent_as_they_are_with_a_tool_history() -> None:
    out = history_request(tools=TOOLS)
    assert [tool["name"] for tool in out["tools"]] == ["get_weather", "now"]
    assert "tool_choice" not in out


def test_a_history_without_tool_calls_declares_nothing() -> None:
    assert history_tools([user("hi"), assistant("hello")]) == {}
