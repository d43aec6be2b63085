"""A fake Anthropic Messages API: a real aiohttp app serving `POST /v1/messages`, JSON and SSE.

It checks each request the way the API does (`tests.fakes.anthropic_rules`) and answers with the
API's own error texts; a wrong `x-api-key` gets 401 `authentication_error`.
Every request is recorded (`received`); answers are scripted (`script(...)`), then come from
`respond` (a function of the request body, to play a model that reacts to a tool result), and are
rendered as a `message` object or as the event stream, depending on the request's `stream`.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.anthropic_rules import request_problem

JSON = dict[str, Any]


@dataclass(frozen=True)
class Reply:
    """A scripted answer. `error_after` blocks in, a stream ends with an `error` event;
    `stall_s` is a silent pause (after the first block) to exercise idle timeouts, `delay_s` one
    before the response headers (first-byte timeouts)."""

    content: tuple[JSON, ...] = ({"type": "text", "text": "Hello!"},)
    stop_reason: str = "end_turn"
    usage: JSON = field(default_factory=lambda: {"input_tokens": 12, "output_tokens": 5})
    error_after: int | None = None
    stall_s: float = 0.0
    delay_s: float = 0.0
    end_delay_s: float = 0.0
    """Stream: the end of the body comes this long after `message_stop`."""
    miss_reason: JSON | None = None
    """Echoed as `diagnostics.cache_miss_reason` when the request asked for diagnostics (a
    request that asked gets `diagnostics: null` without one, as the API answers)."""


@dataclass(frozen=True)
class ErrorReply:
    status: int
    error_type: str
    message: str
    retry_after: str | None = None


def text(words: str, **kw: Any) -> Reply:
    return Reply(content=({"type": "text", "text": words},), **kw)


def tool_use(*calls: tuple[str, str, JSON], lead: str = "", **kw: Any) -> Reply:
    """A tool-use answer; each call is (id, name, input)."""
    blocks = [{"type": "text", "text": lead}] if lead else []
    blocks += [{"type": "tool_use", "id": i, "name": n, "input": inp} for i, n, inp in calls]
    return Reply(content=tuple(blocks), stop_reason="tool_use", **kw)


def overloaded() -> ErrorReply:
    return ErrorReply(529, "overloaded_error", "Overloaded")


def rate_limited(retry_after: str = "7") -> ErrorReply:
    message = (
        "This request would exceed the rate limit for your organization of 50 requests per minute."
    )
    return ErrorReply(429, "rate_limit_error", message, retry_after)


@dataclass(frozen=True)
class Received:
    body: JSON
    headers: dict[str, str]


class FakeAnthropic:
    """The fake API. Build the app with `app()`; serve it with `aiohttp_server`."""

    def __init__(self, *, api_key: str = "sk-ant-test") -> None:
        self.api_key = api_key
        self.received: list[Received] = []
        self._replies: deque[Reply | ErrorReply] = deque()
        self.respond: Callable[[JSON], Reply | ErrorReply] | None = None
        self._ids = 0

    def script(self, *replies: Reply | ErrorReply) -> None:
        self._replies.extend(replies)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/messages", self._handle)
        return app

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            body = json.loads(raw)
        except ValueError:
            return api_error(400, "invalid_request_error", "Invalid JSON in request body")
        self.received.append(Received(body, headers))
        if headers.get("x-api-key") != self.api_key:
            return api_error(401, "authentication_error", "invalid x-api-key")
        if "anthropic-version" not in headers:
            return api_error(400, "invalid_request_error", "anthropic-version: header is required")
        problem = request_problem(body)
        if problem:
            return api_error(400, "invalid_request_error", problem)
        if self._replies:
            reply = self._replies.popleft()
        else:
            reply = self.respond(body) if self.respond is not None else Reply()
        if isinstance(reply, ErrorReply):
            extra = {"retry-after": reply.retry_after} if reply.retry_after else {}
            return api_error(reply.status, reply.error_type, reply.message, extra)
        await asyncio.sleep(reply.delay_s)
        self._ids += 1
        message = _message(f"msg_fake{self._ids:04d}", body, reply)
        if not body.get("stream"):
            return web.json_response(message, headers={"request-id": "req_fake"})
        return await _stream(request, message, reply)


def api_error(
    status: int, kind: str, message: str, headers: dict[str, str] | None = None
) -> web.Response:
    payload = {
        "type": "error",
        "error": {"type": kind, "message": message},
        "request_id": "req_fake",
    }
    return web.json_response(payload, status=status, headers=headers)


def _message(msg_id: str, body: JSON, reply: Reply) -> JSON:
    out: JSON = {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": body.get("model"),
        "content": list(reply.content),
        "stop_reason": reply.stop_reason,
        "stop_sequence": None,
        "usage": reply.usage,
    }
    if "diagnostics" in body:
        reason = reply.miss_reason
        out["diagnostics"] = {"cache_miss_reason": reason} if reason is not None else None
    return out


async def _stream(request: web.Request, message: JSON, reply: Reply) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={"content-type": "text/event-stream", "request-id": "req_fake"}
    )
    await response.prepare(request)
    for name, data in stream_events(message, reply):
        if name == "stall":
            await asyncio.sleep(reply.stall_s)
            continue
        await response.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
    await asyncio.sleep(reply.end_delay_s)
    await response.write_eof()
    return response


def stream_events(message: JSON, reply: Reply) -> Iterator[tuple[str, JSON]]:
    """The event stream of `message`, small deltas as the API sends them."""
    start_usage = {**reply.usage, "output_tokens": 1}
    yield (
        "message_start",
        {
            "type": "message_start",
            "message": {**message, "content": [], "stop_reason": None, "usage": start_usage},
        },
    )
    yield "ping", {"type": "ping"}
    for index, block in enumerate(message["content"]):
        if reply.error_after == index:
            yield (
                "error",
                {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            )
            return
        yield from _block_events(index, block)
        if index == 0 and reply.stall_s:
            yield "stall", {}
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": delta,
            "usage": {"output_tokens": reply.usage["output_tokens"]},
        },
    )
    yield "message_stop", {"type": "message_stop"}


def _block_events(index: int, block: JSON) -> Iterator[tuple[str, JSON]]:
    if block["type"] == "tool_use":
        start, kind, key, whole = (
            {**block, "input": {}},
            "input_json_delta",
            "partial_json",
            json.dumps(block["input"]),
        )
    elif block["type"] == "thinking":
        start, kind, key, whole = (
            {**block, "thinking": ""},
            "thinking_delta",
            "thinking",
            block["thinking"],
        )
    else:
        start, kind, key, whole = {**block, "text": ""}, "text_delta", "text", block["text"]
    yield (
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": start},
    )
    for i in range(0, len(whole), 7):
        delta = {"type": kind, key: whole[i : i + 7]}
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
    yield "content_block_stop", {"type": "content_block_stop", "index": index}
