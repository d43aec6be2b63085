"""Merging the events shards: in id order, nothing a shard may still add before, no id split."""

from __future__ import annotations

import pytest

from proxy.adapters.redis.events import LAST_SEQ, ShardRead, after_now, merge_shards, parse_id


def read(now_ms: int, *ids: str, full: bool = False) -> ShardRead:
    return ShardRead(now_ms=now_ms, entries=[(i, {"id": i}) for i in ids], full=full)


def ids(found: list[tuple[str, dict[str, str]]]) -> list[str]:
    return [entry_id for entry_id, _ in found]


def test_shards_merge_in_id_order() -> None:
    found, held = merge_shards([read(100, "10-0", "30-0"), read(100, "20-0", "20-1")], count=10)
    assert ids(found) == ["10-0", "20-0", "20-1", "30-0"] and not held


def test_an_entry_at_a_shards_clock_is_held_back_for_the_next_read() -> None:
    """Another shard could still add an entry in that millisecond: returning this one would
    move the reader's cursor past it."""
    found, held = merge_shards([read(50, "10-0", "50-0"), read(50)], count=10)
    assert ids(found) == ["10-0"] and held


def test_the_slowest_clock_bounds_what_is_final() -> None:
    found, held = merge_shards([read(100, "40-0", "60-0"), read(50)], count=10)
    assert ids(found) == ["40-0"] and held


def test_a_full_shard_bounds_the_merge_at_its_last_entry() -> None:
    """A shard that filled `count` may hold more entries after its last, before others' ones."""
    found, _ = merge_shards(
        [read(100, "10-0", "20-0", full=True), read(100, "15-0", "25-0")], count=2
    )
    assert ids(found) == ["10-0", "15-0"]


@pytest.mark.parametrize(
    ("count", "expected"),
    [
        (1, ["5-0"]),
        (2, ["5-0"]),  # cutting between the two `7-0` would skip one with `after=7-0`
        (3, ["5-0", "7-0", "7-0"]),
    ],
)
def test_entries_with_one_id_are_never_split(count: int, expected: list[str]) -> None:
    found, _ = merge_shards([read(100, "5-0", "7-0"), read(100, "7-0", "9-0")], count=count)
    assert ids(found) == expected


def test_more_entries_of_one_id_than_count_come_together() -> None:
    found, _ = merge_shards([read(100, "7-0"), read(100, "7-0"), read(100, "7-0")], count=1)
    assert ids(found) == ["7-0"] * 3


def test_nothing_to_read() -> None:
    assert merge_shards([read(100), read(100)], count=5) == ([], False)


def test_dollar_stands_for_just_below_every_clock() -> None:
    assert after_now([read(100), read(90)]) == f"89-{LAST_SEQ}"
    assert parse_id("89-3") == (89, 3) and parse_id("89") == (89, 0)
