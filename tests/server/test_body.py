"""Checking a chat body before the pipeline: the nesting limit is orjson's serialising limit."""

from __future__ import annotations

import copy
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.errors import BadRequest
from proxy.server.body import (
    NESTING_MARGIN,
    KnownTools,
    read_json,
    read_json_object,
    scan,
    scan_body,
)
from proxy.server.body import scanned as check_scan


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
        check_scan(body)
    else:
        with pytest.raises(BadRequest):
            check_scan(body)


def test_check_nesting_accepts_a_wide_shallow_body() -> None:
    check_scan({"messages": [{"role": "user", "content": [{"type": "text"}] * 10_000}]})


def test_check_nesting_says_whether_some_object_has_a_cache_control_key() -> None:
    marked = {
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
            }
        ]
    }
    assert check_scan(marked).marked is True
    assert check_scan({"tools": [{"cache_control": None}], "messages": []}).marked is True
    plain = {"messages": [{"role": "user", "content": "cache_control"}], "cache": ["cache_control"]}
    assert check_scan(plain).marked is False


@pytest.mark.parametrize("depth", [1, 243, 244, 245, 246, 300])
def test_known_tools_give_the_same_answers_as_walking_them(depth: int) -> None:
    known = KnownTools()
    deep = nested(depth, leaf="s", kind="mixed")
    body = {
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": deep}}],
    }
    for _ in range(2):  # the second time from memory, if the first was shallow enough
        fresh = copy.deepcopy(body)  # equal tools, other objects
        if serialisable_with_margin(body):
            assert check_scan(fresh, known=known).marked is False
        else:
            with pytest.raises(BadRequest):
                check_scan(fresh, known=known)


def test_known_tools_remember_a_marker_and_the_rest_of_the_body_is_still_walked() -> None:
    known = KnownTools()
    marked_tools = [{"type": "function", "function": {"name": "f"}, "cache_control": {}}]
    plain_tools = [{"type": "function", "function": {"name": "g"}}]
    assert check_scan({"messages": [], "tools": marked_tools}, known=known).marked is True
    assert check_scan({"messages": [], "tools": copy.deepcopy(marked_tools)}, known=known).marked
    assert check_scan({"messages": [], "tools": plain_tools}, known=known).marked is False
    marked = {"role": "user", "content": [{"type": "text", "text": "a", "cache_control": {}}]}
    assert check_scan({"messages": [marked], "tools": plain_tools}, known=known).marked is True
    deep = [{"role": "user", "x": nested(300, leaf=1, kind="list")}]
    with pytest.raises(BadRequest):
        check_scan({"messages": deep, "tools": plain_tools}, known=known)


def test_known_tools_keep_the_most_recently_used() -> None:
    known = KnownTools(size=2)
    first, second, third = ([{"name": n}] for n in "abc")
    for value in (first, second, [{"name": "a"}], third):
        known.scanned(value, 10)
    assert [seen for seen, _ in known._entries] == [third, first]


_LEAVES = st.one_of(st.none(), st.integers(), st.text(max_size=3))
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["cache_control", "content", "x"]), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.lists(_VALUES, max_size=3), st.lists(_VALUES, max_size=3)),
        min_size=1,
        max_size=6,
    ),
    st.integers(2, 7),
)
def test_scanning_with_known_tools_answers_like_walking_each_body(
    requests: list[tuple[list[Any], list[Any]]], limit: int
) -> None:
    known = KnownTools(size=2)
    for messages, tools in requests:
        body: dict[str, Any] = {"messages": copy.deepcopy(messages), "model": "m"}
        if tools:
            body["tools"] = copy.deepcopy(tools)
        too_deep, marked, _ = scan(body, limit)
        found = scan_body(body, limit, known)
        assert found[0] == too_deep and (too_deep or found[1] == marked)  # refused either way


def test_a_float_orjson_made_of_an_integer_beyond_64_bits_is_found_in_tools_too() -> None:
    known = KnownTools()
    tools = orjson.loads(b'[{"parameters": {"maximum": 123456789012345678901234567890}}]')
    assert check_scan({"messages": [], "seed": float(2**64)}).inexact
    assert check_scan({"messages": [], "seed": -float(2**63)}).inexact
    assert not check_scan({"messages": [], "temperature": 0.7, "seed": 2**64 - 1}).inexact
    for _ in range(2):  # walked, then from memory
        assert check_scan({"messages": [], "tools": tools}, known=known).inexact


async def read_as(aiohttp_server: Any, raw: bytes) -> bytes:
    """What `read_json` and `read_json_object` make of `raw` sent to a real server, as JSON: each
    one's value and whether it was marked, or the error's message."""

    async def handle(request: web.Request) -> web.Response:
        answers: list[Any] = []
        for read in (read_json, read_json_object):
            try:
                body, found = await read(request)
                answers.append([body, None if found is None else found.marked])
            except BadRequest as exc:
                answers.append(str(exc))
        return web.Response(body=orjson.dumps(answers))

    app = web.Application()
    app.router.add_post("/", handle)
    server = await aiohttp_server(app)
    async with aiohttp.ClientSession() as http, http.post(server.make_url("/"), data=raw) as r:
        return await r.read()


async def test_a_body_is_read_once_and_only_an_object_is_scanned(aiohttp_server: Any) -> None:
    assert orjson.loads(await read_as(aiohttp_server, b"[1]")) == [
        [[1], None],
        "Request body must be a JSON object.",
    ]
    marked = b'{"m": [{"cache_control": {}}]}'
    assert orjson.loads(await read_as(aiohttp_server, marked)) == [[orjson.loads(marked), True]] * 2
    [json_error, object_error] = orjson.loads(await read_as(aiohttp_server, b"{not json"))
    assert json_error == object_error and json_error.startswith("Request body is not valid JSON")


async def test_an_integer_beyond_64_bits_is_read_exactly(aiohttp_server: Any) -> None:
    read = await read_as(aiohttp_server, b'{"seed": 18446744073709551617}')
    assert read.count(b'{"seed":18446744073709551617}') == 2
