"""The recall rounds in the Responses API's form: a round read, the items the next round appends,
the next request, and the rounds' Responses combined into the client's one Response — never a
reasoning item without the item it belongs to."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from proxy.recall.responses_rounds import (
    combine_responses,
    next_responses_body,
    recall_items,
    response_round,
    shown_items,
)
from proxy.types import JSON
from tests.inbound.responses_builders import valid_response, wire_problem

TOOL = "ctx_recall"
OBJECT = {"type": "object"}
RECALL_TOOL = {"type": "function", "name": TOOL, "parameters": OBJECT, "strict": False}
SHELL_TOOL = {"type": "function", "name": "shell", "parameters": OBJECT, "strict": False}


def thought(ident: str) -> JSON:
    return {"type": "reasoning", "id": ident, "summary": [], "encrypted_content": "gAAA" + ident}


def fn(ident: str, name: str = TOOL, arguments: str = '{"ref": "call_1"}') -> JSON:
    return {"type": "function_call", "id": f"fc_{ident}", "call_id": ident, "name": name,
            "arguments": arguments, "status": "completed"}  # fmt: skip


def said(ident: str, text: str) -> JSON:
    part = {"type": "output_text", "text": text, "annotations": []}
    return {"type": "message", "id": ident, "role": "assistant", "status": "completed",
            "content": [part]}  # fmt: skip


def response(ident: str, *items: JSON, tokens: int = 100, choice: Any = "auto") -> JSON:
    return {
        "id": ident, "object": "response", "created_at": int(ident[-1]), "status": "completed",
        "model": "gpt-5", "output": list(items), "parallel_tool_calls": True,
        "tool_choice": choice, "tools": [SHELL_TOOL, RECALL_TOOL],
        "usage": {"input_tokens": tokens,
                  "input_tokens_details": {"cached_tokens": 10, "cache_write_tokens": 0},
                  "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 2},
                  "total_tokens": tokens + 5},
    }  # fmt: skip


def orphans(shown: list[JSON], *rounds: JSON) -> list[str]:
    """Reasoning items of `shown` not followed by the item that followed them upstream."""
    follower: dict[str, str | None] = {}
    for answer in rounds:
        output = answer["output"]
        for n, item in enumerate(output):
            follower[item["id"]] = output[n + 1]["id"] if n + 1 < len(output) else None
    out = []
    for n, item in enumerate(shown):
        after = shown[n + 1]["id"] if n + 1 < len(shown) else None
        if item["type"] == "reasoning" and follower[item["id"]] != after:
            out.append(item["id"])
    return out


def test_a_round_splits_the_proxys_calls_from_the_clients() -> None:
    items = (thought("rs_1"), fn("r1"), fn("c1", "shell"))
    ended = response_round(response("resp_1", *items), tool_name=TOOL)
    assert ended.recall_calls == (fn("r1"),) and ended.client_calls == (fn("c1", "shell"),)
    assert ended.content == items and ended.finish_reason == "completed"
    assert ended.usage is not None and ended.usage["input_tokens"] == 100


def test_the_continuation_keeps_reasoning_and_calls_and_answers_each_call() -> None:
    content = (thought("rs_1"), said("msg_1", "Checking."), fn("r1"), fn("r2"))
    before = copy.deepcopy(content)
    added = recall_items(content, ["one", "two"], tool_name=TOOL, round_index=0)
    assert added == [
        *content,
        {"type": "function_call_output", "call_id": "r1", "output": "one"},
        {"type": "function_call_output", "call_id": "r2", "output": "two"},
    ]
    assert content == before
    sent = next_responses_body({"model": "gpt-5", "input": "Hi"}, added, last=False, tool_name=TOOL)
    assert sent["input"][0] == {"role": "user", "content": "Hi"}
    assert wire_problem(sent) is None


def test_the_continuation_drops_the_clients_calls_and_their_reasoning() -> None:
    content = (thought("rs_1"), fn("c1", "shell"), thought("rs_2"), fn("r1"), thought("rs_3"))
    added = recall_items(content, ["one"], tool_name=TOOL, round_index=0)
    assert [i.get("id") for i in added] == ["rs_2", "fc_r1", None]
    assert wire_problem({"model": "gpt-5", "input": added}) is None


def test_a_call_without_a_call_id_gets_one_in_both_items() -> None:
    nameless = {k: v for k, v in fn("x").items() if k != "call_id"}
    added = recall_items((nameless,), ["one"], tool_name=TOOL, round_index=2)
    assert added[0]["call_id"] == added[1]["call_id"] == "call_recall_2_0"
    with pytest.raises(ValueError):
        recall_items((nameless,), [], tool_name=TOOL, round_index=0)


@pytest.mark.parametrize(
    ("choice", "last", "expected"),
    [
        ("auto", False, "auto"),
        ("auto", True, "none"),
        ({"type": "function", "name": "shell"}, True, {"type": "function", "name": "shell"}),
        ({"type": "function", "name": TOOL}, True, "none"),
    ],
)
def test_only_the_last_round_forbids_the_tool(choice: Any, last: bool, expected: Any) -> None:
    body = {"model": "gpt-5", "input": [], "tools": [RECALL_TOOL], "tool_choice": choice}
    sent = next_responses_body(body, [], last=last, tool_name=TOOL)
    assert sent["tool_choice"] == expected and sent["tools"] == [RECALL_TOOL]


@pytest.mark.parametrize(
    ("first", "second", "ids"),
    [  # reasoning then the recall call: both gone; reasoning then a message: both shown
        ((thought("rs_1"), fn("r1")), (thought("rs_2"), said("msg_2", "Done.")), ["rs_2", "msg_2"]),
        (
            (said("msg_1", "Checking."), thought("rs_1"), fn("r1")),
            (said("msg_2", "Done."),),
            ["msg_1", "msg_2"],
        ),
        (
            (thought("rs_1"), said("msg_1", "Hm."), thought("rs_2"), fn("r1"), fn("c1", "shell")),
            (thought("rs_3"), fn("c2", "shell")),
            ["rs_1", "msg_1", "rs_3", "fc_c2"],
        ),
        ((fn("r1"), thought("rs_1")), (said("msg_2", "Done."), thought("rs_2")), ["msg_2", "rs_2"]),
    ],
)
def test_combined_rounds_never_show_the_tool_nor_an_orphan_reasoning(
    first: tuple[JSON, ...], second: tuple[JSON, ...], ids: list[str]
) -> None:
    rounds = [response("resp_1", *first), response("resp_2", *second, tokens=200, choice="none")]
    before = copy.deepcopy(rounds)
    out = combine_responses(rounds, tool_name=TOOL)
    assert [item["id"] for item in out["output"]] == ids
    assert orphans(out["output"], *rounds) == []
    assert (out["id"], out["created_at"], out["tool_choice"]) == ("resp_1", 1, "auto")
    assert out["tools"] == [SHELL_TOOL] and TOOL not in str(out)
    assert out["usage"]["input_tokens"] == 300 and out["usage"]["total_tokens"] == 310
    assert out["usage"]["input_tokens_details"]["cached_tokens"] == 20
    assert rounds == before
    valid_response(out)


def test_one_response_without_a_call_loses_only_the_tool_definition() -> None:
    lone = response("resp_1", thought("rs_1"), said("msg_1", "Hi."), fn("c1", "shell"))
    out = combine_responses([lone], tool_name=TOOL)
    assert out == {**lone, "tools": [SHELL_TOOL]}


def test_earlier_rounds_show_no_client_call_the_last_shows_them() -> None:
    items = [thought("rs_1"), fn("c1", "shell")]
    assert shown_items(items, tool_name=TOOL, last=False) == []
    assert shown_items(items, tool_name=TOOL, last=True) == items
