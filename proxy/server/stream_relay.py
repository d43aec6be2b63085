"""Relay an upstream SSE stream to the client, event by event.

Stream bytes are copied as they arrive; a pure SSE decoder watches them so that only complete
events are forwarded (partial bytes never), usage is picked out, and the usage chunk the proxy
asked for on the client's behalf is dropped. How a stream ends:

    `[DONE]` relayed          complete: the client's body ends at once, and the upstream's end
                              is awaited (up to `AFTER_DONE_S`) only so its connection is reused
    client leaves after       complete as well (the openai SDK closes on `[DONE]`): recorded,
    `[DONE]` or the usage     its usage counted
    chunk
    client leaves before      499, recorded without usage; a failed write to the client is
                              never taken for an upstream cut, nor logged as an error
    upstream error event      relayed as it came, then the end; not complete
    upstream cut or idle, or  an in-band `data: {"error": ...}` event, never a silent clean end
    its body ends (cleanly)   (a chat stream is complete only with `[DONE]`)
    before `[DONE]`
    shutdown                  a stream still running `drain_timeout_s` after shutdown began
                              (`Lifecycle.drain`) is stopped while its client can still be told
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Mapping

import orjson
from aiohttp import web

from proxy.adapters.upstream.transport import CUT_ERRORS, UpstreamIdle
from proxy.errors import error_body
from proxy.ports import UpstreamReply
from proxy.server.appkeys import SCOPE
from proxy.server.relay import (
    ClientGone,
    Relayed,
    end_in_band,
    start_client_response,
    with_ours,
    write_to_client,
)
from proxy.sse import SSEDecoder, SSEvent, find_set_key
from proxy.usage import Usage, is_usage_only_chunk, usage_from

log = logging.getLogger("proxy.server.relay")  # the name it logged under before the split

AFTER_DONE_S = 1.0
"""How long the upstream's end of body is awaited after `[DONE]`, to reuse its connection."""
MARKERS = (b'"error"', b"[DONE]")
"""Bytes that send an event through the decoder rather than the plain-copy path; so does a
`"usage"` whose value is not `null` (`find_usage`)."""
USAGE = b'"usage"'
"""A `"usage"` key whose value is null (OpenAI sends one in every chunk but the last when
`stream_options.include_usage` is on) leaves its event copied without decoding."""


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
    copier = Copier(response, drop_usage_chunk=drop_usage_chunk, started=started)
    lifecycle = request[SCOPE].services.lifecycle
    task = lifecycle.stream_started()
    try:
        return response, await _relay_events(request, copier, reply.stream)
    finally:
        lifecycle.stream_ended(task)


async def _relay_events(
    request: web.Request, copier: Copier, stream: AsyncIterator[bytes]
) -> Relayed:
    response = copier.response
    try:
        await start_client_response(response, request)
        await copier.copy(stream)
        if copier.done:
            await write_to_client(response, end=True)
            await _drain(stream)
            return copier.relayed(completed=True)
        if copier.failed and not copier.decoder.pending:  # the upstream told the client
            await write_to_client(response, copier.decoder.tail, end=True)
            return copier.relayed(completed=False, error="upstream_error")
    except ClientGone:
        return _client_left(request, copier)
    except asyncio.CancelledError:
        if copier.complete or request.transport is None:  # a client gone (or done with us)
            _uncancel()
            return _client_left(request, copier)
        # Shutdown past the drain timeout: tell the client, which is still there.
        await _write_error(response, None, reason="the proxy is shutting down")
        raise
    except CUT_ERRORS as exc:  # only reads from the upstream raise these: writes are ClientGone
        log.warning("upstream stream cut: %s", type(exc).__name__)
        await _write_error(response, exc)
        return copier.relayed(completed=False, error=type(exc).__name__)
    cut = bool(copier.decoder.pending)  # in the middle of an event, or between two
    reason = "upstream stream cut" if cut else "upstream stream ended"
    log.warning("%s before [DONE]", reason)
    await _write_error(response, None, reason=reason)
    return copier.relayed(completed=False, error="cut" if cut else "ended")


def _client_left(request: web.Request, copier: Copier) -> Relayed:
    """What the relay saw of a client that went away: complete if it had the whole answer,
    else a 499 recorded without usage."""
    if copier.complete:
        return copier.relayed(completed=True)
    request[SCOPE].client_left = True
    return copier.relayed(completed=False)


