"""The store's wire on a real Redis server and on the real local cluster (`tests/redis_cluster.py`),
for the tests that drive the wire and the store's Lua scripts directly."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from proxy.adapters.redis.wire import Wire, open_wire
from proxy.settings import parse_store_url
from tests.redis_cluster import RedisCluster
from tests.redis_server import RedisServer


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    return redis_server.url


@pytest.fixture
def cluster_url(redis_cluster: RedisCluster) -> str:
    return redis_cluster.url


@pytest.fixture(params=["redis", "cluster"])
async def wire(request: pytest.FixtureRequest) -> AsyncIterator[Wire]:
    """A wire as the store opens it (a cluster's first command reads the slot map and redis-py's
    command table: 2 s an operation, as the store contract suite gives a cluster)."""
    url: str = request.getfixturevalue(f"{request.param}_url")
    made = open_wire(parse_store_url(url), op_timeout_s=2.0, breaker_s=0.25, max_connections=8)
    yield made
    await made.close()
