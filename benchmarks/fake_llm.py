"""An in-process fake OpenAI-compatible upstream for the replays (sections 3 and 4).

`prompt_tokens` = characters of the JSON-serialised `messages` (and `tools`) it received / 4.
A request whose last user message asks for a `<summary>` is a summarizer call and gets a short
summary. Every request is checked for validity (`benchmarks.validity`) and recorded as a `Seen`.
An optional `cache` model (`benchmarks.cachesim`) decides how many prompt tokens were cached.
`POST /v1/messages` does the same in the Anthropic Messages API's shapes (prompt = its `system`,
`messages` and `tools`; usage split into input and cache-read tokens), for the Messages route's
replays (`benchmarks.messages_markers`); its requests are not checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson
from aiohttp import web

from benchmarks.validity import problem

SUMMARY = ("<analysis>Reviewed the turns.</analysis><summary>The user asked the agent to work "
           "on the repository; files were read, commands run, findings noted. Open tasks remain "
           "as in the latest messages.</summary>")


class CacheModel(Protocol):
    def serve(self, body: dict[str, Any]) -> int:
        """Cached prompt tokens for this request; updates the model's cache."""
        ...


@dataclass
class Seen:
    prompt_tokens: int
    cached_tokens: int
    summary: bool
    problem: str


@dataclass
class FakeLLM:
    cache: CacheModel | None = None
    seen: list[Seen] = field(default_factory=list)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=1 << 30)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/v1/messages", self.messages)
        return app

    async def messages(self, request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        summary = is_summary_call(body)
        as_chat = {"tools": body.get("tools"), "messages": [
            {"role": "system", "content": _blocks(body.get("system"))}, *body["messages"]]}
        tokens = prompt_tokens(as_chat)
        cached = self.cache.serve(as_chat) if self.cache else 0
        self.seen.append(Seen(tokens, cached, summary, ""))
        return web.json_response({
            "id": "msg_replay", "type": "message", "role": "assistant",
            "model": body.get("model", "m"), "stop_reason": "end_turn", "stop_sequence": None,
            "content": [{"type": "text", "text": SUMMARY if summary else "ok"}],
            "usage": {"input_tokens": tokens - cached, "cache_read_input_tokens": cached,
                      "output_tokens": 5},
        })

    async def chat(self, request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        summary = is_summary_call(body)
        tokens = prompt_tokens(body)
        cached = self.cache.serve(body) if self.cache else 0
        self.seen.append(Seen(tokens, cached, summary, problem(body)))
        content = SUMMARY if summary else "ok"
        return web.json_response({
            "id": "chatcmpl-replay", "object": "chat.completion", "created": 1,
            "model": body.get("model", "m"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": tokens, "completion_tokens": 5,
                      "total_tokens": tokens + 5,
                      "prompt_tokens_details": {"cached_tokens": cached}},
        })


def _blocks(system: Any) -> list[Any]:
    if isinstance(system, str):
        return [{"type": "text", "text": system}] if system else []
    return list(system or [])


def prompt_tokens(body: dict[str, Any]) -> int:
    size = len(orjson.dumps(body.get("messages", [])))
    if body.get("tools"):
        size += len(orjson.dumps(body["tools"]))
    return size // 4


def is_summary_call(body: dict[str, Any]) -> bool:
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    content = last.get("content")
    if isinstance(content, list):
        content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return last.get("role") == "user" and isinstance(content, str) and "<summary>" in content
