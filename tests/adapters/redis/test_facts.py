"""The facts scripts on a real server and a real cluster: `FORGET_FACTS` run directly (a fact
there, gone, named twice; a hash gone), and `forget` racing itself through the store."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from proxy.adapters.redis.codec import decode_hash, read_hash_reply
from proxy.adapters.redis.facts import ADD_FACTS, FORGET_FACTS, VERSION, add_args
from proxy.adapters.redis.store import RedisStore
from proxy.adapters.redis.wire import Wire
from proxy.memory.fact import fact_key
from tests.redis_server import RedisServer

A, B = "- 2026-12-03: rides a gravel bike", "- 2026-12-03: lives in Lisbon"


async def one(wire: Wire, *command: Any) -> Any:
    [[reply]] = await wire.run([[command]])
    return reply


async def fields_of(wire: Wire, key: str) -> dict[str, str]:
    return decode_hash(read_hash_reply(await one(wire, "HGETALL", key)))


async def learned(wire: Wire, key: str, *lines: str) -> dict[str, str]:
    await one(wire, "EVAL", ADD_FACTS, 1, key, *add_args(lines, max_lines=10, ttl_s=0))
    return await fields_of(wire, key)


async def forget(wire: Wire, key: str, *names: str) -> int:
    return int(await one(wire, "EVAL", FORGET_FACTS, 1, key, "new-version", *names))


async def test_forgetting_a_fact_deletes_it_and_changes_the_version(
    wire: Wire, key_prefix: str
) -> None:
    key = f"{key_prefix}{{t}}:memory"
    before = await learned(wire, key, A, B)
    assert await forget(wire, key, fact_key(A)) == 1
    after = await fields_of(wire, key)
    assert set(after) == set(before) - {fact_key(A)}
    assert after[VERSION] == "new-version" != before[VERSION]
    assert after["~n"] == before["~n"]  # the order learned goes on from where it was


async def test_forgetting_a_fact_not_there_deletes_nothing_and_keeps_the_version(
    wire: Wire, key_prefix: str
) -> None:
    """A version changed for nothing sends every process to read the facts again."""
    key = f"{key_prefix}{{t}}:memory"
    before = await learned(wire, key, A)
    assert await forget(wire, key, fact_key(B)) == 0
    assert await fields_of(wire, key) == before


async def test_a_fact_named_twice_counts_once(wire: Wire, key_prefix: str) -> None:
    key = f"{key_prefix}{{t}}:memory"
    await learned(wire, key, A, B)
    assert await forget(wire, key, fact_key(A), fact_key(A)) == 1
    assert set(await fields_of(wire, key)) == {fact_key(B), "~n", VERSION}


async def test_forgetting_in_a_hash_gone_leaves_no_key(wire: Wire, key_prefix: str) -> None:
    """A session's facts expire with it: a forget that reads them just before must not create
    the hash again (with no TTL, it would stay for ever)."""
    key = f"{key_prefix}{{t:s}}:memory"
    assert await forget(wire, key, fact_key(A)) == 0
    assert await one(wire, "EXISTS", key) == 0


async def test_two_forgets_at_once_count_each_fact_once(
    redis_server: RedisServer, key_prefix: str
) -> None:
    """Two replicas forgetting the same fact both read it before either deletes it: only the
    one that deleted it counts it."""
    store = RedisStore(redis_server.url, key_prefix=key_prefix)
    try:
        await store.add_facts("t", None, [A, B], max_lines=10)
        await asyncio.gather(*(store.read_facts("t", None) for _ in "ab"))  # two connections
        counts = await asyncio.gather(*(store.forget_facts("t", None, "gravel") for _ in "ab"))
        assert sorted(counts) == [0, 1]
        assert await store.read_facts("t", None) == (B,)
    finally:
        await store.close()


async def test_a_load_whose_facts_fail_keeps_the_sessions_state(
    wire: Wire, key_prefix: str, request: pytest.FixtureRequest
) -> None:
    """The facts' version is its own batch in the load's round trip: an error reply there (a
    key of another type) leaves the request its session's state, without facts."""
    url = request.getfixturevalue(f"{request.node.callspec.params['wire']}_url")
    store = RedisStore(url, key_prefix=key_prefix, op_timeout_s=2.0)
    try:
        await one(wire, "SET", f"{key_prefix}{{t}}:memory", "not a hash")
        await store.record_turn("t", "s", fields={"model": "m"}, counters={}, decisions={})
        state = await store.load("t", "s", memory="tenant")
        assert state.fields["model"] == "m" and state.memory == ()
        assert not store.degraded
    finally:
        await store.close()
