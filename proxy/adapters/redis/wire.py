"""How the store's commands reach Redis: one server, the primary Sentinel names, or a Cluster.

The store speaks in batches: a batch is a list of commands whose keys share one cluster slot,
and `Wire.run(batches)` answers every batch's replies, in order. No batch spans two slots, so
the same calls run on every kind of Redis:

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
from collections.abc import Sequence
from typing import Any, Protocol

import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import AbstractConnection, Connection
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError

from proxy.adapters.redis.pool import (
    PACKING,
    Command,
    HiredisSentinelConnection,
    HiredisSentinelSSLConnection,
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

    async def close(self) -> None:
        await self.client.aclose()
        for other in self._closing:
            await other.aclose()


class ClusterWire:
    def __init__(self, client: RedisCluster) -> None:
        self.client = client
        self._fan_out = asyncio.Semaphore(FAN_OUT)

    async def run(self, batches: Sequence[Sequence[Command]]) -> list[list[Any]]:
        try:
            if len(batches) == 1:
                return [await self._pipeline(batches[0])]
            return list(await asyncio.gather(*(self._bounded(batch) for batch in batches)))
        except AttributeError as exc:
            # redis-py 8 writes on a connection that another task's slot-map reload closed
            # under it (`_writer` is None): a lost connection like any other
            raise ConnectionError(f"cluster connection closed: {exc}") from exc

    async def ping(self) -> bool:
        try:
            return bool(await self.client.ping(target_nodes=RedisCluster.PRIMARIES))
        except AttributeError as exc:
            raise ConnectionError(f"cluster connection closed: {exc}") from exc

    async def _bounded(self, batch: Sequence[Command]) -> list[Any]:
        async with self._fan_out:
            return await self._pipeline(batch)

    async def _pipeline(self, batch: Sequence[Command]) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        for command in batch:
            pipe.execute_command(*command)
        return list(await pipe.execute())

    async def close(self) -> None:
        await self.client.aclose()


def open_wire(address: StoreAddress, *, op_timeout_s: float, max_connections: int) -> Wire:
    """The wire to the Redis `address` names; nothing is connected until the first command.

    One server and Sentinel have no socket timeout (the store's breaker bounds each operation
    as a whole; see `proxy.adapters.redis.store`). A cluster's connections time out at
    `op_timeout_s`: redis-py reloads the slot map after a timeout or a connection error, so a
    primary that froze is left for the one the cluster promoted."""
    if address.kind == "cluster":
        cluster = RedisCluster(
            startup_nodes=[ClusterNode(host, port) for host, port in address.nodes],
            require_full_coverage=False,  # the slots of live primaries serve during a failover
            retry=Retry(backoff=NoBackoff(), retries=1),  # the breaker bounds the rest
            max_connections=3 * max_connections,  # two batches an operation, plus listings
            ssl=address.tls,
            username=address.username,
            password=address.password,
            socket_connect_timeout=op_timeout_s,
            socket_timeout=op_timeout_s,
        )
        # The nodes found at the first command pack commands in C, as one server's do (the
        # same keyword arguments make every node; redis-py picks no class from them otherwise).
        kwargs = cluster.get_connection_kwargs()
        chosen: type[AbstractConnection] = kwargs.get("connection_class") or Connection
        kwargs["connection_class"] = PACKING.get(chosen, chosen)
        return ClusterWire(cluster)
    if address.kind == "sentinel":
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
    pool = open_pool(
        address.url,
        socket_timeout=None,
        socket_connect_timeout=op_timeout_s,
        max_connections=max_connections,
        retry_on_timeout=False,
    )
    return ServerWire(aioredis.Redis.from_pool(pool))
