"""A fake OpenAI-compatible upstream: a real aiohttp server speaking JSON and SSE.

It records what it received and answers from a script of `Reply` objects, then from `respond`
(a function of the request body, to play a model that reacts: calls a tool, echoes its result),
then with `default`, on `/v1/chat/completions` and on `/v1/responses` (the Responses API: a
Response, or its events; `tests.fakes.responses_upstream`; `respond_responses` plays the model
there). Chat tool calls are streamed as the
API streams them: a first delta with the call's index, id and name, then argument fragments
under the same index.
A request whose last message is ctxproxy's summary instruction is a summarizer call: it is
answered with `summary_text` (or with a `summary_status` error, to play a failing summarizer)
and recorded in `summary_requests` as well — on either route. With `serves_chat = False` it
plays a server that speaks only the Responses API (`/v1/chat/completions` answers 404).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from tests.fakes.responses_upstream import responses_answer


@dataclass
class Reply:
    status: int = 200
    content: str = "Hello from the fake upstream."
    tool_calls: list[dict[str, Any]] | None = None
    lead: str | None = None
    """With `tool_calls`: the content said before them (None: no content)."""
    prompt_tokens: int | None = None
    """Reported `usage.prompt_tokens`; None = chars of the request messages / 4."""
    cached_tokens: int = 0
    cache_write_tokens: int | None = None
    """Reported as `prompt_tokens_details.cache_write_tokens` when set (as OpenAI-compatible
    providers that charge for writes report them)."""
    completion_tokens: int = 7
    headers: dict[str, str] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    first_byte_delay_s: float = 0.0
    chunk_delay_s: float = 0.0
    chunks: int = 3
    cut_after: int | None = None
    """Stream: drop the connection after this many content chunks (mid-event if `half`)."""
    half_event: bool = False
    usage_choices_null: bool = False
    usage_null: bool = False
    """Stream with usage asked for: `"usage": null` in every chunk before the usage chunk (as
    OpenAI sends it)."""
    end_delay_s: float = 0.0
    """Stream: the end of the body comes this long after `data: [DONE]`."""
    reasoning: str | None = None
    """`/v1/responses`: a reasoning item (this `encrypted_content`) before the output."""


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float
    raw: bytes = b""
    """The body's bytes as they arrived (a chat request's)."""


class FakeOpenAI:
    def __init__(self) -> None:
        self.received: list[Received] = []
        self.summary_requests: list[Received] = []
        self.script: deque[Reply] = deque()
        self.respond: Callable[[dict[str, Any]], Reply] | None = None
        self.respond_responses: Callable[[dict[str, Any]], Reply] | None = None
        """`respond` on `/v1/responses`: a function of the Responses body."""
        self.default = Reply()
        self.summary_text = (
            "<analysis>checked</analysis><summary>SUMMARY OF EARLIER TURNS</summary>"
        )
        self.summary_status = 200
        self.serves_chat = True
        self.cancelled: list[float] = []
        self.served: dict[str, dict[str, Any]] = {}
        """Responses this fake served (`/v1/responses`), by id, for `previous_response_id`."""

    @property
    def chat(self) -> list[Received]:
        """Chat requests that were not summarizer calls."""
        return [r for r in self.received if r not in self.summary_requests]

    def app(self) -> web.Application:
        app = web.Application(client_max_size=1 << 30)
        app.router.add_post("/v1/chat/completions", self.chat_completions)
        app.router.add_post("/v1/responses", self.responses)
        app.router.add_get("/v1/models", self.models)
        app.router.add_post("/v1/embeddings", self.embeddings)
        return app

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = orjson.loads(raw)
        received = Received(request.path, dict(request.headers), body, time.monotonic(), raw)
        self.received.append(received)
        if not self.serves_chat:
            return web.json_response({"error": {"message": "Not found"}}, status=404)
        if _is_summary_call(body):
            self.summary_requests.append(received)
            if self.summary_status != 200:
                error = {"message": "summarizer down", "type": "server_error", "param": None,
                         "code": None}  # fmt: skip
                return web.json_response({"error": error}, status=self.summary_status)
            return web.json_response(_completion(body, Reply(content=self.summary_text)))
        if self.script:
            reply = self.script.popleft()
        else:
            reply = self.respond(body) if self.respond is not None else self.default
        try:
            await asyncio.sleep(reply.first_byte_delay_s)
            if reply.status != 200:
                error = reply.error or {
                    "message": "scripted error",
                    "type": "server_error",
                    "param": None,
                    "code": None,
                }
                return web.json_response(
                    {"error": error}, status=reply.status, headers=reply.headers
                )
            if body.get("stream"):
                return await self._stream(request, body, reply)
            return web.json_response(_completion(body, reply), headers=reply.headers)
        except asyncio.CancelledError:
            self.cancelled.append(time.monotonic())
            raise

    async def _stream(
        self, request: web.Request, body: dict[str, Any], reply: Reply
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", **reply.headers}
        )
        await response.prepare(request)
        base = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": body.get("model", "fake"),
        }
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        if include_usage and reply.usage_null:
            base["usage"] = None
        text = (reply.lead or "") if reply.tool_calls else reply.content
        pieces = _split(text, reply.chunks)
        for index, piece in enumerate(pieces):
            if reply.cut_after is not None and index >= reply.cut_after:
                if reply.half_event:
                    await response.write(b'data: {"id": "chatcmpl-fake", "cho')
                assert request.transport is not None
                request.transport.close()
                return response
            delta: dict[str, Any] = {"content": piece}
            if index == 0:
                delta["role"] = "assistant"
            chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
            await response.write(b"data: " + orjson.dumps(chunk) + b"\n\n")
            await asyncio.sleep(reply.chunk_delay_s)
        for delta in _call_deltas(reply.tool_calls or []):
            chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
            await response.write(b"data: " + orjson.dumps(chunk) + b"\n\n")
        finish = "tool_calls" if reply.tool_calls else "stop"
        final = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
        await response.write(b"data: " + orjson.dumps(final) + b"\n\n")
        if include_usage:
            usage_chunk = {
                **base,
                "choices": None if reply.usage_choices_null else [],
                "usage": _usage(body, reply),
            }
            await response.write(b"data: " + orjson.dumps(usage_chunk) + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
        await asyncio.sleep(reply.end_delay_s)
        await response.write_eof()
        return response

    async def responses(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = orjson.loads(raw)
        received = Received(request.path, dict(request.headers), body, time.monotonic(), raw)
        self.received.append(received)
        if _is_summary_call({"messages": [_as_message(item) for item in body.get("input") or []]}):
            self.summary_requests.append(received)
            reply = Reply(status=self.summary_status, content=self.summary_text)
        elif self.script:
            reply = self.script.popleft()
        else:
            respond = self.respond_responses
            reply = respond(body) if respond is not None else self.default
        return await responses_answer(request, body, reply, self.served, usage=_usage)

    async def models(self, request: web.Request) -> web.Response:
        self.received.append(Received(request.path, dict(request.headers), {}, time.monotonic()))
        return web.json_response(
            {
                "object": "list",
                "data": [{"id": "fake-model", "object": "model", "created": 1, "owned_by": "fake"}],
            }
        )

    async def embeddings(self, request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        self.received.append(Received(request.path, dict(request.headers), body, time.monotonic()))
        return web.json_response(
            {
                "object": "list",
                "model": body.get("model"),
                "data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2]}],
                "usage": {"prompt_tokens": 2, "total_tokens": 2},
            }
        )


def _is_summary_call(body: dict[str, Any]) -> bool:
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    content = last.get("content")
    return (
        last.get("role") == "user"
        and isinstance(content, str)
        and content.startswith("Summarize the conversation ")
        and "<summary>" in content
    )


def _as_message(item: Any) -> dict[str, Any]:
    """A Responses input item as a chat message, enough for `_is_summary_call`."""
    if not isinstance(item, dict) or item.get("type", "message") != "message":
        return {}
    content = item.get("content")
    if isinstance(content, list):
        content = "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return {"role": item.get("role"), "content": content}


def estimate_prompt_tokens(body: dict[str, Any]) -> int:
    return len(orjson.dumps(body.get("messages", []))) // 4


def _usage(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    prompt = (
        reply.prompt_tokens if reply.prompt_tokens is not None else estimate_prompt_tokens(body)
    )
    details: dict[str, int] = {"cached_tokens": reply.cached_tokens}
    if reply.cache_write_tokens is not None:
        details["cache_write_tokens"] = reply.cache_write_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": prompt + reply.completion_tokens,
        "prompt_tokens_details": details,
    }


def _completion(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    finish = "stop"
    if reply.tool_calls:
        message = {"role": "assistant", "content": reply.lead, "tool_calls": reply.tool_calls}
        finish = "tool_calls"
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1,
        "model": body.get("model", "fake"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": _usage(body, reply),
    }


def _call_deltas(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The `tool_calls` deltas of `calls`: per call its head (index, id, name, empty arguments),
    then its arguments in fragments of at most 8 characters."""
    deltas: list[dict[str, Any]] = []
    for index, call in enumerate(calls):
        function = call["function"]
        head = {"name": function["name"], "arguments": ""}
        deltas.append(
            {
                "tool_calls": [
                    {"index": index, "id": call["id"], "type": "function", "function": head}
                ]
            }
        )
        arguments = function.get("arguments") or ""
        for at in range(0, len(arguments), 8):
            piece = {"arguments": arguments[at : at + 8]}
            deltas.append({"tool_calls": [{"index": index, "function": piece}]})
    return deltas  # fmt: skip


def _split(text: str, parts: int) -> list[str]:
    size = max(1, -(-len(text) // max(parts, 1)))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]
