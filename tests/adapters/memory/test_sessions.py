"""The embedded store's session record and the operator's views of it, shaped like Redis's."""

from __future__ import annotations

import copy

import pytest

from proxy.adapters.memory.sessions import (
    SWEEP_EVERY_S,
    SessionEntry,
    SessionTable,
    as_text,
    describe_session,
    list_recent,
)
from proxy.types import StoredCompaction

NOW = 1_000.0


def entry(
    tenant: str, session: str, updated_at: float | None, *, expires_at: float
) -> tuple[tuple[str, str], SessionEntry]:
    state: dict[str, str | int | float] = {"tenant": tenant, "session": session}
    if updated_at is not None:
        state["updated_at"] = updated_at
    return (tenant, session), SessionEntry(state=state, expires_at=expires_at)


SESSIONS = dict(
    [
        entry("t1", "old", 10.0, expires_at=NOW + 1),
        entry("t1", "new", 30.0, expires_at=NOW + 1),
        entry("t2", "mid", 20.0, expires_at=NOW + 1),
        entry("t1", "gone", 40.0, expires_at=NOW),
        entry("t2", "never", None, expires_at=NOW + 1),
    ]
)


@pytest.mark.parametrize(
    ("tenant", "limit", "expected"),
    [
        ("t1", 10, ["new", "old"]),
        ("t2", 10, ["mid", "never"]),
        (None, 10, ["new", "mid", "old", "never"]),
        (None, 2, ["new", "mid"]),
        (None, 0, []),
        ("t3", 10, []),
    ],
)
def test_list_recent_gives_live_sessions_of_the_tenant_newest_first_up_to_the_limit(
    tenant: str | None, limit: int, expected: list[str]
) -> None:
    before = copy.deepcopy(SESSIONS)
    rows = list_recent(SESSIONS, tenant, limit=limit, now=NOW)
    assert [row["session"] for row in rows] == expected
    assert before == SESSIONS


def test_list_recent_drops_a_session_expiring_exactly_now() -> None:
    sessions = dict([entry("t1", "s1", 1.0, expires_at=NOW)])
    assert list_recent(sessions, "t1", limit=10, now=NOW) == []
    assert len(list_recent(sessions, "t1", limit=10, now=NOW - 0.001)) == 1


def test_list_recent_rows_are_the_state_as_text() -> None:
    sessions = {
        ("t1", "s1"): SessionEntry(
            state={"session": "s1", "requests": 3, "updated_at": 5.5}, expires_at=NOW + 1
        )
    }
    assert list_recent(sessions, None, limit=1, now=NOW) == [
        {"session": "s1", "requests": "3", "updated_at": "5.5"}
    ]


def test_describe_session_shows_state_as_text_compactions_in_full_and_sizes() -> None:
    summary = {"role": "user", "content": "[Conversation summary]\nfacts"}
    compaction = StoredCompaction(
        prefix_hash="abc", covers=4, replacement=(summary,), created_at=7.0, archive_id="9-0"
    )
    session = SessionEntry(
        state={"requests": 2, "model": "gpt-4o"},
        decisions={"c1": "cut"},
        compactions={"abc": compaction},
        archived=2,
        snapshot=b"[1,2,3]",
    )
    before = copy.deepcopy(session)
    assert describe_session(session) == {
        "state": {"requests": "2", "model": "gpt-4o"},
        "compactions": [
            {
                "prefix_hash": "abc",
                "covers": 4,
                "created_at": 7.0,
                "archive_id": "9-0",
                "replacement": [summary],
            }
        ],
        "archive_entries": 2,
        "snapshot_bytes": 7,
    }
    assert session == before


def test_describe_session_of_an_empty_entry_has_nothing_to_show() -> None:
    assert describe_session(SessionEntry()) == {
        "state": {},
        "compactions": [],
        "archive_entries": 0,
        "snapshot_bytes": 0,
    }


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ({}, {}),
        ({"model": "gpt-4o"}, {"model": "gpt-4o"}),
        (
            {"requests": 3, "zero": 0, "negative": -2},
            {"requests": "3", "zero": "0", "negative": "-2"},
        ),
        ({"updated_at": 5.5, "whole": 5.0}, {"updated_at": "5.5", "whole": "5.0"}),
    ],
)
def test_as_text_writes_every_value_as_text_like_hgetall(
    state: dict[str, str | int | float], expected: dict[str, str]
) -> None:
    before = copy.deepcopy(state)
    assert as_text(state) == expected
    assert state == before


def test_a_write_renews_the_ttl_and_a_read_does_not() -> None:
    table = SessionTable(ttl_s=100, now=0.0)
    created = table.live("t1", "s1", now=0.0, create=True)
    assert created is not None
    assert table.live("t1", "s1", now=90.0, create=False) is created
    assert table.live("t1", "s1", now=90.0, create=True) is created  # a write: until 190
    assert table.live("t1", "s1", now=150.0, create=False) is created
    assert table.live("t1", "s1", now=190.0, create=False) is None
    assert table.entries == {}  # dropped when touched expired


def test_a_session_expired_by_the_time_it_is_written_again_starts_afresh() -> None:
    table = SessionTable(ttl_s=100, now=0.0)
    old = table.live("t1", "s1", now=0.0, create=True)
    assert old is not None
    old.state["requests"] = 3
    fresh = table.live("t1", "s1", now=100.0, create=True)
    assert fresh is not old and fresh is not None and fresh.state == {}


def test_untouched_expired_sessions_are_swept_at_most_once_a_minute() -> None:
    table = SessionTable(ttl_s=10, now=0.0)
    for index in range(5):
        table.live("t1", f"s{index}", now=0.0, create=True)
    table.live("t1", "a", now=SWEEP_EVERY_S - 1, create=True)  # too soon for a sweep
    assert len(table.entries) == 6
    table.live("t1", "b", now=SWEEP_EVERY_S, create=True)
    assert sorted(session for _, session in table.entries) == ["a", "b"]