class Copier:
    """Forwards whole events as they complete, picking out usage on the way; stops once it has
    relayed `[DONE]`."""

    def __init__(
        self, response: web.StreamResponse, *, drop_usage_chunk: bool, started: float
    ) -> None:
        self.decoder = SSEDecoder()
        self.response = response
        self.done = False
        """`[DONE]` was relayed."""
        self.usage_final = False
        """The usage-only chunk that ends an answer was seen (relayed, or dropped as ours)."""
        self.failed = False
        """An error event of the upstream's own was relayed."""
        self._drop_usage_chunk = drop_usage_chunk
        self._started = started
        self._usage: Usage | None = None
        self._first_byte: float | None = None

    @property
    def complete(self) -> bool:
        """The client has had the whole answer."""
        return self.done or self.usage_final

    async def copy(self, stream: AsyncIterator[bytes]) -> None:
        async for chunk in stream:
            self._first_byte = self._first_byte or time.monotonic() - self._started
            out = self.feed(chunk)
            if out:
                await write_to_client(self.response, out)
            if self.done:
                return

    def feed(self, chunk: bytes) -> bytes:
        """The bytes to relay for one read of the upstream (whole events only; none after
        `[DONE]`): the events it need not read as they came, the others through the decoder."""
        start, end = self.plain_span(chunk)
        if start == 0 and end == len(chunk):  # the usual read: whole events, nothing to see
            return chunk
        out = bytearray()
        self._take(chunk[:start], out)
        if not self.done:
            out += chunk[start:end]
            self._take(chunk[end:], out)
        return bytes(out)

    def _take(self, data: bytes, out: bytearray) -> None:
        """Feeds `data` to the decoder and adds the events to relay to `out` (none after
        `[DONE]`)."""
        if not data:
            return
        for event in self.decoder.feed(data):
            if self._keeps(event):
                out += event.raw
            if self.done:
                return

    def _keeps(self, event: SSEvent) -> bool:
        """Notes what `event` tells (usage, an error, the end); False for the usage chunk to
        drop."""
        data = event.data
        if data.startswith("[DONE]"):
            self.done = True
            return True
        raw = event.raw
        if not data.startswith("{") or (b'"error"' not in raw and find_usage(raw) < 0):
            return True
        payload = _json(data)
        if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
            self.failed = True
            return True
        self._usage = usage_from(payload) or self._usage
        if not is_usage_only_chunk(payload):
            return True
        self.usage_final = True
        return not self._drop_usage_chunk

    def plain_span(self, chunk: bytes) -> tuple[int, int]:
        """`chunk[start:end]`: whole events that go out as they came, undecoded (`plain_end`);
        before them, the rest of the event the decoder holds (with `\n` line ends, the first
        blank line ends it), for the decoder, and after them the rest of the chunk."""
        if b"\r" in chunk:
            return 0, 0
        start = 0
        if not self.decoder.idle:
            start = chunk.find(b"\n\n") + 2
            if start < 2:
                return len(chunk), len(chunk)
        return start, plain_end(chunk, start)

    def relayed(self, *, completed: bool, error: str = "") -> Relayed:
        """Usage counts only for an answer that completed."""
        usage = self._usage if completed else None
        return Relayed(usage, completed=completed, first_byte_s=self._first_byte, error=error)


def plain_end(chunk: bytes, start: int = 0) -> int:
    """Where the whole events from `start` (an event's start) that the relay need not read end
    (no error, `[DONE]` or usage other than null; with `\n` line ends, an event ends at each
    blank line): `start` when there are none."""
    stop = len(chunk)
    for marker in MARKERS:
        at = chunk.find(marker, start, stop)
        if at >= 0:
            stop = at
    at = find_usage(chunk, start, stop)
    end = chunk.rfind(b"\n\n", start, stop if at < 0 else at)
    return end + 2 if end >= 0 else start


def find_usage(data: bytes, start: int = 0, stop: int | None = None) -> int:
    """Where the first `"usage"` in `data[start:stop]` whose value is not `null` starts, or -1
    (`proxy.sse.find_set_key`: a usage object is never missed)."""
    return find_set_key(data, USAGE, start, stop)


async def _drain(stream: AsyncIterator[bytes]) -> None:
    """Reads what the upstream still sends after `[DONE]` (its end of body, normally), for at
    most `AFTER_DONE_S`; a failure here changes nothing for the client."""
    with contextlib.suppress(*CUT_ERRORS):
        async with asyncio.timeout(AFTER_DONE_S):
            async for _ in stream:
                pass


def _uncancel() -> None:
    """Withdraw the cancellation being handled (aiohttp cancels a handler whose client left),
    so the handler can finish: record the request and count it."""
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()


async def _write_error(
    response: web.StreamResponse, exc: BaseException | None, *, reason: str = ""
) -> None:
    """The in-band error event of a stream that did not complete, then the end."""
    if not reason:
        reason = "upstream went silent" if isinstance(exc, UpstreamIdle) else "upstream stream cut"
    body = error_body(
        f"{reason} before the answer was complete", "upstream_error", code="stream_interrupted"
    )
    await end_in_band(response, body)


def _json(data: str) -> object:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
