"""The embedded store's session table: a TTL renewed by each write, swept once a minute."""

from __future__ import annotations

from proxy.adapters.memory.table import SWEEP_EVERY_S, SessionTable


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
