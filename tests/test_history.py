"""Chained prefix hashes identify exactly the messages a summary describes."""

from __future__ import annotations

from proxy.history import history_salt, lineage, longest_matching, prefix_hash, prefix_hashes
from proxy.types import StoredCompaction
from tests.factories import assistant, system, user

HISTORY = [user("a"), assistant("b"), user("c"), assistant("d")]


def stored(covers: int, history=HISTORY, salt: str = "s") -> StoredCompaction:  # type: ignore[no-untyped-def]
    return StoredCompaction(prefix_hash=prefix_hash(history, covers, salt=salt), covers=covers,
                            replacement=(user("summary"),))


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


def test_salt_depends_on_tenant_and_client_system() -> None:
    assert history_salt("t", [system("x")]) != history_salt("t", [system("y")])
    assert history_salt("t", [system("x")]) != history_salt("u", [system("x")])


def test_lineage_is_the_salted_hash_of_the_first_message() -> None:
    salt = history_salt("t", [system("x")])
    assert lineage("t", [system("x")], HISTORY) == prefix_hash(HISTORY, 1, salt=salt)[:16]
    assert lineage("t", [system("x")], HISTORY[:1]) == lineage("t", [system("x")], HISTORY)
    assert lineage("t", [system("x")], [user("other")]) != lineage("t", [system("x")], HISTORY)
    assert lineage("t", [system("x")], []) == salt[-16:]
