"""One Anthropic block ⇄ one chat part or tool call: the tool arguments' compact JSON."""

from __future__ import annotations

import json

import pytest

from proxy.inbound.messages_blocks import compact_json, tool_call_of


@pytest.mark.parametrize(
    "value",
    [{"path": "a.py", "n": [1, 2.5, None, True]}, {"ünï": '😀 "q"'}, {}, 2**70, "\ud800"],
    ids=["plain", "unicode", "empty", "beyond-64-bits", "lone-surrogate"],
)
def test_compact_json_reads_back_as_the_value(value: object) -> None:
    text = compact_json(value)
    assert json.loads(text) == value
    assert ", " not in text and ": " not in text.replace('": "', "")


def test_a_tool_use_becomes_a_call_with_compact_arguments_and_its_marker() -> None:
    marker = {"type": "ephemeral"}
    block = {"type": "tool_use", "id": "t1", "name": "Read", "input": {"path": "é"},
             "cache_control": marker}  # fmt: skip
    assert tool_call_of(block) == {
        "id": "t1",
        "type": "function",
        "function": {"name": "Read", "arguments": '{"path":"é"}'},
        "cache_control": marker,
    }
