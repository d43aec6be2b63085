"""Answering a Responses client: a whole answer or a stream, from a Responses upstream (relayed
as it came) or a chat upstream (translated, `proxy.inbound.responses_response` and
`responses_stream`).

    native stream      the upstream's events copied as they arrive, watched for usage and the
                       finished response (`ResponsesUsageWatcher`); with `report_usage =
                       "client"` the terminal event alone is rewritten with the scaled usage
    translated stream  chat chunks → Responses events (`ResponsesStreamTranslator`)
    whole answers      a Response relayed (native) or made from the completion; errors pass
                       through as they came (OpenAI-shaped on every upstream)

A stream that stops short ends with `response.failed` (translated) or an `error` event
(native), never a silent end; once the client has a 200, the proxy's own errors are told in band
(`end_with_error`). Each relay returns the `Relayed` the observers read and the finished
Response, if any, for the response store.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

import orjson
from aiohttp import web

from proxy.adapters.upstream.transport import CUT_ERRORS, UpstreamIdle
from proxy.inbound.responses_response import chat_response_to_response
from proxy.inbound.responses_usage import usage_of_response
from proxy.inbound.usage_report import scaled_chat_usage, scaled_responses_usage
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
from proxy.server.responses_streams import Answer, Events, NativeEvents, TranslatedEvents
from proxy.sse import sse_event
from proxy.types import JSON
from proxy.usage import usage_from_body


class Served(NamedTuple):
    relayed: Relayed
    response: JSON | None
    """The finished Response (completed or incomplete), for the response store."""


async def relay_answer(
    request: web.Request,
    reply: UpstreamReply,
    *,
    headers: Mapping[str, str],
    early: web.StreamResponse | None,
    native: bool,
    answer: Answer,
    started: float,
) -> tuple[web.StreamResponse, Served]:
    """The answer to the client (into `early` when the keep-alive started one); the upstream
    is released whatever happened."""
    try:
        if reply.stream is not None:
            events: Events = NativeEvents(answer.scale) if native else TranslatedEvents(answer)
            return await relay_events(request, reply, events, headers, early, started)
        if early is not None:  # a stream was started: the upstream's answer goes in band
            await end_with_error(early, _error_of(reply.body), code=str(reply.status))
            return early, Served(Relayed(None, completed=False, error="upstream_error"), None)
        return whole_answer(reply, headers=headers, native=native, answer=answer)
    finally:
        await reply.release()


def whole_answer(
    reply: UpstreamReply, *, headers: Mapping[str, str], native: bool, answer: Answer
) -> tuple[web.Response, Served]:
    """A JSON answer: a Response (relayed, or made from a completion); an error as it came."""
    merged = with_ours(reply.headers, headers)
    body = reply.body or b""
    if reply.status != 200:
        return web.Response(status=reply.status, body=body, headers=merged), Served(
            Relayed(None, completed=False), None
        )
    try:
        found = orjson.loads(body)
    except orjson.JSONDecodeError:  # not JSON after all: relayed as it came, nothing read
        return web.Response(status=200, body=body, headers=merged), Served(
            Relayed(None, completed=True), None
        )
    if native:
        usage = usage_of_response(found)
        if answer.scale is not None:
            found = {**found, "usage": scaled_responses_usage(found.get("usage"), answer.scale)}
            body = orjson.dumps(found)
    else:
        usage = usage_from_body(body)
        if answer.scale is not None:
            found = {**found, "usage": scaled_chat_usage(found.get("usage"), answer.scale)}
        found = chat_response_to_response(
            found,
            request=answer.request,
            response_id=answer.response_id,
            created_at=answer.created_at,
        )
        body = orjson.dumps(found)
    merged["Content-Type"] = "application/json"
    response = web.Response(status=200, body=body, headers=merged)
    return response, Served(Relayed(usage, completed=True), found)


async def relay_events(
    request: web.Request,
    reply: UpstreamReply,
    events: Events,
    headers: Mapping[str, str],
    early: web.StreamResponse | None,
    started: float,
) -> tuple[web.StreamResponse, Served]:
    """Copy (or translate) the upstream's stream to the client, event by event."""
    assert reply.stream is not None
    response = early
    if response is None:
        merged = with_ours(reply.headers, headers)
        merged["Content-Type"] = "text/event-stream"
        response = web.StreamResponse(status=200, headers=merged)
    lifecycle = request[SCOPE].services.lifecycle
    task = lifecycle.stream_started()
    try:
        relayed = await _copy_events(request, reply, events, response, started)
    finally:
        lifecycle.stream_ended(task)
    return response, Served(relayed, events.response if relayed.completed else None)


async def _copy_events(
    request: web.Request,
    reply: UpstreamReply,
    events: Events,
    response: web.StreamResponse,
    started: float,
) -> Relayed:
    assert reply.stream is not None
    first: float | None = None
    error = ""
    try:
        await start_client_response(response, request)
        async for chunk in reply.stream:
            first = first or time.monotonic() - started
            out = events.feed(chunk)
            if out:
                await write_to_client(response, out)
            if events.done:
                break
        await write_to_client(response, events.finish(), end=True)
    except ClientGone:
        request[SCOPE].client_left = not events.done
    except asyncio.CancelledError:
        if events.done or request.transport is None:  # the client went away
            _uncancel()
            request[SCOPE].client_left = not events.done
        else:  # shutdown past the drain timeout: tell the client, still there
            await _write_end(response, events.fail("the proxy is shutting down", "server_error"))
            raise
    except CUT_ERRORS as exc:
        error = type(exc).__name__
        reason = "went silent" if isinstance(exc, UpstreamIdle) else "stream was cut"
        message = f"The upstream {reason} before the response was complete."
        await _write_end(response, events.fail(message, "server_error"))
    finished = events.response
    completed = finished is not None and finished.get("status") != "failed"
    usage = events.usage if completed else None
    return Relayed(usage, completed=completed, first_byte_s=first, error=error)


async def end_with_error(
    response: web.StreamResponse, body: Mapping[str, Any], *, code: str = "server_error"
) -> None:
    """An `error` event for an OpenAI-shaped error `body`, then the end of the stream."""
    error = body.get("error") if isinstance(body.get("error"), dict) else {}
    assert isinstance(error, dict)
    event = {
        "type": "error",
        "code": str(error.get("code") or code),
        "message": str(error.get("message") or "The request failed."),
        "param": error.get("param"),
        "sequence_number": 0,
    }
    await _write_end(response, sse_event("error", event))


def _error_of(raw: bytes | None) -> JSON:
    try:
        found = orjson.loads(raw or b"")
    except orjson.JSONDecodeError:
        found = None
    return found if isinstance(found, dict) else {}


async def _write_end(response: web.StreamResponse, data: bytes) -> None:
    """`data` then the end, bounded and silent if the client is gone."""
    with contextlib.suppress(*CLIENT_WRITE_ERRORS, TimeoutError):
        async with asyncio.timeout(1.0):
            await response.write(data)
            await response.write_eof()


def _uncancel() -> None:
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()
