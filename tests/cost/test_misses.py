"""Classifying a cache miss by its cause."""

from __future__ import annotations

import pytest

from proxy.cost.misses import MISS_CAUSES, RequestFacts, cache_left, classify_miss, is_miss

TTL = 300.0
# The previous request read 40,000 tokens and wrote 10,000: 50,000 are in the cache.
BEFORE = RequestFacts(at=1000.0, prompt_tokens=50_100, cached_tokens=40_000, written_tokens=10_000)


def after(**changes: object) -> RequestFacts:
    fields: dict[str, object] = {"at": 1020.0, "prompt_tokens": 52_000, "cached_tokens": 10_000}
    fields.update(changes)
    return RequestFacts(**fields)  # type: ignore[arg-type]


def test_what_a_request_leaves_in_the_cache() -> None:
    assert cache_left(BEFORE, automatic=False) == 50_000
    assert cache_left(BEFORE, automatic=True) == 1024 + (50_100 - 1024) // 128 * 128
    assert cache_left(RequestFacts(0.0, prompt_tokens=1000, cached_tokens=0), automatic=True) == 0


def test_no_miss_when_the_request_reads_what_the_previous_one_left() -> None:
    current = after(cached_tokens=50_000, pruned=True)
    assert classify_miss(BEFORE, current, cache_ttl_s=TTL) is None
    assert not is_miss(BEFORE, current, automatic=False)
    automatic = after(cached_tokens=cache_left(BEFORE, automatic=True))
    assert classify_miss(BEFORE, automatic, cache_ttl_s=TTL, automatic=True) is None


def test_reading_only_what_the_previous_request_read_is_a_miss() -> None:
    """Every turn reading the same early prefix while its rest is rewritten: a miss each time,
    though the cached tokens never fall."""
    assert classify_miss(BEFORE, after(cached_tokens=40_000, pruned=True), cache_ttl_s=TTL) == (
        "prune"
    )


def test_automatic_caching_expects_the_whole_previous_prompt() -> None:
    current = after(cached_tokens=40_000, pruned=True)
    assert classify_miss(BEFORE, current, cache_ttl_s=TTL, automatic=True) == "prune"


def test_the_first_request_of_a_session_is_never_a_miss() -> None:
    assert classify_miss(None, after(), cache_ttl_s=TTL) is None


@pytest.mark.parametrize(
    ("current", "cause"),
    [
        (after(), "unknown"),
        (after(pruned=True), "prune"),
        (after(compacted=True, pruned=True), "compaction"),
        (after(bootstrap_changed=True, compacted=True, pruned=True), "bootstrap"),
        (after(extends_previous=False, bootstrap_changed=True, pruned=True), "client"),
        (after(at=1000.0 + TTL + 1, extends_previous=False, pruned=True), "ttl"),
        (after(at=1000.0 + TTL, pruned=True), "prune"),  # exactly the lifetime: still alive
    ],
)
def test_the_first_cause_that_holds(current: RequestFacts, cause: str) -> None:
    assert classify_miss(BEFORE, current, cache_ttl_s=TTL) == cause


def test_a_one_hour_cache_outlives_a_ten_minute_pause() -> None:
    assert classify_miss(BEFORE, after(at=1600.0, pruned=True), cache_ttl_s=3600) == "prune"
    assert classify_miss(BEFORE, after(at=1600.0, pruned=True), cache_ttl_s=300) == "ttl"


def test_every_cause_is_listed_once() -> None:
    assert sorted(MISS_CAUSES) == sorted(
        {"ttl", "client", "bootstrap", "compaction", "prune", "unknown"}
    )
