"""Two replicas on one Redis: one summarizer call per compaction; archive first, consistently."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import orjson
import pytest
import redis.asyncio as aioredis

from proxy.adapters.redis.keys import Keys
from proxy.history import history_salt, prefix_hash
from tests.fakes.openai_upstream import Reply
from tests.redis_cluster import RedisCluster
from tests.redis_server import RedisServer
from tests.reliability.conftest import MakeRig
from tests.reliability.slowfake import SlowSummaryFake
from tests.reliability.support import COMPACT_AT_1000, Rig, auth, history

SESSION = "shared-session"


async def _send(http: aiohttp.ClientSession, rig: Rig, messages: list[dict[str, Any]]) -> int:
    headers = {**auth(), "X-Ctx-Session": SESSION}
    body = {"model": "gpt-4o", "messages": messages}
    async with http.post(rig.url("/v1/chat/completions"), json=body, headers=headers) as r:
        await r.read()
        return r.status


async def _consistency_scan(redis: Any, keys: Keys) -> int:
    """Every stored summary points at an archive entry whose history has its prefix hash."""
    stored = await redis.hgetall(keys.session("default", SESSION, "compactions"))
    entries = dict(await redis.xrange(keys.session("default", SESSION, "raw")))
    for raw in stored.values():
        compaction = orjson.loads(raw)
        archived = orjson.loads(entries[compaction["archive_id"].encode()][b"messages"])
        system = [m for m in archived if m["role"] == "system"][:1]
        salt = history_salt("default", system)
        rest = archived[len(system) :]
        assert prefix_hash(rest, compaction["covers"], salt=salt) == compaction["prefix_hash"]
    return len(stored)


@pytest.mark.parametrize("kind", ["redis", "cluster"])
async def test_two_replicas_and_twenty_concurrent_requests_summarize_once(
    make_rig: MakeRig, request: pytest.FixtureRequest, key_prefix: str, kind: str
) -> None:
    """On one server and on a Redis Cluster (where the lock, the archive and the fenced save
    sit on the node owning the session's slot)."""
    url, redis = shared_redis(request, kind)
    fake = SlowSummaryFake(summary_delay_s=0.5)
    fake.default = Reply(prompt_tokens=5000)
    shared = {"store_url": url, "key_prefix": key_prefix, "tenant_extra": COMPACT_AT_1000}
    replicas = [await make_rig(fake=fake, **shared), await make_rig(fake=fake, **shared)]
    messages = history(6)
    grown = [*messages, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "on"}]
    async with aiohttp.ClientSession() as http:
        assert await _send(http, replicas[0], messages) == 200
        await replicas[0].settled()
        statuses = await asyncio.gather(*(_send(http, replicas[i % 2], grown) for i in range(20)))
        for rig in replicas:
            await rig.settled()
        for _ in range(2):  # the client retries the same request: nothing is done twice
            assert await _send(http, replicas[1], grown) == 200
            await replicas[1].settled()
    assert statuses == [200] * 20
    assert len(fake.summary_requests) == 1
    try:
        keys = Keys(key_prefix)
        assert await redis.xlen(keys.session("default", SESSION, "raw")) == 1
        assert await _consistency_scan(redis, keys) == 1
    finally:
        await redis.aclose()


def shared_redis(request: pytest.FixtureRequest, kind: str) -> tuple[str, Any]:
    """The URL of the suite's Redis server or cluster, and a plain client of it."""
    if kind == "cluster":
        cluster: RedisCluster = request.getfixturevalue("redis_cluster")
        return cluster.url, aioredis.RedisCluster(host="127.0.0.1", port=cluster.nodes[0].port)
    server: RedisServer = request.getfixturevalue("redis_server")
    return server.url, aioredis.Redis.from_url(server.url)


async def test_a_failing_archive_write_forwards_the_request_uncompacted(
    make_rig: MakeRig, key_prefix: str
) -> None:
    small = RedisServer()
    small.start("--maxmemory", "2mb", "--maxmemory-policy", "noeviction")
    try:
        fake = SlowSummaryFake()
        fake.default = Reply(prompt_tokens=5000)
        rig = await make_rig(
            fake=fake, store_url=small.url, key_prefix=key_prefix, tenant_extra=COMPACT_AT_1000
        )
        messages = history(6)
        messages[1] = {"role": "user", "content": "z" * 3_000_000}  # over Redis's maxmemory
        async with aiohttp.ClientSession() as http:
            assert await _send(http, rig, messages) == 200
            await rig.settled()
            assert (await rig.sessions())[0]["last_prompt_tokens"] == "5000", "compaction is due"
            assert await _send(http, rig, [*messages, {"role": "user", "content": "go"}]) == 200
            await rig.settled()
        assert fake.summary_requests == [], "no summary without an archive"
        assert fake.chat[-1].body["messages"][1]["content"] == "z" * 3_000_000
    finally:
        small.stop()


async def test_replicas_count_one_session_together_and_its_hash_keeps_every_field(
    make_rig: MakeRig, own_redis: RedisServer, key_prefix: str
) -> None:
    shared = {"store_url": own_redis.url, "key_prefix": key_prefix}
    replicas = [await make_rig(**shared), await make_rig(**shared)]
    messages = history(2)
    async with aiohttp.ClientSession() as http:
        for index in range(3):
            assert await _send(http, replicas[index % 2], messages) == 200
            await replicas[index % 2].settled()
    redis: Any = aioredis.Redis.from_url(own_redis.url, decode_responses=True)
    try:
        state = await redis.hgetall(Keys(key_prefix).session("default", SESSION, "state"))
    finally:
        await redis.aclose()
    assert state["requests"] == "3"
    assert state["compactions"] == "0" and state["chars_pruned"] == "0"  # written once, kept
    assert {"tenant", "session", "model", "last_prompt_tokens", "updated_at"} <= set(state)
