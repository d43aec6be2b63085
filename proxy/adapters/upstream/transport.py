"""The one HTTP transport to upstreams, with one timeout policy: both upstream adapters and the
pass-through open their responses here and read them with bounded silences.

`Timeouts` are an upstream's settings (`timeouts_of`): a new connection must open within
`connect_s`; a stream's headers must come within `first_byte_s`, and then no silence in its body
may last `idle_s`; a non-streaming call, body included, must end within `total_s`.
Before the first byte: a refused or reset connection (or a stale pooled keep-alive one) is
retried once on a fresh connection, then `UpstreamUnreachable`; a connect timeout, a stream's
first-byte timeout or a whole call's total timeout is `UpstreamTimeout`. After the first byte
nothing is retried. Redirects are never followed.

A JSON body POSTed for an answer relayed untouched (`post_json`) comes back as the `Upstream`
port's reply: an event stream as its bytes arrive (`streamed_reply`), anything else read whole
(`whole_reply`).
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncGenerator, AsyncIterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import aiohttp
import orjson
from yarl import URL

from proxy.adapters.upstream.headers import client_response_headers
from proxy.errors import UpstreamTimeout, UpstreamUnreachable
from proxy.ports import UpstreamReply
from proxy.settings import UpstreamSettings
from proxy.types import JSON

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
    stream_bounds: aiohttp.ClientTimeout = field(init=False, repr=False, compare=False)
    """aiohttp's bounds of a stream's request (made once: an upstream's timeouts are built once)."""
    call_bounds: aiohttp.ClientTimeout = field(init=False, repr=False, compare=False)
    """aiohttp's bounds of a whole non-streaming call."""

    def __post_init__(self) -> None:
        # `sock_connect` bounds opening a new connection; `connect` would also bound taking a
        # pooled one, at the price of a timeout context on every request (a wait for a free
        # connection is bounded anyway: by `total_s` or by the stream's first-byte bound).
        stream = aiohttp.ClientTimeout(total=None, sock_connect=self.connect_s)
        call = aiohttp.ClientTimeout(total=self.total_s, sock_connect=self.connect_s)
        object.__setattr__(self, "stream_bounds", stream)
        object.__setattr__(self, "call_bounds", call)


def timeouts_of(upstream: UpstreamSettings) -> Timeouts:
    """The timeouts an upstream's settings name."""
    return Timeouts(
        connect_s=upstream.connect_timeout_s,
        first_byte_s=upstream.first_byte_timeout_s,
        idle_s=upstream.idle_timeout_s,
        total_s=upstream.timeout_s,
    )


class UpstreamIdle(Exception):
    """The upstream was silent longer than the idle bound in the middle of a body."""


CUT_ERRORS = (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError, UpstreamIdle, OSError)
"""What reading a body that has started (`iter_body`) raises when the upstream fails."""


async def open_response(
    session: aiohttp.ClientSession,
    method: str,
    url: str | URL,
    *,
    headers: Mapping[str, str],
    data: bytes | AsyncIterable[bytes] | None,
    timeouts: Timeouts,
    decompress: bool = True,
    whole_call: bool = False,
) -> aiohttp.ClientResponse:
    """Send a request and return once the response headers have arrived.

    A stream (the default) must start within `first_byte_s`; with `whole_call` (a non-streaming
    answer, which arrives all at once) the call, body read included, is bounded by `total_s`
    instead, by aiohttp's own timer."""
    timeout = timeouts.call_bounds if whole_call else timeouts.stream_bounds
    for attempt in (1, 2):
        try:
            if whole_call:
                return await _request(session, method, url, headers, data, timeout, decompress)
            async with asyncio.timeout(timeouts.first_byte_s):
                return await _request(session, method, url, headers, data, timeout, decompress)
        except (TimeoutError, aiohttp.ConnectionTimeoutError) as exc:
            raise UpstreamTimeout("upstream did not answer in time") from exc
        except RETRYABLE as exc:
            if attempt == 2:
                raise UpstreamUnreachable(unreachable(url, exc)) from exc
        except aiohttp.ClientError as exc:
            raise UpstreamUnreachable(unreachable(url, exc)) from exc
    raise AssertionError("unreachable")


def unreachable(url: str | URL, exc: BaseException, *, what: str = "upstream") -> str:
    """Why the server at `url` (`what`) could not be reached, naming its host and port only
    (never a key or the rest of the URL), with the system's reason rather than aiohttp's wording
    (`Cannot connect to host … ssl:default […]`)."""
    parts = urlsplit(str(url))
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = 0
    return f"{what} {parts.hostname}:{port} unreachable: {_reason(exc)}"


def _reason(exc: BaseException) -> str:
    error = exc.os_error if isinstance(exc, aiohttp.ClientConnectorError) else None
    if isinstance(error, socket.gaierror):
        return f"name not resolved ({error.strerror})"
    if error is not None and error.errno:
        return os.strerror(error.errno)
    return type(exc).__name__


async def _request(
    session: aiohttp.ClientSession,
    method: str,
    url: str | URL,
    headers: Mapping[str, str],
    data: bytes | AsyncIterable[bytes] | None,
    bounds: aiohttp.ClientTimeout,
    decompress: bool,
) -> aiohttp.ClientResponse:
    return await session.request(
        method,
        url,
        headers=headers,
        data=data,
        timeout=bounds,
        allow_redirects=False,
        auto_decompress=decompress,
    )


async def iter_body(
    response: aiohttp.ClientResponse, *, idle_s: float
) -> AsyncGenerator[bytes, None]:
    """The body's bytes as they arrive; `UpstreamIdle` after a silence over `idle_s`.

    A connection cut before the body ended raises `aiohttp.ClientPayloadError` (or a
    connection error), which the relay turns into an in-band error event.
    """
    reader = response.content
    watch = _IdleWatch(reader, idle_s)
    try:
        while True:
            watch.waiting_since = watch.now()
            chunk = await reader.readany()
            watch.waiting_since = None
            if not chunk:
                return
            yield chunk
    finally:
        watch.close()


class _IdleWatch:
    """Fails `reader` with `UpstreamIdle` once one wait for data has lasted `idle_s`.

    One timer per body, re-armed only when it fires: a chunk costs two clock reads, not a timer.
    Time the consumer spends between reads (a slow client) is not upstream silence."""

    def __init__(self, reader: aiohttp.StreamReader, idle_s: float) -> None:
        self._loop = asyncio.get_running_loop()
        self._reader = reader
        self._idle_s = idle_s
        self.now = self._loop.time
        self.waiting_since: float | None = None
        self._handle = self._loop.call_later(idle_s, self._check)

    def _check(self) -> None:
        since, now = self.waiting_since, self._loop.time()
        if since is not None and now - since >= self._idle_s:
            self._reader.set_exception(UpstreamIdle(f"upstream silent for over {self._idle_s:g}s"))
            return
        self._handle = self._loop.call_at(
            (now if since is None else since) + self._idle_s, self._check
        )

    def close(self) -> None:
        self._handle.cancel()


async def read_body(response: aiohttp.ClientResponse) -> bytes:
    """A whole body, within the bound `open_response(whole_call=True)` set for the call."""
    try:
        return await response.read()
    except TimeoutError as exc:
        raise UpstreamTimeout("upstream did not finish in time") from exc
    except aiohttp.ClientError as exc:
        raise UpstreamUnreachable(f"upstream cut the response: {type(exc).__name__}") from exc


async def release(response: aiohttp.ClientResponse) -> None:
    """Give the response back: a finished body returns its connection to the pool; an unfinished
    one (a client gone mid-stream, a cancelled request) is closed, so the upstream stops
    generating."""
    if response.content.at_eof():
        response.release()
    else:
        response.close()


async def post_json(
    session: aiohttp.ClientSession,
    url: str,
    body: JSON,
    *,
    headers: Mapping[str, str],
    timeouts: Timeouts,
    stream: bool,
) -> tuple[aiohttp.ClientResponse, int]:
    """POST `body` as JSON (`open_response`: a `stream` must start within `first_byte_s`, any
    other call end within `total_s`); the response, its headers come, and the bytes sent."""
    data = orjson.dumps(body)
    response = await open_response(
        session, "POST", url, headers=headers, data=data, timeouts=timeouts, whole_call=not stream
    )
    return response, len(data)


def streamed_reply(
    response: aiohttp.ClientResponse, *, idle_s: float, sent_bytes: int
) -> UpstreamReply:
    """The answer's bytes untouched as they arrive (`iter_body`); its `release` closes them."""
    events = iter_body(response, idle_s=idle_s)

    async def release_stream() -> None:
        await events.aclose()
        await release(response)

    relayed = client_response_headers(response.headers, decoded_body=True)
    return UpstreamReply(response.status, relayed, None, events, release_stream, sent_bytes)


async def whole_reply(response: aiohttp.ClientResponse, *, sent_bytes: int) -> UpstreamReply:
    """The answer read whole and untouched; its connection is released already."""
    try:
        answer = await read_body(response)
    finally:
        await release(response)
    relayed = client_response_headers(response.headers, decoded_body=True)
    return UpstreamReply(response.status, relayed, answer, None, released_already, sent_bytes)


async def released_already() -> None:
    """The `release` of a reply whose body was read whole: its connection is back already."""
