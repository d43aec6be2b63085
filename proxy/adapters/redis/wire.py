"""How the store's commands reach Redis: one server, the primary Sentinel names, or a Cluster.

The store speaks in batches: a batch is a list of commands whose keys share one cluster slot,
and `Wire.run(batches)` answers every batch's replies, in order (`run_each`: a batch with an
error reply, or whose cluster node is out, is its error, the others' replies kept). No batch
spans two slots, so the same calls run on every kind of Redis:

    ServerWire   one server (`redis://`, `rediss://`, `unix://`) or the primary of a Sentinel
                 set (`redis+sentinel://`): every batch of a call in one pipelined write on one
                 connection (`pool.run_pipeline`), one round trip
    ClusterWire  a Redis Cluster (`redis+cluster://`): one redis-py cluster pipeline per batch,
                 sent to the node that owns its slot, the batches at once; redis-py follows
                 MOVED and ASK redirections and reloads its slot map after a node failure

A Sentinel-managed connection asks the sentinels for the primary each time it connects, so
after a failover (a dropped connection, or `READONLY` from the demoted primary) the store
follows the new primary by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Sequence
from typing import Any, Protocol

import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import AbstractConnection, Connection
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import NoBackoff
from redis.exceptions import (
    ClusterDownError,
    ConnectionError,
    RedisClusterException,
    RedisError,
    ResponseError,
)
from redis.exceptions import TimeoutError as RedisTimeout

from proxy.adapters.redis.breaker import NodeUnavailable
from proxy.adapters.redis.pool import (
    PACKING,
    Command,
    HiredisSentinelConnection,
    HiredisSentinelSSLConnection,
    exchange,
    open_pool,
    run_pipeline,
)
from proxy.settings import StoreAddress

FAN_OUT = 16
"""Batches of one call in flight at once on a cluster (a listing reads one per session)."""


class Wire(Protocol):
    async def run(self, batches: Sequence[Sequence[Command]]) -> list[list[Any]]:
        """Each batch's replies; an error reply raises (once every reply is read). Any failure
        to reach Redis is a `RedisError` or an `OSError`."""
        ...

    async def run_each(self, batches: Sequence[Sequence[Command]]) -> list[list[Any] | Exception]:
        """As `run`, but a batch with an error reply is that error (the first), in its place,
        and the others' replies are kept; on a cluster a batch whose node failed is its error
        too (one server's connection fails or answers as a whole, as `run`)."""
        ...

    async def ping(self) -> bool:
        """Whether every primary answers."""
        ...

    async def close(self) -> None: ...


class ServerWire:
    def __init__(self, client: aioredis.Redis, *, closing: Sequence[Any] = ()) -> None:
        self.client = client
        self._pool = client.connection_pool
        self._closing = closing

    async def ping(self) -> bool:
        [pong] = await run_pipeline(self._pool, [("PING",)])
        return bool(pong)

    async def run(self, batches: Sequence[Sequence[Command]]) -> list[list[Any]]:
        replies = await run_pipeline(self._pool, [c for batch in batches for c in batch])
        split, at = [], 0
        for batch in batches:
            split.append(replies[at : at + len(batch)])
            at += len(batch)
        return split

    async def run_each(self, batches: Sequence[Sequence[Command]]) -> list[list[Any] | Exception]:
        replies = await exchange(self._pool, [c for batch in batches for c in batch])
        split: list[list[Any] | Exception] = []
        at = 0
        for batch in batches:
            own = replies[at : at + len(batch)]
            at += len(batch)
            failed = [reply for reply in own if isinstance(reply, ResponseError)]
            split.append(failed[0] if failed else own)
        return split

    async def close(self) -> None:
        await self.client.aclose()
        for other in self._closing:
            await other.aclose()


class ClusterWire:
    """Batches on a cluster, with a breaker per node: a batch whose slot's primary failed less
    than `breaker_s` ago fails at once (`NodeUnavailable`) without touching the network; a batch
    that fails to reach its node marks the node and reloads the slot map (from the other nodes,
    keeping every connection to them), so once the cluster has promoted a replica the slots go
    there. Batches of healthy nodes run on meanwhile."""

    def __init__(self, client: RedisCluster, *, breaker_s: float) -> None:
        self.client = client
        self._fan_out = asyncio.Semaphore(FAN_OUT)
        self._breaker_s = breaker_s
        self._down: dict[str, float] = {}
        """Node name -> until when its batches fail at once."""

    async def run(self, batches: Sequence[Sequence[Command]]) -> list[list[Any]]:
        replies = await self._send(batches, strict=True)
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return replies  # type: ignore[return-value]  # no reply is an error here

    async def run_each(self, batches: Sequence[Sequence[Command]]) -> list[list[Any] | Exception]:
        return await self._send(batches, strict=False)

    async def _send(
        self, batches: Sequence[Sequence[Command]], *, strict: bool
    ) -> list[list[Any] | Exception]:
        """Each batch's replies or error; `strict`: none is sent if a batch's node is out."""
        nodes = [self._node_of(batch) for batch in batches]
        now = time.monotonic()
        shut = [name is not None and self._down.get(name, 0.0) > now for name in nodes]
        if strict and any(shut):
            raise NodeUnavailable(f"node {nodes[shut.index(True)]} unavailable (breaker open)")
        live = [batch for batch, closed in zip(batches, shut, strict=True) if not closed]
        if len(live) == 1:
            got: list[Any] = [await self._caught(self._pipeline(live[0]))]
        else:
            got = list(await asyncio.gather(*(self._caught(self._bounded(b)) for b in live)))
        answers = iter(got)
        replies: list[list[Any] | Exception] = [
            NodeUnavailable(f"node {name} unavailable (breaker open)") if closed else next(answers)
            for name, closed in zip(nodes, shut, strict=True)
        ]
        failed = {
            name
            for name, reply, closed in zip(nodes, replies, shut, strict=True)
            if isinstance(reply, NodeUnavailable) and name is not None and not closed
        }
        for name in failed:  # once a node, however many of its batches failed
            self._down[name] = time.monotonic() + self._breaker_s
            await self._reload_slots(name)
        return replies

    async def _caught(self, batch: Awaitable[list[Any]]) -> list[Any] | Exception:
        """A batch's replies, or the error that ended it; a failure to reach the node (a redis-py
        8 write on a connection another task closed: `_writer` is None) as `NodeUnavailable`."""
        try:
            return await batch
        except (ConnectionError, RedisTimeout, OSError, ClusterDownError, AttributeError) as exc:
            return NodeUnavailable(f"{type(exc).__name__}: {exc}")
        except RedisError as exc:
            return exc

    def _node_of(self, batch: Sequence[Command]) -> str | None:
        """The name of the primary that owns the batch's slot, as far as the map knows."""
        command = batch[0]
        key = command[3] if command[0] == "EVAL" else command[1]
        try:
            node = self.client.get_node_from_key(key)  # type: ignore[arg-type]
        except (RedisError, RedisClusterException):  # no slot map yet, or a slot uncovered
            return None
        return None if node is None else str(node.name)

    async def _reload_slots(self, failed: str | None) -> None:
        with contextlib.suppress(RedisError, OSError):
            await self.client.nodes_manager.initialize(last_failed_node_name=failed)

    async def _bounded(self, batch: Sequence[Command]) -> list[Any]:
        async with self._fan_out:
            return await self._pipeline(batch)

    async def _pipeline(self, batch: Sequence[Command]) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        for command in batch:
            pipe.execute_command(*command)
        return list(await pipe.execute())

    async def ping(self) -> bool:
        try:
            return bool(await self.client.ping(target_nodes=RedisCluster.PRIMARIES))
        except AttributeError as exc:
            raise ConnectionError(f"cluster connection closed: {exc}") from exc

    async def close(self) -> None:
        await self.client.aclose()


def open_wire(
    address: StoreAddress, *, op_timeout_s: float, breaker_s: float, max_connections: int
) -> Wire:
    """The wire to the Redis `address` names; nothing is connected until the first command.

    One server and Sentinel have no socket timeout (the store's breaker bounds each operation
    as a whole; see `proxy.adapters.redis.store`). A cluster's connections time out a little
    before `op_timeout_s`, so a node that froze is marked down (and the slot map reloaded)
    before the breaker's timeout ends the operation; `breaker_s` is each node's breaker period."""
    if address.kind == "cluster":
        return open_cluster(
            address, op_timeout_s=op_timeout_s, breaker_s=breaker_s, max_connections=max_connections
        )
    if address.kind == "sentinel":
        return open_sentinel(address, op_timeout_s=op_timeout_s, max_connections=max_connections)
    pool = open_pool(
        address.url,
        socket_timeout=None,
        socket_connect_timeout=op_timeout_s,
        max_connections=max_connections,
        retry_on_timeout=False,
    )
    return ServerWire(aioredis.Redis.from_pool(pool))


def open_cluster(
    address: StoreAddress, *, op_timeout_s: float, breaker_s: float, max_connections: int
) -> ClusterWire:
    """The wire to a cluster whose nodes time out at 0.8 × `op_timeout_s` (see `open_wire`)."""
    cluster = RedisCluster(
        startup_nodes=[ClusterNode(host, port) for host, port in address.nodes],
        require_full_coverage=False,  # the slots of live primaries serve during a failover
        # no retry: redis-py would close every node's connections first (ClusterWire
        # reloads the slot map alone, and the next request is the retry)
        retry=Retry(backoff=NoBackoff(), retries=0),
        max_connections=3 * max_connections,  # two batches an operation, plus listings
        ssl=address.tls,
        username=address.username,
        password=address.password,
        socket_connect_timeout=op_timeout_s * 0.8,
        socket_timeout=op_timeout_s * 0.8,
    )
    # The nodes found at the first command pack commands in C, as one server's do (the
    # same keyword arguments make every node; redis-py picks no class from them otherwise).
    kwargs = cluster.get_connection_kwargs()
    chosen: type[AbstractConnection] = kwargs.get("connection_class") or Connection
    kwargs["connection_class"] = PACKING.get(chosen, chosen)
    return ClusterWire(cluster, breaker_s=breaker_s)


def open_sentinel(
    address: StoreAddress, *, op_timeout_s: float, max_connections: int
) -> ServerWire:
    """The wire to the primary that Sentinel names for `address.service`; it closes the
    Sentinel connections with its own."""
    sentinel = Sentinel(  # type: ignore[no-untyped-call]
        address.nodes,
        sentinel_kwargs={
            "socket_connect_timeout": op_timeout_s,
            "socket_timeout": op_timeout_s,
            "ssl": address.tls,
        },
    )
    primary = sentinel.master_for(
        address.service,
        connection_class=(
            HiredisSentinelSSLConnection if address.tls else HiredisSentinelConnection
        ),
        db=address.db,
        username=address.username,
        password=address.password,
        socket_connect_timeout=op_timeout_s,
        socket_timeout=None,
        max_connections=max_connections,
        retry_on_timeout=False,
    )
    return ServerWire(primary, closing=[sentinel])
