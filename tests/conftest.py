"""Suite-wide fixtures: a real Redis server of our own, a clean environment."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tests.redis_cluster import RedisCluster, SentinelSet
from tests.redis_server import RedisServer

# The suite runs on shared machines: how fast examples are drawn says nothing about the code.
settings.register_profile(
    "shared-machine", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("shared-machine")


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisCluster]:
    """A real Redis Cluster of six nodes (three primaries with a replica each), shared by the
    tests that only read and write; a test that kills a node starts its own."""
    cluster = RedisCluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def sentinel_set() -> Iterator[SentinelSet]:
    """A real primary, its replica and three sentinels, shared like `redis_cluster`."""
    sentinels = SentinelSet()
    try:
        sentinels.start()
        yield sentinels
    finally:
        sentinels.stop()


@pytest.fixture
def key_prefix() -> str:
    """A fresh key prefix per test, so tests share one server without seeing each other."""
    return f"t{uuid.uuid4().hex[:12]}:"


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the developer's own keys or ctxproxy settings."""
    for name in list(os.environ):
        if name.startswith(("CTXPROXY_", "OPENAI_", "ANTHROPIC_")):
            monkeypatch.delenv(name, raising=False)
