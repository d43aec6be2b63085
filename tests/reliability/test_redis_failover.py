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
    rig: Rig,
    *,
    seconds: float,
    fault_at: float,
    fault: Callable[[], Any],
    degraded: dict[str, list[bool]] | None = None,
) -> tuple[list[int], float]:
    """Every session's first request, then its grown history once (it compacts), then again
    and again from one loop per session for `seconds`; `fault()` runs `fault_at` seconds into
    the loops. (Statuses, the monotonic time the fault ran.) `degraded` gets, per session,
    whether each request after the fault was served without state."""
    statuses: list[int] = []
    faulted = [0.0]
    sessions = [f"s{index}" for index in range(SESSIONS)]
    async with aiohttp.ClientSession() as http:
        for session in sessions:
            statuses.append((await send(http, rig, session, history(6, tag=session)))[0])
        await rig.settled()
        compacted = await asyncio.gather(*(send(http, rig, s, grown(s)) for s in sessions))
        statuses += [status for status, _ in compacted]
        await rig.settled()
        end = time.monotonic() + seconds

        async def loop(session: str) -> None:
            while time.monotonic() < end:
                status, without_state = await send(http, rig, session, grown(session))
                statuses.append(status)
                if degraded is not None and faulted[0]:
                    degraded.setdefault(session, []).append(without_state)
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


Stored = dict[str, set[tuple[str, float]]]


async def stored_summaries(rig: Rig) -> Stored:
    """Each session's stored summaries (prefix hash, time made), through the proxy's store."""
    found: Stored = {}
    for index in range(SESSIONS):
        state = await rig.app[STORE].load("default", f"s{index}")
        found[f"s{index}"] = {(c.prefix_hash, c.created_at) for c in state.compactions}
    return found


class Fault:
    """Before the fault: the summaries stored and the summarizer calls made so far."""

    def __init__(self, rig: Rig, fake: SlowSummaryFake, fault: Callable[[], None]) -> None:
        self.rig, self.fake, self.fault = rig, fake, fault
        self.stored: Stored = {}
        self.calls: dict[str, int] = {}

    async def __call__(self) -> None:
        self.stored = await stored_summaries(self.rig)
        self.calls = summary_calls(self.fake)
        self.fault()

    async def check_no_summary_lost_or_made_twice(self) -> None:
        """A summary stored before the fault is there after it (on the promoted replica), the
        only one of its session; and no session summarized again after the fault."""
        after = await stored_summaries(self.rig)
        assert sum(1 for found in self.stored.values() if found) >= SESSIONS - 2
        for session, found in self.stored.items():
            if found:
                assert after[session] == found, session
                assert summary_calls(self.fake)[session] == self.calls[session], session
        assert all(len(found) == 1 for found in after.values()), after


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
    degraded: dict[str, list[bool]] = {}
    fault = Fault(rig, fake, lambda: own_cluster.kill(victim))
    statuses, killed = await traffic(rig, seconds=2.5, fault_at=0.7, fault=fault, degraded=degraded)
    assert statuses and set(statuses) == {200}
    others = [d for session, seen in degraded.items() if session not in on_victim for d in seen]
    assert others and sum(others) / len(others) < 0.4, "the other primaries' sessions keep state"
    took = await resumed_after(rig, "s0", since=killed, within=NODE_TIMEOUT_MS / 1000 + 8)
    promoted = own_cluster.promoted_at - killed
    print(f"cluster failover: writes resumed {took:.2f}s after the kill, {promoted:.2f}s promotion")
    assert took - promoted < FOLLOW_S, f"writes resumed {took - promoted:.1f}s after the promotion"
    assert took < NODE_TIMEOUT_MS / 1000 + RESUME_SLACK_S + LOADED_S, f"resumed after {took:.1f}s"
    async with aiohttp.ClientSession() as http:
        for index in range(SESSIONS):
            assert (await send(http, rig, f"s{index}", grown(f"s{index}")))[0] == 200
    await rig.settled()
    await fault.check_no_summary_lost_or_made_twice()


async def test_a_sentinel_failover_under_traffic_fails_no_request(
    make_rig: MakeRig, own_sentinels: SentinelSet, key_prefix: str
) -> None:
    rig, fake = await rig_on(make_rig, own_sentinels.url, key_prefix)
    fault = Fault(rig, fake, own_sentinels.kill_primary)
    statuses, killed = await traffic(rig, seconds=2.0, fault_at=0.7, fault=fault)
    assert statuses and set(statuses) == {200}
    took = await resumed_after(rig, "s0", since=killed, within=12)
    print(f"sentinel failover: writes resumed {took:.2f}s after the kill")
    assert took < DOWN_AFTER_MS / 1000 + RESUME_SLACK_S, f"writes resumed after {took:.1f}s"
    assert own_sentinels.master_port() == own_sentinels.replica.port
    async with aiohttp.ClientSession() as http:
        for index in range(SESSIONS):
            assert (await send(http, rig, f"s{index}", grown(f"s{index}")))[0] == 200
    await rig.settled()
    await fault.check_no_summary_lost_or_made_twice()


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
