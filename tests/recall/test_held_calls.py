"""One streamed round's tool calls: built from deltas, split, released indexed from 0."""

from __future__ import annotations

from typing import Any

import orjson

from proxy.recall.held_calls import HeldCalls
from proxy.types import JSON


def chunk(*deltas: dict[str, Any]) -> JSON:
    choice = {"index": 0, "delta": {"tool_calls": list(deltas)}, "finish_reason": None}
    return {"id": "c", "choices": [choice]}


def first(index: int, call_id: str, name: str) -> dict[str, Any]:
    function = {"name": name, "arguments": ""}
    return {"index": index, "id": call_id, "type": "function", "function": function}


def more(index: int, arguments: str) -> dict[str, Any]:
    return {"index": index, "function": {"arguments": arguments}}


def encode(payload: JSON) -> bytes:
    return orjson.dumps(payload) + b"\n"


def held(*chunks: JSON) -> HeldCalls:
    calls = HeldCalls(tool_name="ctx_recall")
    for payload in chunks:
        deltas = payload["choices"][0]["delta"]["tool_calls"]
        calls.take(payload, deltas, raw=b"RAW" + encode(payload))
    return calls


def test_calls_are_built_from_their_deltas_and_split() -> None:
    calls = held(
        chunk(first(0, "r1", "ctx_recall")),
        chunk(first(1, "b1", "bash")),
        chunk(more(0, '{"ref":'), more(1, "{}")),
        chunk(more(0, ' "x"}')),
    )
    assert calls.recall and calls.client
    recall, client = calls.split()
    assert recall == (
        {
            "id": "r1",
            "type": "function",
            "function": {"name": "ctx_recall", "arguments": '{"ref": "x"}'},
        },
    )
    assert [c["id"] for c in client] == ["b1"]


def test_release_gives_only_the_clients_calls_indexed_from_zero() -> None:
    calls = held(
        chunk(first(0, "r1", "ctx_recall")),
        chunk(first(1, "b1", "bash")),
        chunk(more(0, "{}"), more(1, '{"a": 1}')),
    )
    out = [orjson.loads(line) for line in calls.release(encode, as_they_came=True).splitlines()]
    deltas = [d for payload in out for d in payload["choices"][0]["delta"]["tool_calls"]]
    assert deltas == [first(0, "b1", "bash"), more(0, '{"a": 1}')]


def test_release_sends_chunks_as_they_came_when_no_index_changes() -> None:
    calls = held(chunk(first(0, "b1", "bash")), chunk(more(0, "{}")))
    assert calls.release(encode, as_they_came=True).count(b"RAW") == 2
    assert b"RAW" not in calls.release(encode, as_they_came=False)


def test_a_delta_without_an_index_is_the_lone_call() -> None:
    calls = held(chunk({"id": "b1", "function": {"name": "bash", "arguments": "{}"}}))
    assert calls.split()[1][0]["function"] == {"name": "bash", "arguments": "{}"}
