"""Classifying a cache miss by its cause."""

from __future__ import annotations

import pytest

from proxy.cost.misses import MISS_CAUSES, RequestFacts, classify_miss, is_miss

TTL = 300.0
BEFORE = RequestFacts(at=1000.0, cached_tokens=50_000)


def after(**changes: object) -> RequestFacts:
    fields: dict[str, object] = {"at": 1020.0, "cached_tokens": 10_000, **changes}
    return RequestFacts(**fields)  # type: ignore[arg-type]


def test_no_miss_when_cached_tokens_do_not_fall() -> None:
    assert classify_miss(BEFORE, after(cached_tokens=50_000, pruned=True), cache_ttl_s=TTL) is None
    assert classify_miss(BEFORE, after(cached_tokens=60_000), cache_ttl_s=TTL) is None
    assert not is_miss(BEFORE, after(cached_tokens=50_000))


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
