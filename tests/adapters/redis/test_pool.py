"""The pool's connections pack commands in C, byte for byte as redis-py's Python packer does;
`run_pipeline` reads every reply in order and keeps its connection in step whatever happens."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from hypothesis import given
from hypothesis import strategies as st
from redis.asyncio.connection import Connection, SSLConnection, UnixDomainSocketConnection
from redis.exceptions import DataError, ResponseError

from proxy.adapters.redis.codec import read_hash_reply
from proxy.adapters.redis.pool import HiredisPacking, open_pool, run_pipeline
from tests.redis_server import RedisServer

ARGUMENT = st.one_of(
    st.text(),
    st.binary(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
)
NAME = st.sampled_from(["HSET", "XADD", b"EVALSHA", "CLIENT SETINFO", b"CONFIG GET"])


def python_packed(*args: Any) -> bytes:
    return b"".join(Connection().pack_command(*args))


def c_packed(*args: Any) -> bytes:
    return b"".join(open_pool("redis://localhost").make_connection().pack_command(*args))


@given(NAME, st.lists(ARGUMENT, max_size=8))
def test_a_command_packs_to_the_bytes_redis_py_writes(name: str | bytes, args: list[Any]) -> None:
    assert c_packed(name, *args) == python_packed(name, *args)


def test_a_pipeline_packs_its_commands_in_order() -> None:
    commands = [("HSET", "k", "f", "é"), ("EXPIRE", "k", 60), ("XADD", "s", "*", "a", b"\x00")]
    connection = open_pool("redis://localhost").make_connection()
    packed = b"".join(connection.pack_commands(commands))
    assert packed == b"".join(Connection().pack_commands(commands))
    assert packed.startswith(b"*4\r\n$4\r\nHSET\r\n")


@pytest.mark.parametrize("bad", [None, ["a"], {"a": 1}])
def test_an_argument_redis_cannot_hold_is_a_data_error(bad: object) -> None:
    with pytest.raises(DataError):
        c_packed("SET", "k", bad)


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("redis://localhost:6379/0", Connection),
        ("rediss://localhost:6379/0", SSLConnection),
        ("unix:///tmp/redis.sock", UnixDomainSocketConnection),
    ],
)
def test_the_pool_keeps_the_connection_kind_its_url_names(url: str, base: type) -> None:
    kind = open_pool(url).connection_class
    assert issubclass(kind, base)
    assert issubclass(kind, HiredisPacking)


async def test_values_round_trip_through_a_real_redis(
    redis_server: RedisServer, key_prefix: str
) -> None:
    client = aioredis.Redis.from_pool(open_pool(redis_server.url))
    large = "x" * 300_000 + "é"
    try:
        async with client.pipeline(transaction=False) as pipe:
            pipe.hset(f"{key_prefix}h", mapping={"text": large, "n": 7, "f": 0.25, "b": b"\x00"})
            pipe.hgetall(f"{key_prefix}h")
            _, stored = await pipe.execute()
        assert stored == {b"text": large.encode(), b"n": b"7", b"f": b"0.25", b"b": b"\x00"}
    finally:
        await client.aclose()


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A server of this test alone: it may be paused."""
    server = RedisServer()
    server.start()
    yield server
    server.resume()
    server.stop()


@pytest.fixture
async def one_connection(own_redis: RedisServer) -> AsyncIterator[aioredis.ConnectionPool]:
    """A pool of a single connection: one leaked connection and the next call fails."""
    pool = open_pool(own_redis.url, max_connections=1)
    yield pool
    await pool.aclose()


async def test_replies_come_back_in_command_order(
    one_connection: aioredis.ConnectionPool,
) -> None:
    replies = await run_pipeline(
        one_connection,
        [("HSET", "h", "a", "1", "b", "é"), ("HGETALL", "h"), ("INCRBY", "n", 5), ("GET", "none")],
    )
    assert replies[0] == 2
    assert read_hash_reply(replies[1]) == {b"a": b"1", b"b": "é".encode()}
    assert replies[2:] == [5, None]


@pytest.mark.parametrize("protocol", [2, 3])
async def test_a_hash_reads_as_a_dict_in_both_protocols(
    own_redis: RedisServer, protocol: int
) -> None:
    pool = open_pool(f"{own_redis.url}?protocol={protocol}")
    try:
        _, reply = await run_pipeline(pool, [("HSET", "h", "f", "v", "g", 2), ("HGETALL", "h")])
    finally:
        await pool.aclose()
    assert isinstance(reply, dict if protocol == 3 else list)
    assert read_hash_reply(reply) == {b"f": b"v", b"g": b"2"}


async def test_an_error_reply_raises_after_every_reply_is_read(
    one_connection: aioredis.ConnectionPool,
) -> None:
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await run_pipeline(
            one_connection, [("SET", "k", "v"), ("HINCRBY", "k", "f", 1), ("SET", "after", "x")]
        )
    # the command after the error ran, and its reply was not left for the next caller
    assert await run_pipeline(one_connection, [("GET", "after"), ("GET", "k")]) == [b"x", b"v"]


async def test_a_cancelled_read_gives_its_connection_back_out_of_step_replies_dropped(
    own_redis: RedisServer, one_connection: aioredis.ConnectionPool
) -> None:
    await run_pipeline(one_connection, [("SET", "k", "old")])
    own_redis.pause()
    try:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await run_pipeline(one_connection, [("GET", "k"), ("SET", "k", "new")])
    finally:
        own_redis.resume()
    # the paused server ran the sent commands once resumed; their replies went with the
    # dropped connection, and the single connection was given back for this call
    assert await run_pipeline(one_connection, [("SET", "other", "1"), ("GET", "k")]) == [
        b"OK",
        b"new",
    ]


async def test_a_command_redis_cannot_hold_raises_before_anything_is_sent(
    one_connection: aioredis.ConnectionPool,
) -> None:
    with pytest.raises(DataError):
        await run_pipeline(one_connection, [("SET", "k", "sent?"), ("SET", "k", None)])
    assert await run_pipeline(one_connection, [("GET", "k")]) == [None]
