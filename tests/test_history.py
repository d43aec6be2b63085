"""Chained prefix hashes identify exactly the messages a summary describes."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from proxy.engine import memo as history_memo
from proxy.engine.memo import LineageMemo, MatchMemo, SystemDigests
from proxy.history import (
    history_salt,
    lineage,
    longest_matching,
    prefix_hash,
    prefix_hashes,
    system_digest,
)
from proxy.identity import derived_session_id
from proxy.types import StoredCompaction
from tests.factories import assistant, system, user

HISTORY = [user("a"), assistant("b"), user("c"), assistant("d")]


def stored(covers: int, history=HISTORY, salt: str = "s") -> StoredCompaction:  # type: ignore[no-untyped-def]
    return StoredCompaction(
        prefix_hash=prefix_hash(history, covers, salt=salt),
        covers=covers,
        replacement=(user("summary"),),
    )


def test_hashes_are_chained_and_key_order_does_not_matter() -> None:
    reordered = [{"content": m["content"], "role": m["role"]} for m in HISTORY]
    assert prefix_hashes(HISTORY, salt="s") == prefix_hashes(reordered, salt="s")
    assert len(set(prefix_hashes(HISTORY, salt="s"))) == 4


def test_longest_stored_prefix_wins() -> None:
    found = longest_matching(HISTORY, [stored(1), stored(3), stored(2)], salt="s")
    assert found is not None and found.covers == 3


def test_edited_history_does_not_match() -> None:
    edited = [user("a"), assistant("B"), *HISTORY[2:]]
    assert longest_matching(edited, [stored(3)], salt="s") is None
    assert longest_matching(edited, [stored(1)], salt="s") is not None


def test_other_salt_or_shorter_history_does_not_match() -> None:
    assert longest_matching(HISTORY, [stored(3)], salt="other") is None
    assert longest_matching(HISTORY[:2], [stored(3)], salt="s") is None


def test_a_history_that_is_all_prefix_keeps_its_own_messages() -> None:
    """A summary stands for a prefix only when the request goes on past it: one message more."""
    assert longest_matching(HISTORY[:3], [stored(3)], salt="s") is None
    assert longest_matching(HISTORY[:1], [stored(1)], salt="s") is None
    found = longest_matching(HISTORY[:3], [stored(1), stored(2), stored(3)], salt="s")
    assert found is not None and found.covers == 2
    whole = stored(3, salt=history_salt("t", []))
    assert MatchMemo().applied("t", [], HISTORY[:3], [whole]) is None


def test_salt_depends_on_tenant_and_client_system() -> None:
    assert history_salt("t", [system("x")]) != history_salt("t", [system("y")])
    assert history_salt("t", [system("x")]) != history_salt("u", [system("x")])


def test_lineage_is_the_salted_hash_of_the_first_message() -> None:
    salt = history_salt("t", [system("x")])
    assert lineage("t", [system("x")], HISTORY) == prefix_hash(HISTORY, 1, salt=salt)[:16]
    assert lineage("t", [system("x")], HISTORY[:1]) == lineage("t", [system("x")], HISTORY)
    assert lineage("t", [system("x")], [user("other")]) != lineage("t", [system("x")], HISTORY)
    assert lineage("t", [system("x")], []) == salt[-16:]


def test_lineage_memo_answers_like_lineage() -> None:
    memo = LineageMemo()
    long_system = [system("rules " * 5000)]
    cases = [
        ("t", [system("x")], HISTORY),
        ("t", [system("x")], []),
        ("u", [system("x")], HISTORY),
        ("t", long_system, HISTORY),
        ("t", long_system, [user("b" * 300 + "a" + "b" * 300)]),
        ("t", long_system, [user("b" * 300 + "c" + "b" * 300)]),  # same length and edges
        ("t", [], [user("a")]),
    ]
    for _ in range(2):
        for tenant, sys, history in cases:
            fresh = copy.deepcopy((sys, history))  # equal content, other objects
            assert memo.lineage(tenant, *fresh) == lineage(tenant, sys, history)


def test_lineage_memo_derives_session_ids_like_identity() -> None:
    memo = LineageMemo()
    long_system = (system("rules " * 5000),)
    cases = [
        ("t", (system("x"),), HISTORY),
        ("t", (system("x"),), []),  # no user message
        ("t", (system("x"),), [assistant("hello"), user("first")]),  # the first *user* message
        ("u", (system("x"),), HISTORY),
        ("t", long_system, [user("b" * 300 + "a" + "b" * 300)]),
        ("t", long_system, [user("b" * 300 + "c" + "b" * 300)]),  # same length and edges
        ("t", (), [user("a")]),
    ]
    ids = set()
    for _ in range(2):
        for tenant, sys, history in cases:
            fresh = copy.deepcopy((sys, history))  # equal content, other objects
            derived = memo.session_id(tenant, *fresh)
            assert derived == derived_session_id(tenant, sys, history)
            assert memo.session_id(tenant, fresh[0], fresh[1]) == derived  # the same tuple again
            ids.add(derived)
    assert len(ids) == len(cases)
    assert memo.session_id("t", (system("x"),), HISTORY) != memo.lineage(
        "t", (system("x"),), HISTORY
    )


def test_system_digests_reuse_only_the_very_same_tuple() -> None:
    digests = SystemDigests()
    first = (system("a"),)
    assert digests.of(first) == system_digest(first)
    assert digests.of((system("b"),)) == system_digest([system("b")])  # equal content: recomputed
    listed = [system("c")]
    assert digests.of(listed) == system_digest(listed)
    listed[0] = system("d")  # a list may change under the same identity: never reused
    assert digests.of(listed) == system_digest([system("d")])


def test_lineage_memo_holds_at_most_max_bytes() -> None:
    memo = LineageMemo(max_bytes=100)
    for text in ("a" * 30, "b" * 30, "c" * 30, "d" * 200):
        assert memo.lineage("t", [], [user(text)]) == lineage("t", [], [user(text)])
    assert memo._entries.size <= 100
    assert len(memo._entries) == 1  # "c" only: "a" and "b" made room, "d" is too big to keep


def test_match_memo_answers_like_longest_matching() -> None:
    memo = MatchMemo()
    sys = [system("x" * 500)]
    salt = history_salt("t", sys)
    history = [*HISTORY, user("e" * 300)]
    edited = [user("A"), *history[1:]]
    compactions = [stored(1, history, salt), stored(3, history, salt), stored(4, history, salt)]
    cases = [
        ("t", sys, history, compactions),
        ("t", sys, history[:3], compactions),  # the longest that fits
        ("t", sys, edited, compactions),  # an edited history matches nothing
        ("u", sys, history, compactions),  # another tenant's salt
        ("t", [system("y")], history, compactions),  # another system prompt
        ("t", sys, history, compactions[:1]),
        ("t", sys, history, []),
    ]
    for _ in range(2):
        for tenant, client_system, messages, stored_ones in cases:
            fresh = copy.deepcopy((client_system, messages))  # equal content, other objects
            expected = longest_matching(
                messages, stored_ones, salt=history_salt(tenant, client_system)
            )
            assert memo.applied(tenant, *fresh, stored_ones) == expected
    assert memo.applied("t", sys, history, compactions) == compactions[2]


def test_match_memo_holds_at_most_max_bytes() -> None:
    memo = MatchMemo(max_bytes=200)
    for text in ("a" * 60, "b" * 60, "c" * 60, "d" * 300):
        history = [user(text), assistant("ok"), user("go on")]
        compaction = stored(2, history, history_salt("t", []))
        assert memo.applied("t", [], history, [compaction]) == compaction
        assert memo._entries.size <= 200
    assert len(memo._entries) == 1  # "c" only: "d" is too big to keep


def test_match_memo_hashes_a_history_seen_before_only_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    real = history_memo.chained

    def counted(salt: str, digests: Any) -> list[str]:
        calls.append(salt)
        return real(salt, digests)

    monkeypatch.setattr(history_memo, "chained", counted)
    memo = MatchMemo()
    compaction = stored(3, HISTORY, history_salt("t", []))
    for _ in range(3):
        assert memo.applied("t", [], copy.deepcopy(HISTORY), [compaction]) == compaction
    assert len(calls) == 1
