"""The Redis connection pool, with commands packed by hiredis's C packer, and a lean pipeline.

redis-py's synchronous client packs commands with `hiredis.pack_command` when hiredis is
installed; its asyncio client packs every argument in Python (`Connection.pack_command`), about
a hundred calls for a chat request's two pipelines. The connections built here pack in C and
write the same bytes.

`run_pipeline` sends a chat request's commands (its load, its record) without redis-py's
`Pipeline`, which per command runs reply callbacks, `HIMPORT` and observability hooks, and per
pipeline starts a task to reset itself: about half the client's CPU on that path. `exchange`
is the same with each error reply kept in its place.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import hiredis
import redis.asyncio as aioredis
from redis.asyncio.connection import (
    AbstractConnection,
    Connection,
    SSLConnection,
    UnixDomainSocketConnection,
)
from redis.asyncio.sentinel import SentinelManagedConnection, SentinelManagedSSLConnection
from redis.exceptions import DataError, ResponseError

Command = tuple[str | bytes | int | float, ...]
"""One command of `run_pipeline`: its name (one word) and arguments."""

_pack: Callable[[Command], bytes] = hiredis.pack_command  # type: ignore[assignment]
# (hiredis's stub types the argument as a tuple of one element)


class HiredisPacking:
    """A mixin for a redis-py asyncio connection class: `pack_command` and `pack_commands` in
    C. As redis-py does, a command name holding spaces (`"CLIENT SETINFO"`) is sent as several
    arguments; an argument hiredis cannot pack (None, a list) raises redis-py's `DataError`."""

    def pack_command(self, *args: Any) -> list[bytes]:
        return [_packed(args)]

    def pack_commands(self, commands: Iterable[Iterable[Any]]) -> list[bytes]:
        return [b"".join([_packed(tuple(command)) for command in commands])]


def _packed(args: tuple[Any, ...]) -> bytes:
    name = args[0]
    if isinstance(name, str):
        if " " in name:
            args = (*name.encode().split(), *args[1:])
    elif b" " in name:
        args = (*name.split(), *args[1:])
    try:
        packed: bytes = hiredis.pack_command(args)
    except TypeError as exc:
        raise DataError(str(exc)) from exc
    return packed


class HiredisConnection(HiredisPacking, Connection):
    pass


class HiredisSSLConnection(HiredisPacking, SSLConnection):
    pass


class HiredisUnixConnection(HiredisPacking, UnixDomainSocketConnection):
    pass


class HiredisSentinelConnection(HiredisPacking, SentinelManagedConnection):
    """A connection to the primary that the sentinels name, found again on each connect."""


class HiredisSentinelSSLConnection(HiredisPacking, SentinelManagedSSLConnection):
    pass


PACKING: Mapping[type[AbstractConnection], type[AbstractConnection]] = MappingProxyType(
    {
        Connection: HiredisConnection,
        SSLConnection: HiredisSSLConnection,
        UnixDomainSocketConnection: HiredisUnixConnection,
    }
)
"""The connection class a URL's scheme selects (`redis://`, `rediss://`, `unix://`) → the same
packing in C."""


def open_pool(url: str, **options: Any) -> aioredis.ConnectionPool:
    """`ConnectionPool.from_url(url, **options)`, its connections packing commands in C (a
    connection class passed in `options` that `PACKING` does not know packs in Python)."""
    pool = aioredis.ConnectionPool.from_url(url, **options)
    pool.connection_class = PACKING.get(pool.connection_class, pool.connection_class)
    return pool


async def run_pipeline(pool: aioredis.ConnectionPool, commands: Sequence[Command]) -> list[Any]:
    """Every command's reply, in order, for one write on one connection of `pool`.

    Replies are as the parser reads them (bytes, ints, lists; maps as dicts with RESP3, which
    redis-py speaks by default, as flat lists with RESP2: see `codec.read_hash_reply`). An
    error reply raises its `ResponseError` once every reply is read, so the connection stays in
    step; a read that fails or is cancelled drops the connection (redis-py disconnects it)."""
    replies = await exchange(pool, commands)
    for reply in replies:
        if isinstance(reply, ResponseError):
            raise reply
    return replies


async def exchange(pool: aioredis.ConnectionPool, commands: Sequence[Command]) -> list[Any]:
    """As `run_pipeline`, but an error reply is returned in its place (a `ResponseError`)."""
    connection: AbstractConnection = await pool.get_connection()  # type: ignore[no-untyped-call]
    try:
        await connection.send_packed_command(_packed_commands(commands))
        replies: list[Any] = []
        for _ in commands:
            try:
                replies.append(await connection.read_response())
            except ResponseError as exc:
                replies.append(exc)
    except BaseException:
        await asyncio.shield(pool.release(connection))  # a second cancel must not leak it
        raise
    await pool.release(connection)
    return replies


def _packed_commands(commands: Sequence[Command]) -> bytes:
    """`commands` packed in one buffer, in C: their names are single words (no split needed)."""
    try:
        return b"".join(map(_pack, commands))
    except TypeError as exc:
        raise DataError(str(exc)) from exc
