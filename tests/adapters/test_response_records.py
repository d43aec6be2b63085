"""The Responses edge's records and handle secret: one contract, both stores (Redis on a real
server): per tenant and kind, the session TTL, one secret for every replica."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from proxy.adapters.memory.records import MemoryRecords
from proxy.adapters.memory.store import MemoryStore
from proxy.adapters.redis.store import RedisStore
from proxy.ports import StateStore
from tests.redis_server import RedisServer


@pytest.fixture(params=["memory", "redis"])
async def store(
    request: pytest.FixtureRequest, redis_server: RedisServer, key_prefix: str
) -> AsyncIterator[StateStore]:
    made: StateStore
    if request.param == "memory":
        made = MemoryStore(session_ttl_s=60)
    else:
        made = RedisStore(redis_server.url, key_prefix=key_prefix, session_ttl_s=60)
    yield made
    await made.close()


async def test_a_record_is_read_back_by_its_tenant_and_kind_only(store: StateStore) -> None:
    await store.put_record("acme", "response", "resp_1", b'{"id": "resp_1"}')
    assert await store.get_record("acme", "response", "resp_1") == b'{"id": "resp_1"}'
    assert await store.get_record("other", "response", "resp_1") is None
    assert await store.get_record("acme", "summary", "resp_1") is None
    await store.put_record("acme", "response", "resp_1", b"{}")
    assert await store.get_record("acme", "response", "resp_1") == b"{}"


async def test_the_first_secret_written_is_the_one_every_caller_gets(store: StateStore) -> None:
    first = await store.handle_secret(b"a" * 32)
    assert first == b"a" * 32
    assert await store.handle_secret(b"b" * 32) == b"a" * 32


async def test_redis_keeps_records_for_the_session_ttl_under_the_tenant_tag(
    redis_server: RedisServer, key_prefix: str
) -> None:
    store = RedisStore(redis_server.url, key_prefix=key_prefix, session_ttl_s=60)
    await store.put_record("acme", "summary", "s1", b"text")
    await store.handle_secret(b"k" * 32)
    raw = aioredis.from_url(redis_server.url)
    try:
        key = f"{key_prefix}{{acme}}:summary:s1"
        assert 0 < await raw.ttl(key) <= 60
        assert await raw.ttl(f"{key_prefix}handle_secret") == -1  # outlives every handle
    finally:
        await raw.aclose()
        await store.close()


def test_embedded_records_expire_and_stay_within_their_budget() -> None:
    records = MemoryRecords(ttl_s=10, max_bytes=10)
    records.put(("t", "response", "a"), b"12345", now=0)
    records.put(("t", "response", "b"), b"12345", now=1)
    assert records.get(("t", "response", "a"), now=2) == b"12345"
    records.put(("t", "response", "c"), b"1", now=2)  # 11 bytes: the oldest goes
    assert records.get(("t", "response", "a"), now=2) is None
    assert records.get(("t", "response", "b"), now=10.5) == b"12345"
    assert records.get(("t", "response", "b"), now=11) is None
    assert records.bytes_held == 6
