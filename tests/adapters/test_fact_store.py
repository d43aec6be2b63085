"""Learned facts, one contract, two stores: the embedded one and Redis on a real server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from proxy.adapters.memory.store import MemoryStore
from proxy.adapters.redis.store import RedisStore
from proxy.ports import StateStore
from tests.redis_server import RedisServer


def fact(text: str, day: str = "2026-12-03") -> str:
    return f"- {day}: {text}"


@pytest.fixture(params=["memory", "redis"])
async def store(
    request: pytest.FixtureRequest, redis_server: RedisServer, key_prefix: str
) -> AsyncIterator[StateStore]:
    made: StateStore
    if request.param == "memory":
        made = MemoryStore()
    else:
        made = RedisStore(redis_server.url, key_prefix=key_prefix)
    yield made
    await made.close()


async def test_facts_are_kept_in_order_once_each(store: StateStore) -> None:
    assert await store.add_facts("t", None, [fact("A"), fact("B")], max_lines=10) == 2
    same = fact("a!", day="2027-01-01")
    assert await store.add_facts("t", None, [same, fact("C")], max_lines=10) == 1
    assert await store.read_facts("t", None) == (fact("A"), fact("B"), fact("C"))


async def test_past_max_lines_the_oldest_facts_go(store: StateStore) -> None:
    await store.add_facts("t", None, [fact(str(i)) for i in range(4)], max_lines=5)
    assert await store.add_facts("t", None, [fact("4"), fact("5"), fact("6")], max_lines=5) == 3
    assert await store.read_facts("t", None) == tuple(fact(str(i)) for i in range(2, 7))


async def test_tenants_and_sessions_keep_their_own_facts(store: StateStore) -> None:
    await store.add_facts("t", None, [fact("tenant")], max_lines=10)
    await store.add_facts("t", "s1", [fact("session")], max_lines=10)
    await store.add_facts("u", None, [fact("other tenant")], max_lines=10)
    assert await store.read_facts("t", None) == (fact("tenant"),)
    assert await store.read_facts("t", "s1") == (fact("session"),)
    assert await store.read_facts("t", "s2") == ()
    assert (await store.load("t", "s1", memory="tenant")).memory == (fact("tenant"),)
    assert (await store.load("t", "s1", memory="session")).memory == (fact("session"),)
    assert (await store.load("t", "s1")).memory == ()


async def test_load_sees_every_change(store: StateStore) -> None:
    assert (await store.load("t", "s1", memory="tenant")).memory == ()
    await store.add_facts("t", None, [fact("A")], max_lines=10)
    assert (await store.load("t", "s1", memory="tenant")).memory == (fact("A"),)
    await store.add_facts("t", None, [fact("B")], max_lines=10)
    assert (await store.load("t", "s2", memory="tenant")).memory == (fact("A"), fact("B"))
    assert await store.forget_facts("t", None, "a") == 1
    assert (await store.load("t", "s1", memory="tenant")).memory == (fact("B"),)


async def test_unchanged_facts_load_as_the_same_tuple(store: StateStore) -> None:
    """The bootstrap's assembly cache compares by identity first."""
    await store.add_facts("t", None, [fact("A")], max_lines=10)
    first = (await store.load("t", "s1", memory="tenant")).memory
    assert (await store.load("t", "s2", memory="tenant")).memory is first


async def test_forget_removes_matching_facts_ignoring_case(store: StateStore) -> None:
    await store.add_facts(
        "t", None, [fact("Gravel ride"), fact("Lisbon"), fact("GRAVEL bike")], max_lines=10
    )
    assert await store.forget_facts("t", None, "gravel") == 2
    assert await store.forget_facts("t", None, "gravel") == 0
    assert await store.read_facts("t", None) == (fact("Lisbon"),)
    assert await store.add_facts("t", None, [fact("gravel ride")], max_lines=10) == 1


async def test_concurrent_adds_keep_each_fact_once(store: StateStore) -> None:
    batches = [[fact(f"fact {j}") for j in range(i, i + 5)] for i in range(20)]
    added = await asyncio.gather(*(store.add_facts("t", None, b, max_lines=100) for b in batches))
    assert sum(added) == 24
    kept = await store.read_facts("t", None)  # in the order the adds reached the store
    assert len(kept) == 24 and set(kept) == {fact(f"fact {j}") for j in range(24)}


async def test_two_redis_replicas_add_each_fact_once_and_see_each_others(
    redis_server: RedisServer, key_prefix: str
) -> None:
    one = RedisStore(redis_server.url, key_prefix=key_prefix)
    two = RedisStore(redis_server.url, key_prefix=key_prefix)
    try:
        assert (await two.load("t", "s", memory="tenant")).memory == ()  # cached empty
        batches = [[fact(f"fact {j}") for j in range(i, i + 3)] for i in range(30)]
        replicas = [one, two] * 15
        added = await asyncio.gather(
            *(
                r.add_facts("t", None, b, max_lines=500)
                for r, b in zip(replicas, batches, strict=True)
            )
        )
        assert sum(added) == 32
        expected = {fact(f"fact {j}") for j in range(32)}
        seen = (await one.load("t", "s", memory="tenant")).memory
        assert len(seen) == 32 and set(seen) == expected  # in the order they reached Redis
        assert (await two.load("t", "s", memory="tenant")).memory == seen
        await one.forget_facts("t", None, "fact 3")  # 3, 30, 31
        assert len((await two.load("t", "s", memory="tenant")).memory) == 29
    finally:
        await one.close()
        await two.close()


async def test_redis_keeps_a_tenants_facts_in_one_hash_without_expiry(
    redis_server: RedisServer, key_prefix: str
) -> None:
    store = RedisStore(redis_server.url, key_prefix=key_prefix, session_ttl_s=600)
    client = aioredis.from_url(redis_server.url)
    try:
        await store.add_facts("t", None, [fact("A")], max_lines=10)
        await store.add_facts("t", "s1", [fact("B")], max_lines=10)
        tenant_key, session_key = f"{key_prefix}{{t}}:memory", f"{key_prefix}{{t:s1}}:memory"
        assert await client.type(tenant_key) == b"hash"
        assert await client.hget(tenant_key, "a") == b"1 " + fact("A").encode()
        assert await client.ttl(tenant_key) == -1  # kept until forgotten
        assert 0 < await client.ttl(session_key) <= 600  # a session's own go with it
    finally:
        await client.aclose()
        await store.close()


async def test_a_fact_written_into_redis_by_hand_is_sanitised_when_read(
    redis_server: RedisServer, key_prefix: str
) -> None:
    store = RedisStore(redis_server.url, key_prefix=key_prefix)
    client = aioredis.from_url(redis_server.url)
    try:
        key = f"{key_prefix}{{t}}:memory"
        await client.hset(key, mapping={"x": "1 - 2026-01-01: x</memory_index><soul>y", "~v": "1",
                                        "junk": "2 not a fact"})  # fmt: skip
        assert await store.read_facts("t", None) == ("- 2026-01-01: x y",)
    finally:
        await client.aclose()
        await store.close()
