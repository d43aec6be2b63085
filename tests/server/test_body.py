"""Checking a chat body before the pipeline: the nesting limit is orjson's serialising limit."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from proxy.errors import BadRequest
from proxy.server.body import NESTING_MARGIN, KnownTools, check_nesting


def nested(depth: int, *, leaf: Any, kind: str) -> Any:
    value = leaf
    for level in range(depth):
        value = [value] if kind == "list" or (kind == "mixed" and level % 2) else {"k": value}
    return value


def serialisable_with_margin(body: Any) -> bool:
    wrapped = body
    for _ in range(NESTING_MARGIN):
        wrapped = [wrapped]
    try:
        orjson.dumps(wrapped)
    except orjson.JSONEncodeError:
        return False
    return True


@pytest.mark.parametrize("kind", ["list", "dict", "mixed"])
@pytest.mark.parametrize("leaf", [1, "s", [], {}, None])
@pytest.mark.parametrize("depth", [1, 244, 245, 246, 247, 300])
def test_check_nesting_refuses_exactly_what_could_not_be_sent_on(
    kind: str, leaf: Any, depth: int
) -> None:
    body = {"messages": [{"role": "user", "deep": nested(depth, leaf=leaf, kind=kind)}]}
    if serialisable_with_margin(body):
        check_nesting(body)
    else:
        with pytest.raises(BadRequest):
            check_nesting(body)


def test_check_nesting_accepts_a_wide_shallow_body() -> None:
    check_nesting({"messages": [{"role": "user", "content": [{"type": "text"}] * 10_000}]})


def test_check_nesting_says_whether_some_object_has_a_cache_control_key() -> None:
    marked = {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}]}
    assert check_nesting(marked) is True
    assert check_nesting({"tools": [{"cache_control": None}], "messages": []}) is True
    plain = {"messages": [{"role": "user", "content": "cache_control"}], "cache": ["cache_control"]}
    assert check_nesting(plain) is False


@pytest.mark.parametrize("depth", [1, 243, 244, 245, 246, 300])
def test_known_tools_give_the_same_answers_as_walking_them(depth: int) -> None:
    known = KnownTools()
    tools = [{"type": "function", "function": {"name": "f", "parameters": nested(
        depth, leaf="s", kind="mixed")}}]
    body = {"messages": [{"role": "user", "content": "hi"}], "tools": tools}
    for _ in range(2):  # the second time from memory, if the first was shallow enough
        fresh = copy.deepcopy(body)  # equal tools, other objects
        if serialisable_with_margin(body):
            assert check_nesting(fresh, known=known) is False
        else:
            with pytest.raises(BadRequest):
                check_nesting(fresh, known=known)
    assert (known.marked(tools) is None) == (not serialisable_with_margin(body))


def test_known_tools_remember_a_marker_and_the_rest_of_the_body_is_still_walked() -> None:
    known = KnownTools()
    tools = [{"type": "function", "function": {"name": "f"}, "cache_control": {"type": "x"}}]
    plain_tools = [{"type": "function", "function": {"name": "g"}}]
    assert check_nesting({"messages": [], "tools": tools}, known=known) is True
    assert check_nesting({"messages": [], "tools": list(tools)}, known=known) is True
    assert check_nesting({"messages": [], "tools": plain_tools}, known=known) is False
    marked_message = {"role": "user", "content": [{"type": "text", "cache_control": {}}]}
    assert check_nesting({"messages": [marked_message], "tools": plain_tools}, known=known)
    deep = {"messages": [{"role": "user", "x": nested(300, leaf=1, kind="list")}],
            "tools": plain_tools}
    with pytest.raises(BadRequest):
        check_nesting(deep, known=known)


def test_known_tools_keep_the_most_recently_used() -> None:
    known = KnownTools(size=2)
    first, second, third = ([{"name": n}] for n in "abc")
    for tools in (first, second):
        known.remember(tools, marked=False)
    assert known.marked([{"name": "a"}]) is False  # `first` is now the most recent
    known.remember(third, marked=True)
    assert known.marked(second) is None and known.marked(first) is False
    assert known.marked(third) is True
