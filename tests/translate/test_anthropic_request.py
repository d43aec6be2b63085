"""Golden tests of chat-completions → Messages request translation.

Every translated request is checked by the fake API's rules, which include the official SDK's
`MessageCreateParams` types with unknown keys rejected (`tests.fakes.anthropic_rules`).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.translate.anthropic_request import DROPPED_KEYS, PLACEHOLDER_TEXT, to_messages_request
from tests.factories import assistant, call, system, tool, user
from tests.fakes.anthropic_rules import request_problem, sdk_problem

EPHEMERAL = {"type": "ephemeral"}
PNG = "data:image/png;base64,iVBORw0KGgo="


def translate(messages: list[dict[str, Any]], **body: Any) -> dict[str, Any]:
    """Translate, asserting the input is untouched and the API would accept the result."""
    request = {"model": "claude-sonnet-4-5", "messages": messages, **body}
    before = copy.deepcopy(request)
    out = to_messages_request(request)
    assert request == before
    assert request_problem(out) is None, request_problem(out)
    return out


def text(words: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": words, **extra}


def test_plain_conversation_hoists_system_and_keeps_turns() -> None:
    out = translate([system("Be brief."), user("Hi"), assistant("Hello"), user("Bye")])
    assert out == {
        "model": "claude-sonnet-4-5",
        "system": [text("Be brief.")],
        "messages": [
            {"role": "user", "content": [text("Hi")]},
            {"role": "assistant", "content": [text("Hello")]},
            {"role": "user", "content": [text("Bye")]},
        ],
        "max_tokens": 4096,
    }


def test_system_blocks_keep_their_cache_control_in_order() -> None:
    static = {"role": "system", "content": "static", "cache_control": EPHEMERAL}
    client = {"role": "developer", "content": [text("client", cache_control=EPHEMERAL)]}
    late = system("late")  # a system message in the middle is hoisted, never a user turn
    out = translate([static, client, user("q"), late])
    assert out["system"] == [
        text("static", cache_control=EPHEMERAL),
        text("client", cache_control=EPHEMERAL),
        text("late"),
    ]
    assert out["messages"] == [{"role": "user", "content": [text("q")]}]


def test_parallel_tool_calls_and_results_become_tool_use_and_one_user_turn() -> None:
    calls = [call("toolu_1", "ls", {"path": "/"}), call("toolu_2", "cat", {"file": "a"})]
    results = [tool("toolu_1", "bin etc"), tool("toolu_2", [{"type": "text", "text": "x"}])]
    out = translate([user("look"), assistant("Checking.", *calls), *results, user("thanks")])
    assert out["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                text("Checking."),
                {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"path": "/"}},
                {"type": "tool_use", "id": "toolu_2", "name": "cat", "input": {"file": "a"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "bin etc"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": [text("x")]},
                text("thanks"),
            ],
        },
    ]


def test_cache_control_on_messages_and_parts_is_kept() -> None:
    marked_tool = {**tool("toolu_1", "out"), "cache_control": EPHEMERAL}
    marked_user = {"role": "user", "content": "next", "cache_control": EPHEMERAL}
    out = translate([user("go"), assistant(None, call("toolu_1")), marked_tool, marked_user])
    assert out["messages"][2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": "out",
            "cache_control": EPHEMERAL,
        },
        text("next", cache_control=EPHEMERAL),
    ]


def test_images_from_data_and_http_urls() -> None:
    parts = [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": PNG, "detail": "high"}},
        {
            "type": "image_url",
            "image_url": {"url": "https://example.com/a.jpg"},
            "cache_control": EPHEMERAL,
        },
    ]
    out = translate([{"role": "user", "content": parts}])
    assert out["messages"][0]["content"][1:] == [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
        },
        {
            "type": "image",
            "source": {"type": "url", "url": "https://example.com/a.jpg"},
            "cache_control": EPHEMERAL,
        },
    ]


def test_a_history_starting_with_assistant_gets_a_placeholder_user_turn() -> None:
    out = translate([system("s"), assistant("I greet first."), user("ok")])
    assert out["messages"][0] == {"role": "user", "content": [text(PLACEHOLDER_TEXT)]}
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "user"]


def test_consecutive_same_role_messages_are_merged_and_empty_ones_dropped() -> None:
    out = translate([user("a"), user(""), user("b"), assistant("c"), assistant("d")])
    assert out["messages"] == [
        {"role": "user", "content": [text("a"), text("b")]},
        {"role": "assistant", "content": [text("c"), text("d")]},
    ]


def test_tool_call_without_text_has_no_empty_text_block() -> None:
    out = translate([user("go"), assistant("", call("toolu_1")), tool("toolu_1", "")])
    assert out["messages"][1]["content"] == [
        {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}}
    ]
    assert out["messages"][2]["content"] == [{"type": "tool_result", "tool_use_id": "toolu_1"}]


def test_unparseable_arguments_are_kept_as_raw_text() -> None:
    broken = {"id": "toolu_1", "type": "function", "function": {"name": "f", "arguments": "{oops"}}
    out = translate([user("go"), assistant(None, broken), tool("toolu_1", "r")])
    assert out["messages"][1]["content"][0]["input"] == {"raw_arguments": "{oops"}


TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        ({}, 4096),
        ({"max_tokens": 100}, 100),
        ({"max_tokens": 100, "max_completion_tokens": 200}, 200),
    ],
)
def test_max_tokens_from_either_limit_or_the_default(limits: dict[str, int], expected: int) -> None:
    assert translate([user("hi")], **limits)["max_tokens"] == expected


def test_stop_user_and_stream() -> None:
    out = translate([user("hi")], stop="END", user="u-42", stream=True)
    assert (out["stop_sequences"], out["stream"]) == (["END"], True)
    assert out["metadata"] == {"user_id": "u-42"}
    assert translate([user("hi")], stop=["a", "b"])["stop_sequences"] == ["a", "b"]


def test_sampling_parameters_are_dropped_since_the_sdk_types_have_none() -> None:
    out = translate([user("hi")], temperature=0.3, top_p=0.9, top_k=5)
    assert not {"temperature", "top_p", "top_k"} & set(out)


def test_keep_sampling_sends_them_with_temperature_clamped() -> None:
    body = {"model": "m", "messages": [user("hi")], "temperature": 1.7, "top_p": 0.9, "top_k": 5}
    out = to_messages_request(body, keep_sampling=True)
    assert (out["temperature"], out["top_p"], out["top_k"]) == (1.0, 0.9, 5)
    thinking = to_messages_request({**body, "reasoning_effort": "low"}, keep_sampling=True)
    assert not {"temperature", "top_p", "top_k"} & set(thinking)


def test_openai_only_keys_are_dropped() -> None:
    extras = {key: None for key in DROPPED_KEYS} | {
        "n": 2,
        "response_format": {"type": "json_object"},
    }
    extras |= {"stream_options": {"include_usage": True}, "metadata": {"k": "v"}, "unknown_key": 1}
    out = translate([user("hi")], **extras)
    assert set(out) == {"model", "messages", "max_tokens"}


@pytest.mark.parametrize(
    ("effort", "limit", "max_tokens", "budget"),
    [
        ("low", None, 4096 + 2048, 2048),
        ("medium", None, 4096 + 8192, 8192),
        ("high", 20000, 20000, 16384),
        ("high", 5000, 5000, 4999),
        ("minimal", None, 4096 + 1024, 1024),
    ],
)
def test_reasoning_effort_maps_to_a_thinking_budget(
    effort: str, limit: int | None, max_tokens: int, budget: int
) -> None:
    limits = {"max_completion_tokens": limit} if limit else {}
    out = translate([user("think")], reasoning_effort=effort, temperature=0.2, **limits)
    assert out["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert out["max_tokens"] == max_tokens


@pytest.mark.parametrize(("effort", "limit"), [("none", None), ("high", 1024), ("bogus", None)])
def test_no_thinking_when_not_asked_or_no_room(effort: str, limit: int | None) -> None:
    limits = {"max_tokens": limit} if limit else {}
    out = translate([user("hi")], reasoning_effort=effort, temperature=0.5, **limits)
    assert "thinking" not in out


def test_sdk_check_rejects_what_the_api_would() -> None:
    assert sdk_problem({"model": "m", "max_tokens": 1, "messages": [], "n": 2}) is not None
    bogus = {
        "model": "m",
        "max_tokens": 1,
        "messages": [{"role": "user", "content": [{"type": "x"}]}],
    }
    assert sdk_problem(bogus) is not None


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8))
tool_input = st.dictionaries(st.text(min_size=1, max_size=6), json_leaf, max_size=4)


@st.composite
def histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Valid chat-completions histories: user turns, tool exchanges, text answers, markers."""
    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        messages.append(system(draw(st.text(min_size=1, max_size=10))))
    for turn in range(draw(st.integers(1, 5))):
        messages.append(user(draw(st.text(max_size=10))))
        for step in range(draw(st.integers(0, 2))):
            ids = [f"toolu_{turn}_{step}_{n}" for n in range(draw(st.integers(1, 3)))]
            messages.append(
                assistant(draw(st.text(max_size=5)), *(call(i, "f", draw(tool_input)) for i in ids))
            )
            messages += [tool(i, draw(st.text(max_size=10))) for i in ids]
        messages.append(assistant(draw(st.text(max_size=10))))
    return messages


@settings(max_examples=150, deadline=None)
@given(histories())
def test_generated_histories_translate_to_requests_the_api_accepts(
    messages: list[dict[str, Any]],
) -> None:
    translate(messages, tools=TOOLS)
