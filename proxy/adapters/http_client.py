"""Opening an upstream response, and reading it with bounded silences.

Before the first byte: a refused or reset connection (or a stale pooled keep-alive one) is
retried once on a fresh connection, then `UpstreamUnreachable`; a connect or first-byte timeout
is `UpstreamTimeout`. After the first byte nothing is retried. Redirects are never followed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from dataclasses import dataclass

import aiohttp

from proxy.errors import UpstreamTimeout, UpstreamUnreachable

RETRYABLE = (
    aiohttp.ClientConnectorError,
    aiohttp.ServerDisconnectedError,
    aiohttp.ClientOSError,
)


@dataclass(frozen=True, slots=True)
class Timeouts:
    connect_s: float = 5.0
    first_byte_s: float = 120.0
    idle_s: float = 300.0
    total_s: float = 600.0
    """For a whole non-streaming call; streams have no total bound."""


class UpstreamIdle(Exception):
    """The upstream was silent longer than the idle bound in the middle of a body."""


async def open_response(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    *,
    headers: Mapping[str, str],
    data: bytes | AsyncIterable[bytes] | None,
    timeouts: Timeouts,
    decompress: bool = True,
) -> aiohttp.ClientResponse:
    """Send a request and return once the response headers have arrived."""
    timeout = aiohttp.ClientTimeout(
        total=None, connect=timeouts.connect_s, sock_connect=timeouts.connect_s
    )
    for attempt in (1, 2):
        try:
            async with asyncio.timeout(timeouts.first_byte_s):
                return await session.request(
                    method,
                    url,
                    headers=headers,
                    data=data,
                    timeout=timeout,
                    allow_redirects=False,
                    auto_decompress=decompress,
                )
        except (TimeoutError, aiohttp.ConnectionTimeoutError) as exc:
            raise UpstreamTimeout("upstream did not answer in time") from exc
        except RETRYABLE as exc:
            if attempt == 2:
                raise UpstreamUnreachable(f"upstream unreachable: {type(exc).__name__}") from exc
        except aiohttp.ClientError as exc:
            raise UpstreamUnreachable(f"upstream error: {type(exc).__name__}") from exc
    raise AssertionError("unreachable")


async def iter_body(response: aiohttp.ClientResponse, *, idle_s: float) -> AsyncIterator[bytes]:
    """The body's bytes as they arrive; `UpstreamIdle` after a silence over `idle_s`.

    A connection cut before the body ended raises `aiohttp.ClientPayloadError` (or a
    connection error), which the relay turns into an in-band error event.
    """
    while True:
        try:
            async with asyncio.timeout(idle_s):
                chunk = await response.content.readany()
        except TimeoutError as exc:
            raise UpstreamIdle(f"upstream silent for over {idle_s:g}s") from exc
        if not chunk:
            return
        yield chunk


async def read_body(response: aiohttp.ClientResponse, *, timeouts: Timeouts) -> bytes:
    """A whole body, bounded by the total timeout of a non-streaming call."""
    try:
        async with asyncio.timeout(timeouts.total_s):
            return await response.read()
    except TimeoutError as exc:
        raise UpstreamTimeout("upstream did not finish in time") from exc
    except aiohttp.ClientError as exc:
        raise UpstreamUnreachable(f"upstream cut the response: {type(exc).__name__}") from exc
