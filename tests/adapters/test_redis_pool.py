"""The pool's connections pack commands in C, byte for byte as redis-py's Python packer does."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio as aioredis
from hypothesis import given
from hypothesis import strategies as st
from redis.asyncio.connection import Connection, SSLConnection, UnixDomainSocketConnection
from redis.exceptions import DataError

from proxy.adapters.redis_pool import HiredisPacking, open_pool
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
