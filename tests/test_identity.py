"""The session-id ladder of DESIGN §4 and the safety of ids taken from clients."""

from __future__ import annotations

import pytest

from proxy.identity import derived_session_id, explicit_session_id, safe_id
from tests.factories import system, user


def sid(headers: dict[str, str] | None = None, **body: object) -> str:
    """The ladder as the chat route climbs it: the client's id, else the derived one."""
    given = explicit_session_id(headers or {}, body)
    return given if given is not None else derived_session_id("t", [system("S")], [user("first")])


def test_header_wins_over_everything() -> None:
    headers = {"x-ctx-session": "abc", "x-session-id": "other"}
    assert sid(headers, prompt_cache_key="k", user="u") == "abc"


@pytest.mark.parametrize(
    ("headers", "body", "expected"),
    [
        ({"x-claude-code-session-id": "cc-1"}, {"user": "u"}, "cc-1"),
        ({"x-session-id": "s-1"}, {"user": "u"}, "s-1"),
        ({}, {"prompt_cache_key": "pk", "user": "u"}, "pk"),
        ({}, {"user": "u", "metadata": {"session_id": "m"}}, "u"),
        ({}, {"metadata": {"session_id": "m"}}, "m"),
    ],
)
def test_ladder_order(headers: dict[str, str], body: dict[str, object], expected: str) -> None:
    assert sid(headers, **body) == expected


def test_without_any_id_the_session_is_derived_and_stable() -> None:
    assert sid() == sid() == derived_session_id("t", [system("S")], [user("first")])
    other = derived_session_id("t2", [system("S")], [user("first")])
    assert other != sid()


@pytest.mark.parametrize("bad", ["../../etc", "a" * 129, "a b", "x\r\ny", "..", "{t:s}", "é"])
def test_unsafe_client_ids_are_replaced_by_a_hash(bad: str) -> None:
    out = safe_id(bad)
    assert out.startswith("h-") and len(out) == 34
    assert out == safe_id(bad)


def test_safe_ids_are_kept_as_is() -> None:
    assert safe_id("session_01:a-b.c") == "session_01:a-b.c"
