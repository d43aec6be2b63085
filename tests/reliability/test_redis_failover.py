"""A Redis Cluster primary killed, a Sentinel failover, a slot migrated, all under traffic.

Each test runs its own cluster or Sentinel set (`tests/redis_cluster.py`: node timeout 2 s,
down-after 1 s) and the proxy in process with its default store timeouts (0.5 s an operation,
breaker 1 s). Sessions compact at their second request (the fake reports 5,000 prompt tokens
over a threshold of 1,000), so summaries are written while the fault happens.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis

from proxy.adapters.redis.keys import Keys
from proxy.errors import StoreUnavailable
from proxy.server.appkeys import STORE
from tests.fakes.openai_upstream import Reply
from tests.redis_cluster import DOWN_AFTER_MS, NODE_TIMEOUT_MS, RedisCluster, SentinelSet
from tests.reliability.conftest import MakeRig
from tests.reliability.slowfake import SlowSummaryFake
from tests.reliability.support import COMPACT_AT_1000, Rig, auth, history

RESUME_SLACK_S = 3.0
FOLLOW_S = 1.5
"""At most this long from the cluster's promotion of a replica to the proxy writing to it."""
LOADED_S = 1.0
"""The cluster's own failover (detection after the node timeout, then an election of 0.5-1 s)
took 3.5-4.6 s on a loaded 2-core machine: one more second there."""
SESSIONS = 8


@pytest.fixture
def own_cluster() -> Iterator[RedisCluster]:
    cluster = RedisCluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def own_sentinels() -> Iterator[SentinelSet]:
    sentinels = SentinelSet()
    try:
        sentinels.start()
        yield sentinels
    finally:
        sentinels.stop()


def grown(session: str) -> list[dict[str, Any]]:
    return [*history(6, tag=session), {"role": "assistant", "content": "ok"}, _user("go on")]


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


async def send(
    http: aiohttp.ClientSession, rig: Rig, session: str, messages: list[dict[str, Any]]
) -> tuple[int, bool]:
    """(status, whether the store was degraded for this request)."""
    headers = {**auth(), "X-Ctx-Session": session}
    body = {"model": "gpt-4o", "messages": messages}
    async with http.post(rig.url("/v1/chat/completions"), json=body, headers=headers) as r:
        await r.read()
        return r.status, r.headers.get("X-Ctx-Store") == "degraded"


async def rig_on(make_rig: MakeRig, url: str, key_prefix: str) -> tuple[Rig, SlowSummaryFake]:
    fake = SlowSummaryFake(summary_delay_s=0.05)
    fake.default = Reply(prompt_tokens=5000)
    rig = await make_rig(
        fake=fake, store_url=url, key_prefix=key_prefix, tenant_extra=COMPACT_AT_1000
    )
    return rig, fake


async def traffic(
    rig: Rig, *, seconds: float, fault_at: float, fault: Callable[[], Any]
) -> tuple[list[int], float]:
    """Every session's first request, then each session's grown history again and again from
    one loop per session for `seconds`; `fault()` runs `fault_at` seconds in. (Statuses, the
    monotonic time the fault ran.)"""
    statuses: list[int] = []
    faulted = [0.0]
    async with aiohttp.ClientSession() as http:
        for index in range(SESSIONS):
            statuses.append((await send(http, rig, f"s{index}", history(6, tag=f"s{index}")))[0])
        await rig.settled()
        end = time.monotonic() + seconds

        async def loop(session: str) -> None:
            while time.monotonic() < end:
                statuses.append((await send(http, rig, session, grown(session)))[0])
                await asyncio.sleep(0.02)

        async def injector() -> None:
            await asyncio.sleep(fault_at)
            faulted[0] = time.monotonic()
            result = fault()
            if asyncio.iscoroutine(result):
                await result

        await asyncio.gather(injector(), *(loop(f"s{i}") for i in range(SESSIONS)))
    await rig.settled()
    return statuses, faulted[0]


async def resumed_after(rig: Rig, session: str, *, since: float, within: float) -> float:
    """Seconds from `since` until a request of `session` is served with state and recorded."""
    async with aiohttp.ClientSession() as http:
        while time.monotonic() - since < within:
            before = await _requests(rig, session)
            status, degraded = await send(http, rig, session, grown(session))
            assert status == 200
            await rig.settled()
            if not degraded and before is not None and await _requests(rig, session) == before + 1:
                return time.monotonic() - since
            await asyncio.sleep(0.1)
    raise AssertionError(f"state writes did not resume within {within}s")


async def _requests(rig: Rig, session: str) -> int | None:
    try:
        detail = await rig.app[STORE].session_detail("default", session)
    except StoreUnavailable:
        return None
    return int(detail["state"]["requests"]) if detail else None


