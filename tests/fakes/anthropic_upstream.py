"""A fake Anthropic Messages API: a real aiohttp app serving `POST /v1/messages`, JSON and SSE,
`POST /v1/messages/count_tokens` and `GET /v1/models`.

It checks each request the way the API does (`tests.fakes.anthropic_rules`; with the beta types
when the request carries `anthropic-beta` or `?beta=true`) and answers with the API's own error
texts; a wrong key (`x-api-key`, or an OAuth token as `Authorization: Bearer`) gets 401
`authentication_error`. Counting answers `input_tokens` = characters of the JSON `system`,
`messages` and `tools` / 4; with `measure_usage` answers report that count as their input tokens
too. With `summary_text` set, a request ending in ctxproxy's summary instruction is a summarizer
call, answered with that text and recorded in `summary_requests` as well. It refuses, as the API
does, tool blocks in a request that defines no tools (`tools_required`, on unless a test turns
it off).
`respond` (a function of the request body) answers when the script is empty, to play a model that
reacts to a tool result.
Every request is recorded (`received`); answers are scripted (`script(...)`) and rendered as a
`message` object or as the event stream, depending on the request's `stream`.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
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
    cut_after: int | None = None
    """Stream: the connection is dropped after this many blocks, half an event written."""
    delta_usage: JSON | None = None
    """Stream: `message_delta`'s usage (default: `output_tokens` only; the API now sends the
    cumulative input counters there too)."""


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
    path: str = "/v1/messages"
    query: str = ""
    raw: bytes = b""


class FakeAnthropic:
    """The fake API. Build the app with `app()`; serve it with `aiohttp_server`."""

    def __init__(self, *, api_key: str = "sk-ant-test") -> None:
        self.api_key = api_key
        self.received: list[Received] = []
        self.summary_requests: list[Received] = []
        self.summary_text: str | None = None
        self.measure_usage = False
        self.tools_required = True
        self._replies: deque[Reply | ErrorReply] = deque()
        self.respond: Callable[[JSON], Reply | ErrorReply] | None = None
        self._ids = 0

    def script(self, *replies: Reply | ErrorReply) -> None:
        self._replies.extend(replies)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/messages", self._handle)
        app.router.add_post("/v1/messages/count_tokens", self._count)
        app.router.add_get("/v1/models", self._models)
        return app

    async def _models(self, request: web.Request) -> web.Response:
        headers = {k.lower(): v for k, v in request.headers.items()}
        self.received.append(Received({}, headers, request.path))
        if headers.get("x-api-key") != self.api_key:
            return api_error(401, "authentication_error", "invalid x-api-key")
        model = {"type": "model", "id": "claude-sonnet-4-5", "display_name": "Claude Sonnet 4.5",
                 "created_at": "2025-09-29T00:00:00Z"}  # fmt: skip
        return web.json_response({"data": [model], "has_more": False, "first_id": model["id"],
                                  "last_id": model["id"]})  # fmt: skip

    async def _received(self, request: web.Request) -> tuple[JSON, bool] | web.Response:
        """The request's body and whether it is a beta request, recorded; or the API's error."""
        raw = await request.read()
        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            body = json.loads(raw)
        except ValueError:
            return api_error(400, "invalid_request_error", "Invalid JSON in request body")
        query = request.rel_url.raw_query_string
        self.received.append(Received(body, headers, request.path, query, raw))
        bearer = headers.get("authorization", "").removeprefix("Bearer ")
        if self.api_key not in (headers.get("x-api-key"), bearer):
            return api_error(401, "authentication_error", "invalid x-api-key")
        if "anthropic-version" not in headers:
            return api_error(400, "invalid_request_error", "anthropic-version: header is required")
        return body, "anthropic-beta" in headers or request.query.get("beta") == "true"

    async def _count(self, request: web.Request) -> web.Response:
        got = await self._received(request)
        if isinstance(got, web.Response):
            return got
        body, beta = got
        problem = request_problem(
            {**body, "max_tokens": 1}, beta=beta, tools_required=self.tools_required
        )
        if problem:
            return api_error(400, "invalid_request_error", problem)
        return web.json_response({"input_tokens": input_tokens(body)})

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        got = await self._received(request)
        if isinstance(got, web.Response):
            return got
        body, beta = got
        problem = request_problem(body, beta=beta, tools_required=self.tools_required)
        if problem:
            return api_error(400, "invalid_request_error", problem)
        reply: Reply | ErrorReply
        if self.summary_text is not None and is_summary_call(body):
            self.summary_requests.append(self.received[-1])
            reply = text(self.summary_text)
        elif self._replies:
            reply = self._replies.popleft()
        else:
            reply = self.respond(body) if self.respond is not None else Reply()
        if self.measure_usage and isinstance(reply, Reply):
            reply = replace(reply, usage={"input_tokens": input_tokens(body), "output_tokens": 5})
        if isinstance(reply, ErrorReply):
            extra = {"retry-after": reply.retry_after} if reply.retry_after else {}
            return api_error(reply.status, reply.error_type, reply.message, extra)
        await asyncio.sleep(reply.delay_s)
        self._ids += 1
        message = _message(f"msg_fake{self._ids:04d}", body, reply)
        if not body.get("stream"):
            return web.json_response(message, headers={"request-id": "req_fake"})
        return await _stream(request, message, reply)


def input_tokens(body: JSON) -> int:
    """Characters of the JSON `system`, `messages` and `tools` of a request / 4."""
    counted = {key: body.get(key) for key in ("system", "messages", "tools")}
    return len(json.dumps(counted)) // 4


def is_summary_call(body: JSON) -> bool:
    """A request whose last user message ends with ctxproxy's summary instruction."""
    messages = body.get("messages") or [{}]
    content = messages[-1].get("content")
    texts = [content] if isinstance(content, str) else [
        b.get("text", "") for b in content or [] if isinstance(b, dict)]  # fmt: skip
    last = texts[-1] if texts else ""
    return last.startswith("Summarize the conversation ") and "<summary>" in last


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
        if name == "cut":
            await response.write(b"event: content_block_delta\ndata: {")
            assert request.transport is not None
            request.transport.close()
            return response
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
        if reply.cut_after == index + 1:
            yield "cut", {}
            return
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": delta,
            "usage": reply.delta_usage or {"output_tokens": reply.usage["output_tokens"]},
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
            {**block, "thinking": "", "signature": ""},
            "thinking_delta",
            "thinking",
            block["thinking"],
        )
    elif block["type"] != "text":  # redacted thinking, server-tool blocks: whole at the start
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": block},
        )
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
        return
    else:
        start, kind, key, whole = {**block, "text": ""}, "text_delta", "text", block["text"]
    yield (
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": start},
    )
    for i in range(0, len(whole), 7):
        delta = {"type": kind, key: whole[i : i + 7]}
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
    if block["type"] == "thinking":
        delta = {"type": "signature_delta", "signature": block.get("signature", "")}
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
    yield "content_block_stop", {"type": "content_block_stop", "index": index}
