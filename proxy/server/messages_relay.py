"""Relaying an upstream's answer to a Messages client (`proxy.server.messages`).

    Anthropic upstream, JSON   the body as it came (usage read; with `scale`, the usage object
                               rescaled for `report_usage = "client"`); errors as they came
    Anthropic upstream, stream whole events as they came (`proxy.inbound.messages_events`):
                               usage read from `message_start` / `message_delta`, complete at
                               `message_stop`
    OpenAI upstream, JSON      translated (`chat_response_to_messages`); an error translated
                               with its status (`messages_error_from_chat`)
    OpenAI upstream, stream    translated event by event (`MessagesStreamTranslator`)

A stream the upstream cuts, leaves idle or ends before its end ends with the API's `error` event
(never a silent clean end), as does one the keep-alive started when the upstream then answers
with an error. A client that leaves after the whole answer still counts as complete (its usage is
recorded); one that leaves before is a 499, recorded without usage.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping
from types import MappingProxyType
from typing import Protocol

import orjson
from aiohttp import web

from proxy.adapters.upstream.transport import CUT_ERRORS, UpstreamIdle
from proxy.inbound.client_usage import rescaled_event, with_client_input
from proxy.inbound.messages_errors import messages_error, messages_error_from_chat
from proxy.inbound.messages_events import PassedEvents
from proxy.inbound.messages_response import chat_response_to_messages
from proxy.inbound.messages_stream import MessagesStreamTranslator
from proxy.inbound.messages_usage import usage_of_message
from proxy.ports import UpstreamReply
from proxy.server.appkeys import SCOPE
from proxy.server.relay import (
    CLIENT_WRITE_ERRORS,
    ClientGone,
    Relayed,
    start_client_response,
    with_ours,
    write_to_client,
)
from proxy.sse import SSEDecoder, sse_event
from proxy.usage import Usage, usage_from

AFTER_STOP_S = 1.0
"""How long the upstream's end of body is awaited after the end, to reuse its connection."""
JSON_HEADERS = MappingProxyType({"Content-Type": "application/json"})


class Events(Protocol):
    """What turns an upstream's stream into the client's events."""

    @property
    def complete(self) -> bool:
        """The whole answer was relayed (its end, `message_stop`)."""
        ...

    @property
    def failed(self) -> bool:
        """An error event ended the stream."""
        ...

    @property
    def usage(self) -> Usage | None: ...

    def feed(self, chunk: bytes) -> bytes: ...

    def end(self) -> bytes:
        """At the upstream's end of body: the closing events, or the error of a cut answer."""
        ...

    def fail(self, message: str, error_type: str = "api_error") -> bytes: ...


class Passed:
    """An Anthropic upstream's events, passed on (`PassedEvents`)."""

    def __init__(self, scale: float | None) -> None:
        self.events = PassedEvents(scale=scale)

    @property
    def complete(self) -> bool:
        return self.events.complete

    @property
    def failed(self) -> bool:
        return self.events.failed

    @property
    def usage(self) -> Usage | None:
        return self.events.usage

    def feed(self, chunk: bytes) -> bytes:
        return self.events.feed(chunk)

    def end(self) -> bytes:
        reason = "cut" if self.events.pending else "ended"
        return self.fail(f"upstream stream {reason} before message_stop")

    def fail(self, message: str, error_type: str = "api_error") -> bytes:
        return self.events.fail(message, error_type)


class Translated:
    """An OpenAI upstream's chunks, translated (`MessagesStreamTranslator`); with `scale`, the
    translated usage events rescaled."""

    def __init__(self, model: str, scale: float | None) -> None:
        self.translator = MessagesStreamTranslator(model=model)
        self._scale = scale
        self._decoder = SSEDecoder() if scale is not None else None

    @property
    def complete(self) -> bool:
        return self.translator.done and not self.translator.failed

    @property
    def failed(self) -> bool:
        return self.translator.failed

    @property
    def usage(self) -> Usage | None:
        return self.translator.usage

    def feed(self, chunk: bytes) -> bytes:
        return self._rescaled(self.translator.feed(chunk))

    def end(self) -> bytes:
        return self._rescaled(self.translator.finish())

    def fail(self, message: str, error_type: str = "api_error") -> bytes:
        return self.translator.fail(message, error_type)

    def _rescaled(self, out: bytes) -> bytes:
        if self._decoder is None or self._scale is None or not out:
            return out
        return b"".join(rescaled_event(e, self._scale) for e in self._decoder.feed(out))