async def summaries(url_client: Any, key_prefix: str) -> dict[str, int]:
    """Stored summaries per session."""
    keys = Keys(key_prefix)
    return {
        f"s{i}": len(await url_client.hgetall(keys.session("default", f"s{i}", "compactions")))
        for i in range(SESSIONS)
    }


def summary_calls(fake: SlowSummaryFake) -> dict[str, int]:
    calls: dict[str, int] = {}
    for request in fake.summary_requests:
        text = str(request.body["messages"])
        for index in range(SESSIONS):
            if f"You help. s{index}" in text:
                calls[f"s{index}"] = calls.get(f"s{index}", 0) + 1
    return calls


async def test_a_cluster_primary_killed_under_traffic_fails_no_request(
    make_rig: MakeRig, own_cluster: RedisCluster, key_prefix: str
) -> None:
    rig, fake = await rig_on(make_rig, own_cluster.url, key_prefix)
    state_keys = {
        f"s{i}": Keys(key_prefix).session("default", f"s{i}", "state") for i in range(SESSIONS)
    }
    victim = own_cluster.primary_of(state_keys["s0"])
    on_victim = {s for s, key in state_keys.items() if own_cluster.primary_of(key) is victim}
    statuses, killed = await traffic(
        rig, seconds=2.0, fault_at=0.7, fault=lambda: own_cluster.kill(victim)
    )
    assert statuses and set(statuses) == {200}
    took = await resumed_after(rig, "s0", since=killed, within=NODE_TIMEOUT_MS / 1000 + 8)
    promoted = own_cluster.promoted_at - killed
    print(f"cluster failover: writes resumed {took:.2f}s after the kill, {promoted:.2f}s promotion")
    assert took - promoted < FOLLOW_S, f"writes resumed {took - promoted:.1f}s after the promotion"
    assert took < NODE_TIMEOUT_MS / 1000 + RESUME_SLACK_S + LOADED_S, f"resumed after {took:.1f}s"
    async with aiohttp.ClientSession() as http:
        for index in range(SESSIONS):
            assert (await send(http, rig, f"s{index}", grown(f"s{index}")))[0] == 200
    await rig.settled()
    live = own_cluster.primaries()[0]
    cluster: Any = aioredis.RedisCluster(host="127.0.0.1", port=live.port)
    try:
        stored = await summaries(cluster, key_prefix)
    finally:
        await cluster.aclose()
    calls = summary_calls(fake)
    assert stored == {f"s{i}": 1 for i in range(SESSIONS)}, (
        "one summary a session",
        on_victim,
        calls,
        [e for e in fake.chat][:0],
    )
    assert all(calls[s] == 1 for s in calls if s not in on_victim), calls
    assert all(calls.get(s, 0) <= 2 for s in on_victim), calls


async def test_a_sentinel_failover_under_traffic_fails_no_request(
    make_rig: MakeRig, own_sentinels: SentinelSet, key_prefix: str
) -> None:
    rig, fake = await rig_on(make_rig, own_sentinels.url, key_prefix)
    statuses, killed = await traffic(
        rig, seconds=2.0, fault_at=0.7, fault=own_sentinels.kill_primary
    )
    assert statuses and set(statuses) == {200}
    took = await resumed_after(rig, "s0", since=killed, within=12)
    print(f"sentinel failover: writes resumed {took:.2f}s after the kill")
    assert took < DOWN_AFTER_MS / 1000 + RESUME_SLACK_S, f"writes resumed after {took:.1f}s"
    assert own_sentinels.master_port() == own_sentinels.replica.port
    async with aiohttp.ClientSession() as http:
        for index in range(SESSIONS):
            assert (await send(http, rig, f"s{index}", grown(f"s{index}")))[0] == 200
    await rig.settled()
    primary: Any = aioredis.Redis(port=own_sentinels.replica.port)
    try:
        stored = await summaries(primary, key_prefix)
    finally:
        await primary.aclose()
    assert stored == {f"s{i}": 1 for i in range(SESSIONS)}
    assert all(count <= 2 for count in summary_calls(fake).values())


async def test_a_slot_migrated_under_traffic_fails_no_request(
    make_rig: MakeRig, redis_cluster: RedisCluster, key_prefix: str
) -> None:
    """`redis-cli --cluster reshard` moves the slot of a session's keys (MIGRATE, then the
    slot's new owner) while requests run: redis-py follows ASK, then MOVED."""
    rig, _ = await rig_on(make_rig, redis_cluster.url, key_prefix)
    key = Keys(key_prefix).session("default", "s0", "state")
    source = redis_cluster.primary_of(key)
    target = next(n for n in redis_cluster.primaries() if n is not source)

    def reshard() -> Any:
        return asyncio.to_thread(redis_cluster.move_slot_of, key, source, target)

    statuses, _ = await traffic(rig, seconds=2.5, fault_at=0.5, fault=reshard)
    assert statuses and set(statuses) == {200}
    assert redis_cluster.primary_of(key) is target
    assert await _requests(rig, "s0") is not None
