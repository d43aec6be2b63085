"""The Redis store's circuit breaker, per-operation timeout and bound on operations at once.

`call(op)` bounds one operation as a whole by `op_timeout_s` (a frozen server accepts connections
and never answers). Any Redis failure raises `StoreUnavailable` and opens the breaker for
`breaker_s`, during which calls fail at once instead of waiting on a dead server. Once it has
elapsed, one call (the probe) tries Redis while the others still fail at once; a probe that
succeeds closes the breaker, so state features resume by themselves and a dead server costs one
timeout per breaker period, not one per request in flight.

On a Redis Cluster a failed node is one node: the wire (`proxy.adapters.redis.wire.ClusterWire`)
keeps a breaker of its own per node and raises `NodeUnavailable` for an operation that needs
one that failed; that operation fails (`StoreUnavailable`) but this breaker stays closed, so the
sessions on the other primaries keep their state while a failover runs.

At most `max_concurrent` operations run at once (each holds one pooled connection); the others
wait for a slot within their own timeout. Without the bound, a burst of more operations than
the pool has connections failed at once (`MaxConnectionsError`) and opened the breaker.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from redis.exceptions import ConnectionError, RedisError

from proxy.errors import StoreUnavailable

T = TypeVar("T")


class NodeUnavailable(ConnectionError):
    """One node of a Redis Cluster failed (or its breaker is open): only its slots are out."""


class Breaker:
    def __init__(
        self,
        *,
        op_timeout_s: float,
        breaker_s: float,
        max_concurrent: int,
        name: str = "state store",
    ) -> None:
        """`name`: what failures are reported as (the store's URL, without its password)."""
        self._name = name
        self._op_timeout_s = op_timeout_s
        self._slots = asyncio.Semaphore(max_concurrent)
        self._breaker_s = breaker_s
        self._open_until = 0.0
        self._probing = False

    @property
    def degraded(self) -> bool:
        """True while the breaker is open or a probe is in flight."""
        return self._probing or time.monotonic() < self._open_until

    async def call(self, op: Callable[[], Awaitable[T]]) -> T:
        """`op()`'s result; raises `StoreUnavailable` at once while degraded, or on a Redis
        error, an OS error or the timeout (which open the breaker)."""
        if self.degraded:
            raise StoreUnavailable(f"{self._name} unavailable (breaker open)")
        probe = self._open_until > 0.0
        self._probing = probe
        try:
            async with asyncio.timeout(self._op_timeout_s), self._slots:
                result = await op()
        except NodeUnavailable as exc:
            raise StoreUnavailable(f"{self._name} unavailable: {exc}") from exc
        except (RedisError, OSError, TimeoutError) as exc:
            self._open_until = time.monotonic() + self._breaker_s
            raise StoreUnavailable(f"{self._name} unavailable: {type(exc).__name__}") from exc
        finally:
            if probe:
                self._probing = False
        self._open_until = 0.0
        return result