async def relay_messages(
    request: web.Request,
    reply: UpstreamReply,
    *,
    headers: Mapping[str, str],
    events: Events,
    translated_model: str | None,
    scale: float | None,
    started: float,
    response: web.StreamResponse | None = None,
) -> tuple[web.StreamResponse, Relayed]:
    """Relay `reply` (see the module docstring), into `response` when the keep-alive started
    one; the upstream is released afterwards whatever happened. `translated_model`: the model
    a translated JSON answer names (None: the upstream speaks the Messages API)."""
    try:
        if reply.stream is not None:
            if response is None:
                response = web.StreamResponse(status=200, headers=with_ours(reply.headers, headers))
            return response, await _relay_stream(request, response, events, reply.stream, started)
        status, body, usage = _answer(reply, translated_model, scale)
        if response is not None:  # a stream was started: the answer can only be an error
            await end_with_error(response, status, _message_of(body))
            return response, Relayed(usage=None, completed=False, error="upstream_error")
        out = with_ours(reply.headers, {**JSON_HEADERS, **headers})
        answer = web.Response(status=status, body=body, headers=out)
        return answer, Relayed(usage=usage, completed=status == 200)
    finally:
        await reply.release()


def _answer(
    reply: UpstreamReply, translated_model: str | None, scale: float | None
) -> tuple[int, bytes, Usage | None]:
    """(status, body, usage) of a whole answer for the client."""
    raw = reply.body or b""
    if translated_model is not None and reply.status != 200:
        status, error = messages_error_from_chat(reply.status, raw)
        return status, orjson.dumps(error), None
    try:
        parsed = orjson.loads(raw) if reply.status == 200 else None
    except orjson.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict):
        return reply.status, raw, None
    if translated_model is not None:
        usage = usage_from(parsed)
        message = chat_response_to_messages(parsed, model=translated_model)
    else:
        usage, message = usage_of_message(parsed), parsed
    if scale is not None and isinstance(message.get("usage"), dict):
        message = {**message, "usage": with_client_input(message["usage"], scale)}
    elif translated_model is None:
        return reply.status, raw, usage  # as it came, byte for byte
    return reply.status, orjson.dumps(message), usage


def _message_of(body: bytes) -> str:
    try:
        found = orjson.loads(body)
        return str(found["error"]["message"])
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return body[:500].decode("utf-8", errors="replace")


async def _relay_stream(
    request: web.Request,
    response: web.StreamResponse,
    events: Events,
    stream: AsyncIterator[bytes],
    started: float,
) -> Relayed:
    lifecycle = request[SCOPE].services.lifecycle
    task = lifecycle.stream_started()
    first_byte: float | None = None
    try:
        await start_client_response(response, request)
        async for chunk in stream:
            first_byte = first_byte or time.monotonic() - started
            out = events.feed(chunk)
            if out:
                await write_to_client(response, out)
            if events.complete or events.failed:
                break
        else:
            await write_to_client(response, events.end())
        await write_to_client(response, end=True)
        if events.complete:
            await _drain(stream)
            return Relayed(events.usage, completed=True, first_byte_s=first_byte)
        return Relayed(None, completed=False, first_byte_s=first_byte, error="upstream_error")
    except ClientGone:
        return _client_left(request, events, first_byte)
    except asyncio.CancelledError:
        if events.complete or request.transport is None:  # a client gone (or done with us)
            _uncancel()
            return _client_left(request, events, first_byte)
        await _write_last(response, events.fail("the proxy is shutting down"))
        raise
    except CUT_ERRORS as exc:  # only reads from the upstream raise these: writes are ClientGone
        silent = isinstance(exc, UpstreamIdle)
        reason = "upstream went silent" if silent else "upstream stream cut"
        await _write_last(response, events.fail(f"{reason} before the answer was complete"))
        return Relayed(None, completed=False, first_byte_s=first_byte, error=type(exc).__name__)
    finally:
        lifecycle.stream_ended(task)


def _client_left(request: web.Request, events: Events, first_byte: float | None) -> Relayed:
    if events.complete:
        return Relayed(events.usage, completed=True, first_byte_s=first_byte)
    request[SCOPE].client_left = True
    return Relayed(None, completed=False, first_byte_s=first_byte)


async def _drain(stream: AsyncIterator[bytes]) -> None:
    """Read what the upstream still sends after the end, briefly, so its connection is reused."""
    with contextlib.suppress(*CUT_ERRORS):
        async with asyncio.timeout(AFTER_STOP_S):
            async for _ in stream:
                pass


def _uncancel() -> None:
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()


async def _write_last(response: web.StreamResponse, data: bytes) -> None:
    """The last bytes of a stream, then its end; bounded, and silent if the client is gone."""
    with contextlib.suppress(*CLIENT_WRITE_ERRORS, TimeoutError):
        async with asyncio.timeout(1.0):
            await response.write(data)
            await response.write_eof()


async def end_with_error(response: web.StreamResponse, status: int, message: str) -> None:
    """The API's `error` event (its type following `status`), ending a started stream."""
    _, body = messages_error(status, message)
    await _write_last(response, sse_event("error", body))
