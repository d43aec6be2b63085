"""Relay an upstream answer to the client: bodies whole, streams event by event.

Stream bytes are copied as they arrive; a pure SSE decoder watches them so that only complete
events are forwarded (partial bytes never), usage is picked out, and the usage chunk the proxy
asked for on the client's behalf is dropped. A stream the upstream cuts or leaves idle ends with
an in-band `data: {"error": ...}` event, never a silent clean end.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass

import aiohttp
import orjson
from aiohttp import web

from proxy.adapters.http_client import UpstreamIdle
from proxy.errors import error_body
from proxy.ports import UpstreamReply
from proxy.sse import SSEDecoder
from proxy.usage import Usage, is_usage_only_chunk, usage_from, usage_from_body

log = logging.getLogger(__name__)

CUT_ERRORS = (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError, UpstreamIdle, OSError)


@dataclass(frozen=True, slots=True)
class Relayed:
    """What the relay saw: usage (if any), whether the answer completed, time to first byte."""

    usage: Usage | None
    completed: bool
    first_byte_s: float | None = None
    error: str = ""


async def relay_body(
    request: web.Request, reply: UpstreamReply, *, headers: Mapping[str, str]
) -> tuple[web.Response, Relayed]:
    body = reply.body or b""
    response = web.Response(status=reply.status, body=body, headers={**reply.headers, **headers})
    usage = usage_from_body(body) if reply.status == 200 else None
    return response, Relayed(usage=usage, completed=reply.status == 200)


async def relay_stream(
    request: web.Request,
    reply: UpstreamReply,
    *,
    headers: Mapping[str, str],
    drop_usage_chunk: bool,
    started: float,
) -> tuple[web.StreamResponse, Relayed]:
    """Copy an SSE stream to the client; the caller releases the upstream afterwards."""
    assert reply.stream is not None
    response = web.StreamResponse(status=reply.status, headers={**reply.headers, **headers})
    await response.prepare(request)
    decoder = SSEDecoder()
    usage: Usage | None = None
    first_byte: float | None = None
    try:
        async for chunk in reply.stream:
            first_byte = first_byte or time.monotonic() - started
            out = bytearray()
            for event in decoder.feed(chunk):
                if b'"usage"' in event.raw and event.data.startswith("{"):
                    payload = _json(event.data)
                    usage = usage_from(payload) or usage
                    if drop_usage_chunk and is_usage_only_chunk(payload):
                        continue
                out += event.raw
            if out:
                await response.write(bytes(out))
    except CUT_ERRORS as exc:
        if isinstance(exc, ConnectionResetError) and request.transport is None:
            raise  # the client went away: nothing to tell it
        log.warning("upstream stream cut: %s", type(exc).__name__)
        await _write_error(response, exc)
        return response, Relayed(
            usage=None, completed=False, first_byte_s=first_byte, error=type(exc).__name__
        )
    if decoder.pending:
        await _write_error(response, None)
        return response, Relayed(None, completed=False, first_byte_s=first_byte, error="cut")
    if decoder.tail:
        await response.write(decoder.tail)
    await response.write_eof()
    return response, Relayed(usage=usage, completed=True, first_byte_s=first_byte)


async def _write_error(response: web.StreamResponse, exc: BaseException | None) -> None:
    reason = "upstream went silent" if isinstance(exc, UpstreamIdle) else "upstream stream cut"
    body = error_body(
        f"{reason} before the answer was complete", "upstream_error", code="stream_interrupted"
    )
    try:
        await response.write(b"data: " + orjson.dumps(body) + b"\n\n")
        await response.write_eof()
    except (ConnectionResetError, aiohttp.ClientConnectionError):
        pass


def _json(data: str) -> object:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
