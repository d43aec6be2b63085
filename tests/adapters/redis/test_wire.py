"""`Wire.run_each` on a real server and a real cluster: batches in several slots answered in
order, one batch's error reply kept in its place, and (cluster) one node that stops answering:
its batches fail alone, and the slot map is read again once for it."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from redis.exceptions import ResponseError

from proxy.adapters.redis.breaker import NodeUnavailable
from proxy.adapters.redis.pool import Command
from proxy.adapters.redis.wire import Wire, open_wire
from proxy.settings import parse_store_url
from tests.redis_cluster import RedisCluster, command, wait_for
from tests.redis_server import RedisServer


def keys_on_every_primary(cluster: RedisCluster, prefix: str) -> list[str]:
    """One key per primary of `cluster`, in the order of its primaries."""
    found: dict[int, str] = {}
    primaries = [node.port for node in cluster.primaries()]
    for n in range(1000):
        key = f"{prefix}{{k{n}}}"
        found.setdefault(cluster.primary_of(key).port, key)
        if len(found) == len(primaries):
            return [found[port] for port in primaries]
    raise AssertionError("no key found for some primary")


async def test_batches_in_several_slots_are_answered_in_order(wire: Wire, key_prefix: str) -> None:
    keys = [f"{key_prefix}{{k{n}}}" for n in range(12)]
    batches: list[list[Command]] = [[("SET", k, f"v{n}"), ("GET", k)] for n, k in enumerate(keys)]
    replies = await wire.run_each(batches)
    assert [batch[-1] for batch in replies] == [f"v{n}".encode() for n in range(12)]  # type: ignore[index]
    assert [batch[-1] for batch in await wire.run(batches)] == [b"v%d" % n for n in range(12)]


async def test_an_error_reply_is_its_batchs_error_and_the_others_answer(
    wire: Wire, key_prefix: str
) -> None:
    """A command failing in one slot (here WRONGTYPE) fails its batch only: `run_each` keeps
    the other batches' replies, on one server as on a cluster; `run` raises it."""
    first, broken, last = (f"{key_prefix}{{{name}}}" for name in ("a", "b", "c"))
    batches: list[list[Command]] = [
        [("SET", first, "1"), ("GET", first)],
        [("SET", broken, "text"), ("HGET", broken, "field"), ("GET", broken)],
        [("SET", last, "3"), ("GET", last)],
    ]
    replies = await wire.run_each(batches)
    assert isinstance(replies[1], ResponseError) and "WRONGTYPE" in str(replies[1])
    assert replies[0][-1] == b"1" and replies[2][-1] == b"3"  # type: ignore[index]
    [[written]] = await wire.run([[("GET", broken)]])  # a pipeline, not a transaction
    assert written == b"text"
    try:
        await wire.run(batches)
    except ResponseError as exc:
        assert "WRONGTYPE" in str(exc)
    else:
        raise AssertionError("run answered a batch with an error reply")


async def test_a_node_that_stops_answering_fails_only_its_batches(
    redis_cluster: RedisCluster, key_prefix: str
) -> None:
    """One primary paused (`CLIENT PAUSE`: no failover, it answers again by itself): its batch
    is `NodeUnavailable` in place after the socket timeout, then at once while its breaker is
    open; the other primaries' batches answer throughout, and its own once it is back."""
    wire = open_wire(
        parse_store_url(redis_cluster.url), op_timeout_s=0.5, breaker_s=0.25, max_connections=8
    )
    keys = keys_on_every_primary(redis_cluster, key_prefix)
    batches: list[list[Command]] = [[("SET", k, "v"), ("GET", k)] for k in keys]
    paused = redis_cluster.primary_of(keys[1])
    try:
        assert all(reply[-1] == b"v" for reply in await wire.run_each(batches))  # type: ignore[index]
        reads: list[list[Command]] = [[("GET", k)] for k in keys]
        command(paused.port, "CLIENT", "PAUSE", "1500", "ALL")
        replies = await wire.run_each(reads)
        assert isinstance(replies[1], NodeUnavailable)
        assert replies[0] == [b"v"] and replies[2] == [b"v"]
        started = time.monotonic()
        replies = await wire.run_each(reads)
        assert time.monotonic() - started < 0.3  # the socket timeout is 0.4 s
        assert isinstance(replies[1], NodeUnavailable)
        assert replies[0] == [b"v"] and replies[2] == [b"v"]
        wait_for(lambda: command(paused.port, "PING") == "PONG", "the pause to end")
        assert await _answered(wire, reads) == [[b"v"]] * 3
    finally:
        wait_for(lambda: command(paused.port, "PING") == "PONG", "the pause to end")
        await wire.close()


async def _answered(wire: Wire, batches: list[list[Command]]) -> list[Any]:
    """`run_each`'s replies once none is an error (the node's breaker closes after 0.25 s)."""
    deadline = time.monotonic() + 5
    while True:
        replies = await wire.run_each(batches)
        if not any(isinstance(r, Exception) for r in replies) or time.monotonic() > deadline:
            return replies
        await asyncio.sleep(0.05)


def slot_map_reads(cluster: RedisCluster, *, besides: RedisServer) -> int:
    """`CLUSTER SLOTS` calls served so far by the live nodes other than `besides`."""
    total = 0
    for node in cluster.live():
        if node is not besides:
            stats = command(node.port, "INFO", "commandstats")
            for line in stats.splitlines():
                if line.startswith("cmdstat_cluster|slots:"):
                    total += int(line.split("calls=")[1].split(",")[0])
    return total


async def test_many_batches_on_a_failed_node_reload_the_slot_map_once(
    redis_cluster: RedisCluster, key_prefix: str
) -> None:
    """A listing reads one batch per session: the slot map is read again once for their node,
    not once per batch (each a round trip inside the operation's timeout)."""
    wire = open_wire(
        parse_store_url(redis_cluster.url), op_timeout_s=0.5, breaker_s=0.25, max_connections=8
    )
    paused = redis_cluster.primary_of(f"{key_prefix}{{k0}}")
    on_it = [
        k for k in (f"{key_prefix}{{k{n}}}" for n in range(200))
        if redis_cluster.primary_of(k) is paused
    ][:12]  # fmt: skip
    try:
        await wire.run([[("GET", k)] for k in on_it])  # the slot map read
        before = slot_map_reads(redis_cluster, besides=paused)
        command(paused.port, "CLIENT", "PAUSE", "1500", "ALL")
        replies = await wire.run_each([[("GET", k)] for k in on_it])
        assert all(isinstance(reply, NodeUnavailable) for reply in replies)
        assert slot_map_reads(redis_cluster, besides=paused) - before == 1
    finally:
        wait_for(lambda: command(paused.port, "PING") == "PONG", "the pause to end")
        await wire.close()
