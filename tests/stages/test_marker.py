"""One message's content as parts and the `cache_control` marker on it: where ours may go."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from proxy.stages.marker import (
    Ttl,
    already_marked,
    as_parts,
    can_take_marker,
    resolve_part_index,
    text_parts,
    with_marker,
)
from proxy.types import Message
from tests.factories import assistant, call, tool, user

EPHEMERAL = {"type": "ephemeral"}
HOUR = {"type": "ephemeral", "ttl": "1h"}


def part(text: str, marker: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "text", "text": text}
    if marker is not None:
        out["cache_control"] = marker
    return out


def with_parts(role: str, *parts: Any) -> Message:
    return {"role": role, "content": list(parts)}


@pytest.mark.parametrize(
    ("text", "expected"),
    [("hi", [{"type": "text", "text": "hi"}]), ("", []), (" ", [{"type": "text", "text": " "}])],
)
def test_text_parts_is_one_text_part_and_none_for_an_empty_text(
    text: str, expected: list[Any]
) -> None:
    assert text_parts(text) == expected


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (user("hi"), [part("hi")]),
        (user(""), []),
        ({"role": "assistant", "content": None}, []),
        ({"role": "assistant"}, []),
        (
            with_parts("user", part("a"), {"type": "image_url", "x": 1}),
            [part("a"), {"type": "image_url", "x": 1}],
        ),
        ({**user("hi"), "cache_control": EPHEMERAL}, [part("hi", EPHEMERAL)]),
        (
            {**with_parts("user", part("a"), part("b")), "cache_control": HOUR},
            [part("a"), part("b", HOUR)],
        ),
        (
            {**with_parts("user", part("a", EPHEMERAL)), "cache_control": HOUR},
            [part("a", EPHEMERAL)],
        ),
        ({**user(""), "cache_control": HOUR}, []),
        ({**with_parts("user", "raw"), "cache_control": HOUR}, ["raw"]),
    ],
)
def test_as_parts_moves_a_message_marker_onto_the_last_part_unless_it_has_its_own(
    message: Message, expected: list[Any]
) -> None:
    before = copy.deepcopy(message)
    assert as_parts(message) == expected
    assert message == before


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (user("hi"), True),
        (user(""), False),
        (assistant(None, call("c1")), False),
        (with_parts("user"), False),
        (with_parts("user", part("a")), True),
        (with_parts("user", part("a"), "raw"), False),
        (tool("c1", "out"), True),
    ],
)
def test_can_take_marker_needs_content_ending_in_an_object(
    message: Message, expected: bool
) -> None:
    assert can_take_marker(message) is expected


@pytest.mark.parametrize(
    ("message", "at", "expected"),
    [
        (user("hi"), -1, False),
        ({**user("hi"), "cache_control": EPHEMERAL}, -1, True),
        (user(""), -1, True),
        (with_parts("user", part("a", EPHEMERAL), part("b")), -1, False),
        (with_parts("user", part("a", EPHEMERAL), part("b")), 0, True),
        (with_parts("user", part("a"), part("b", HOUR)), -1, True),
        (with_parts("tool", part("a", EPHEMERAL), part("b")), -1, True),
        (with_parts("tool", part("a"), part("b")), -1, False),
    ],
)
def test_already_marked_by_the_client_or_unable_to_take_a_marker(
    message: Message, at: int, expected: bool
) -> None:
    assert already_marked(message, at) is expected


@pytest.mark.parametrize(
    ("message", "at", "ttl", "expected"),
    [
        (user("q"), -1, "5m", with_parts("user", part("q", EPHEMERAL))),
        (user("q"), 0, "1h", with_parts("user", part("q", HOUR))),
        (
            with_parts("user", part("a"), part("b")),
            -1,
            "5m",
            with_parts("user", part("a"), part("b", EPHEMERAL)),
        ),
        (
            with_parts("system", part("a"), part("b")),
            0,
            "5m",
            with_parts("system", part("a", EPHEMERAL), part("b")),
        ),
        (tool("c1", "out"), -1, "1h", {**tool("c1", "out"), "cache_control": HOUR}),
        (
            with_parts("tool", part("a"), part("b")),
            -1,
            "5m",
            {**with_parts("tool", part("a"), part("b")), "cache_control": EPHEMERAL},
        ),
    ],
)
def test_with_marker_marks_a_copy_on_the_part_or_a_tool_message_itself(
    message: Message, at: int, ttl: Ttl, expected: Message
) -> None:
    before = copy.deepcopy(message)
    assert with_marker(message, at, ttl) == expected
    assert message == before


def test_with_marker_keeps_unknown_keys_of_the_message_and_the_part() -> None:
    message = {"role": "user", "content": [{**part("a"), "x-part": 1}], "x-message": 2}
    assert with_marker(message, -1, "5m") == {
        "role": "user",
        "content": [{**part("a", EPHEMERAL), "x-part": 1}],
        "x-message": 2,
    }


@pytest.mark.parametrize(
    ("message", "at", "expected"),
    [
        (with_parts("user", part("a"), part("b"), part("c")), -1, 2),
        (with_parts("user", part("a"), part("b"), part("c")), -3, 0),
        (with_parts("user", part("a"), part("b"), part("c")), 1, 1),
        (user("q"), -1, 0),
        (user("q"), 0, 0),
        (with_parts("user"), -1, 0),
    ],
)
def test_resolve_part_index_counts_negative_parts_from_the_end_and_is_zero_for_a_string(
    message: Message, at: int, expected: int
) -> None:
    assert resolve_part_index(message, at) == expected
