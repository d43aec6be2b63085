"""The tool calls of one streamed round, held until its finish_reason. Pure.

A streamed call comes in deltas: the first carries `index`, `id` and the function's name, the
others argument fragments under the same `index`. `HeldCalls.take` builds each call and keeps the
chunk it came in; `split` gives the whole calls (the recall tool's, the client's); `release`
gives the chunks of the client's calls only, indexed from 0 in upstream order, each as it came
when nothing about it changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from proxy.types import JSON

__all__ = ["HeldCalls"]


@dataclass(slots=True)
class _Call:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def as_json(self) -> JSON:
        function = {"name": self.name, "arguments": "".join(self.arguments)}
        return {"id": self.id, "type": "function", "function": function}


class HeldCalls:
    """One round's tool calls; `tool_name` is the recall tool's."""

    __slots__ = ("_calls", "_chunks", "tool_name")

    def __init__(self, *, tool_name: str) -> None:
        self.tool_name = tool_name
        self._calls: dict[int, _Call] = {}
        """Upstream index → the call as its deltas built it."""
        self._chunks: list[tuple[bytes, JSON]] = []
        """Each chunk: its bytes (empty when they cannot go out as they came), its payload."""

    @property
    def recall(self) -> bool:
        """Whether the model called the recall tool in this round (so far)."""
        return any(call.name == self.tool_name for call in self._calls.values())

    @property
    def client(self) -> bool:
        """Whether the round holds a call of the client's own."""
        return any(call.name != self.tool_name for call in self._calls.values())

    def take(self, payload: JSON, deltas: list[Any], *, raw: bytes) -> None:
        """Take in one chunk's tool-call `deltas`; `payload` is the chunk with only them in its
        delta, `raw` its bytes when it carries nothing else (else empty)."""
        for delta in deltas:
            if not isinstance(delta, dict):
                continue
            call = self._calls.setdefault(_index(delta), _Call())
            function = delta.get("function")
            function = function if isinstance(function, dict) else {}
            call.id = call.id or str(delta.get("id") or "")
            call.name = call.name or str(function.get("name") or "")
            if isinstance(function.get("arguments"), str):
                call.arguments.append(function["arguments"])
        self._chunks.append((raw, payload))

    def split(self) -> tuple[tuple[JSON, ...], tuple[JSON, ...]]:
        """(the recall calls, the client's calls), whole, in upstream order."""
        calls = sorted(self._calls.items())
        return (
            tuple(c.as_json() for _, c in calls if c.name == self.tool_name),
            tuple(c.as_json() for _, c in calls if c.name != self.tool_name),
        )

    def release(self, encode: Callable[[JSON], bytes], *, as_they_came: bool) -> bytes:
        """The chunks of the client's calls, indexed from 0; a chunk goes out as it came when
        `as_they_came` and no index changes, else through `encode` with its other deltas gone."""
        mine = sorted(i for i, call in self._calls.items() if call.name != self.tool_name)
        new_index = {upstream: client for client, upstream in enumerate(mine)}
        same = as_they_came and len(mine) == len(self._calls) and mine == list(range(len(mine)))
        out = bytearray()
        for raw, payload in self._chunks:
            if same and raw:
                out += raw
                continue
            choice = payload["choices"][0]
            deltas = [
                {**delta, "index": new_index[_index(delta)]}
                for delta in choice["delta"]["tool_calls"]
                if isinstance(delta, dict) and _index(delta) in new_index
            ]
            if deltas:
                changed = {**choice, "delta": {"tool_calls": deltas}}
                out += encode({**payload, "choices": [changed]})
        return bytes(out)


def _index(delta: JSON) -> int:
    """A delta's `index` (0 when missing or not a number: a lone call)."""
    index = delta.get("index", 0)
    return index if isinstance(index, int) else 0
