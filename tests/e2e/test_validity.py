"""The request checker the suite and the benchmarks rely on catches each kind of violation."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.validity import problem, problems

CALL = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
MARK = {"cache_control": {"type": "ephemeral"}}


def body(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "m", "messages": list(messages)}


def test_a_valid_conversation_has_no_problem() -> None:
    valid = body(
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
        {"role": "assistant", "content": "done"},
    )
    assert problems(valid) == [] and problem(valid) == ""


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ([{"role": "user", "content": "u"}, {"role": "tool", "tool_call_id": "x", "content": ""}],
         "without a preceding call"),
        ([{"role": "assistant", "tool_calls": [CALL]}, {"role": "user", "content": "u"}],
         "without a result"),
        ([{"role": "assistant", "tool_calls": [CALL]}], "without a result at the end"),
        ([{"role": "user", "content": "u"}, {"role": "system", "content": "s"}],
         "system message after"),
        ([{"role": "robot", "content": "u"}], "unknown role"),
        ([{"role": "user", "content": [{"type": "text", "text": "t", **MARK}] * 5}],
         "5 cache_control breakpoints"),
    ],
)  # fmt: skip
def test_each_violation_is_named(messages: list[dict[str, Any]], expected: str) -> None:
    assert expected in problem(body(*messages))
