"""The embedded store's persisted outputs: the session TTL, and a size budget, oldest out first."""

from __future__ import annotations

from proxy.adapters.memory.outputs import MemoryOutputs

TTL = 100.0


def test_an_output_is_kept_until_its_ttl() -> None:
    outputs = MemoryOutputs(ttl_s=TTL)
    outputs.put("t1", "a", "text", now=0.0)
    assert outputs.get("t1", "a", now=99.9) == "text"
    assert outputs.get("t1", "a", now=100.0) is None
    assert outputs.get("t2", "a", now=1.0) is None  # per tenant


def test_past_the_budget_the_oldest_outputs_go_first() -> None:
    outputs = MemoryOutputs(ttl_s=TTL, max_chars=100)
    for name in "abc":
        outputs.put("t1", name, name * 40, now=0.0)
    assert outputs.get("t1", "a", now=1.0) is None
    assert outputs.get("t1", "b", now=1.0) == "b" * 40
    assert outputs.get("t1", "c", now=1.0) == "c" * 40
    assert outputs.chars == 80


def test_storing_an_output_again_renews_it_as_the_newest() -> None:
    outputs = MemoryOutputs(ttl_s=TTL, max_chars=100)
    outputs.put("t1", "a", "a" * 40, now=0.0)
    outputs.put("t1", "b", "b" * 40, now=0.0)
    outputs.put("t1", "a", "a" * 40, now=50.0)
    outputs.put("t1", "c", "c" * 40, now=50.0)
    assert outputs.get("t1", "b", now=60.0) is None
    assert outputs.get("t1", "a", now=120.0) == "a" * 40  # renewed at 50: kept until 150
    assert outputs.chars == 80


def test_expired_outputs_are_dropped_when_another_is_stored() -> None:
    outputs = MemoryOutputs(ttl_s=TTL)
    outputs.put("t1", "a", "x" * 1_000, now=0.0)
    outputs.put("t1", "b", "y" * 10, now=200.0)
    assert outputs.chars == 10


def test_an_output_bigger_than_the_whole_budget_is_not_kept() -> None:
    outputs = MemoryOutputs(ttl_s=TTL, max_chars=100)
    outputs.put("t1", "small", "s" * 10, now=0.0)
    outputs.put("t1", "huge", "h" * 101, now=0.0)
    assert outputs.get("t1", "huge", now=1.0) is None
    assert outputs.chars == 0
