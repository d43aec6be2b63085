"""What a relay saw (`Relayed`), writing to the client, and a whole JSON answer relayed to it.

A body is forwarded as it came, with the upstream's headers and ours over them; usage is picked
out of a 200 answer. Streams are relayed event by event by `proxy.server.stream_relay`, which
returns the same `Relayed`. Every write to the client goes through `write_to_client`, so that a
client that went away (`ClientGone`) is never taken for an upstream that failed. Once a stream
has started (or the keep-alive sent a 200), an error ends it in band: `end_in_band` writes the
one error event (`proxy.sse.error_event`) and the end.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import NamedTuple

import aiohttp
import orjson
from aiohttp import web
from multidict import CIMultiDict

from proxy.errors import error_body
from proxy.ports import UpstreamReply
from proxy.sse import error_event
from proxy.usage import Usage, usage_from_body

CLIENT_WRITE_ERRORS = (ConnectionError, aiohttp.ClientConnectionError)


class ClientGone(Exception):
    """A write to the client failed: it went away. Never an upstream failure, never a 500."""


async def write_to_client(
    response: web.StreamResponse, data: bytes = b"", *, end: bool = False
) -> None:
    """`data` to the client, then the end of the body if `end`; `ClientGone` if it left."""
    try:
        if data:
            await response.write(data)
        if end:
            await response.write_eof()
    except CLIENT_WRITE_ERRORS as exc:
        raise ClientGone(type(exc).__name__) from exc


async def start_client_response(response: web.StreamResponse, request: web.Request) -> None:
    """Send the status and headers; `ClientGone` if the client already left."""
    try:
        await response.prepare(request)
    except CLIENT_WRITE_ERRORS as exc:
        raise ClientGone(type(exc).__name__) from exc


class Relayed(NamedTuple):
    """What the relay saw: usage (if any), whether the answer completed, time to first byte."""

    usage: Usage | None
    completed: bool
    first_byte_s: float | None = None
    error: str = ""


async def relay_body(
    request: web.Request, reply: UpstreamReply, *, headers: Mapping[str, str]
) -> tuple[web.Response, Relayed]:
    body = reply.body or b""
    response = web.Response(
        status=reply.status, body=body, headers=with_ours(reply.headers, headers)
    )
    usage = usage_from_body(body) if reply.status == 200 else None
    return response, Relayed(usage=usage, completed=reply.status == 200)


def with_ours(upstream: Mapping[str, str], ours: Mapping[str, str]) -> CIMultiDict[str]:
    """The upstream's headers, repeated ones kept (`Set-Cookie`), ours replacing any same name."""
    merged = CIMultiDict(upstream)
    merged.update(ours)
    return merged


async def end_in_band(response: web.StreamResponse, body: Mapping[str, object]) -> None:
    """The in-band error event `body` (OpenAI-shaped), then the end of the stream; bounded, and
    silent if the client is gone (a client that stopped reading cannot hold us here)."""
    with contextlib.suppress(*CLIENT_WRITE_ERRORS, TimeoutError):
        async with asyncio.timeout(1.0):
            await response.write(error_event(body))
            await response.write_eof()


def upstream_error(status: int, raw: bytes | None) -> dict[str, object]:
    """The upstream's own OpenAI-shaped error if it sent one, else a generic one naming the
    status (the client already has a 200)."""
    try:
        found = orjson.loads(raw or b"")
    except orjson.JSONDecodeError:
        found = None
    if isinstance(found, dict) and isinstance(found.get("error"), dict):
        return found
    return error_body(f"The upstream answered {status}.", "upstream_error", code=str(status))
