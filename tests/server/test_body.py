"""Checking a chat body before the pipeline: the nesting limit is orjson's serialising limit."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from proxy.errors import BadRequest
from proxy.server.body import NESTING_MARGIN, check_nesting


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
