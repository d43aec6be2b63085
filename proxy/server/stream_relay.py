"""Relay an upstream SSE stream to the client, event by event.

Stream bytes are copied as they arrive; a pure SSE decoder watches them so that only complete
events are forwarded (partial bytes never), usage is picked out, and the usage chunk the proxy
asked for on the client's behalf is dropped. A stream the upstream cuts or leaves idle ends with
an in-band `data: {"error": ...}` event, never a silent clean end. So does a stream still running
`drain_timeout_s` after shutdown began (`Lifecycle.drain`): it is stopped while its client can
still be told.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Mapping

import aiohttp
import orjson
from aiohttp import web

from proxy.adapters.upstream.transport import UpstreamIdle
from proxy.errors import error_body
from proxy.ports import UpstreamReply
from proxy.server.appkeys import SCOPE
from proxy.server.relay import Relayed, with_ours
from proxy.sse import SSEDecoder
from proxy.usage import Usage, is_usage_only_chunk, usage_from

log = logging.getLogger("proxy.server.relay")  # the name it logged under before the split

CUT_ERRORS = (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError, UpstreamIdle, OSError)


async def relay_stream(
    request: web.Request,
    reply: UpstreamReply,
    *,
    headers: Mapping[str, str],
    drop_usage_chunk: bool,
    started: float,
    response: web.StreamResponse | None = None,
) -> tuple[web.StreamResponse, Relayed]:
    """Copy an SSE stream to the client; the caller releases the upstream afterwards.

    Into `response` when the keep-alive already started one (its headers are sent)."""
    assert reply.stream is not None
    if response is None:
        response = web.StreamResponse(
            status=reply.status, headers=with_ours(reply.headers, headers)
        )
        await response.prepare(request)
    copier = _Copier(response, drop_usage_chunk=drop_usage_chunk, started=started)
    lifecycle = request[SCOPE].services.lifecycle
    task = lifecycle.stream_started()
    try:
        await copier.copy(reply.stream)
    except asyncio.CancelledError:
        # Shutdown past the drain timeout (or a client that left): tell a client still there.
        await _write_error(response, None, reason="the proxy is shutting down")
        raise
    except CUT_ERRORS as exc:
        if isinstance(exc, ConnectionResetError) and request.transport is None:
            raise  # the client went away: nothing to tell it
        log.warning("upstream stream cut: %s", type(exc).__name__)
        await _write_error(response, exc)
        return response, copier.relayed(completed=False, error=type(exc).__name__)
    finally:
        lifecycle.stream_ended(task)
    if copier.decoder.pending:
        await _write_error(response, None)
        return response, copier.relayed(completed=False, error="cut")
    if copier.decoder.tail:
        await response.write(copier.decoder.tail)
    await response.write_eof()
    return response, copier.relayed(completed=True)


class _Copier:
    """Forwards whole events as they complete, picking out usage on the way."""

    def __init__(
        self, response: web.StreamResponse, *, drop_usage_chunk: bool, started: float
    ) -> None:
        self.decoder = SSEDecoder()
        self._response = response
        self._drop_usage_chunk = drop_usage_chunk
        self._started = started
        self._usage: Usage | None = None
        self._first_byte: float | None = None

    async def copy(self, stream: AsyncIterator[bytes]) -> None:
        async for chunk in stream:
            self._first_byte = self._first_byte or time.monotonic() - self._started
            plain = self._plain_events(chunk)
            out = bytearray(chunk[:plain])
            for event in self.decoder.feed(chunk[plain:] if plain else chunk):
                if b'"usage"' in event.raw and event.data.startswith("{"):
                    payload = _json(event.data)
                    self._usage = usage_from(payload) or self._usage
                    if self._drop_usage_chunk and is_usage_only_chunk(payload):
                        continue
                out += event.raw
            if out:
                await self._response.write(bytes(out))

    def _plain_events(self, chunk: bytes) -> int:
        """How many leading bytes of `chunk` are whole events with no usage in them, which go
        out as they came without being decoded (with `\n` line ends and nothing held back, an
        event ends at each blank line)."""
        if not self.decoder.idle or b"\r" in chunk:
            return 0
        usage_at = chunk.find(b'"usage"')
        end = chunk.rfind(b"\n\n", 0, len(chunk) if usage_at < 0 else usage_at)
        return end + 2 if end >= 0 else 0

    def relayed(self, *, completed: bool, error: str = "") -> Relayed:
        """Usage counts only for an answer that completed."""
        usage = self._usage if completed else None
        return Relayed(usage, completed=completed, first_byte_s=self._first_byte, error=error)


async def _write_error(
    response: web.StreamResponse, exc: BaseException | None, *, reason: str = ""
) -> None:
    """The in-band error event, then the end; bounded, and silent if the client is gone."""
    if not reason:
        reason = "upstream went silent" if isinstance(exc, UpstreamIdle) else "upstream stream cut"
    body = error_body(
        f"{reason} before the answer was complete", "upstream_error", code="stream_interrupted"
    )
    try:
        async with asyncio.timeout(1.0):  # a client that stopped reading cannot hold us here
            await response.write(b"data: " + orjson.dumps(body) + b"\n\n")
            await response.write_eof()
    except (ConnectionResetError, aiohttp.ClientConnectionError, TimeoutError):
        pass


def _json(data: str) -> object:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
