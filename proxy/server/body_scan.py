"""How deep a request body nests, whether it holds a client cache marker, and whether orjson read
some integer of it as a float (beyond 64 bits), found in one walk, skipping tool definitions
equal to ones walked before. Pure but for the bounded memo of those.

Agents resend the same tool definitions with every request (tens of KB of JSON schemas: many
small objects); two equal JSON values nest alike and hold the same keys, and comparing them runs
in C, several times faster than walking them in Python. The same for the history was measured
and dropped: its messages are few large objects, and the bookkeeping cost as much as it saved.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from proxy.types import JSON

FLOAT_OF_AN_INTEGER = float(2**63)
"""orjson reads an integer outside [-2**63, 2**64) as a float: one of this size or more may be
such an integer, which the stdlib's parser can read exactly."""


class Scan(NamedTuple):
    too_deep: bool
    """More than `limit` arrays/objects nest (an empty one counts, as for orjson)."""
    marked: bool
    """Some object has a `cache_control` key."""
    inexact: bool = False
    """Some number is a float of magnitude `FLOAT_OF_AN_INTEGER` or more."""


def scan_body(body: JSON, limit: int, known: KnownTools | None) -> Scan:
    """`scan(body, limit)`, with tool definitions that `known` has seen not walked again."""
    tools = body.get("tools")
    if known is None or type(tools) is not list or not tools:
        return scan(body, limit)
    rest = dict(body)
    del rest["tools"]
    found = scan(rest, limit)
    in_tools = known.scanned(tools, limit - 1)  # one level below the body
    return Scan(*(a or b for a, b in zip(found, in_tools, strict=True)))


class KnownTools:
    """The last `size` tool definitions found shallow enough, with whether they hold a marker.
    One per app; any tenant's equal definitions count (the answer depends only on them). They
    are held as they came: nothing changes a request's body."""

    def __init__(self, size: int = 8) -> None:
        self._size = size
        self._entries: list[tuple[Any, Scan]] = []

    def scanned(self, tools: Any, limit: int) -> Scan:
        """`scan(tools, limit)`, from memory when equal definitions were found shallow enough."""
        for index, (seen, found) in enumerate(self._entries):
            if seen == tools:
                if index:  # the most recently used first
                    self._entries.insert(0, self._entries.pop(index))
                return found
        found = scan(tools, limit)
        if not found.too_deep:
            self._entries.insert(0, (tools, found))
            del self._entries[self._size :]
        return found


def scan(value: Any, limit: int) -> Scan:
    """One pass over the containers, level by level; the strings are never looked at (serialising
    to find out cost as much as encoding every string of the body). Exact types, as `orjson`
    builds them: plain loops and `type() is` checks take two thirds of a comprehension with
    `isinstance` (14 against 21 µs on the agentic benchmark body)."""
    level, depth, marked, inexact = [value], 0, False, False
    while level:
        depth += 1
        if depth > limit:
            return Scan(True, marked, inexact)
        below: list[Any] = []
        for item in level:
            if type(item) is dict:
                if "cache_control" in item:
                    marked = True
                children = item.values()
            else:
                children = item
            for child in children:
                kind = type(child)
                if kind is dict or kind is list:
                    below.append(child)
                elif kind is float and abs(child) >= FLOAT_OF_AN_INTEGER:
                    inexact = True
        level = below
    return Scan(False, marked, inexact)
