"""The Redis connection pool, with commands packed by hiredis's C packer.

redis-py's synchronous client packs commands with `hiredis.pack_command` when hiredis is
installed; its asyncio client packs every argument in Python (`Connection.pack_command`), about
a hundred calls for a chat request's two pipelines. The connections built here pack in C and
write the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import hiredis
import redis.asyncio as aioredis
from redis.asyncio.connection import (
    AbstractConnection,
    Connection,
    SSLConnection,
    UnixDomainSocketConnection,
)
from redis.exceptions import DataError


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


PACKING: Mapping[type[AbstractConnection], type[AbstractConnection]] = {
    Connection: HiredisConnection,
    SSLConnection: HiredisSSLConnection,
    UnixDomainSocketConnection: HiredisUnixConnection,
}
"""The connection class a URL's scheme selects (`redis://`, `rediss://`, `unix://`) → the same
packing in C."""


def open_pool(url: str, **options: Any) -> aioredis.ConnectionPool:
    """`ConnectionPool.from_url(url, **options)`, its connections packing commands in C (a
    connection class passed in `options` that `PACKING` does not know packs in Python)."""
    pool = aioredis.ConnectionPool.from_url(url, **options)
    pool.connection_class = PACKING.get(pool.connection_class, pool.connection_class)
    return pool
