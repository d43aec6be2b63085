"""An in-process fake OpenAI-compatible upstream for the replays (sections 3 and 4).

`prompt_tokens` = characters of the JSON-serialised `messages` (and `tools`) it received / 4.
A request whose last user message asks for a `<summary>` is a summarizer call and gets a short
summary. Every request is checked for validity (`benchmarks.validity`) and recorded as a `Seen`.
An optional `cache` model (`proxy.cost.cachesim`, on the fake's `clock`) decides how many prompt
tokens were read from the cache and written to it; the answer reports them as ctxproxy's Anthropic
translation does (`prompt_tokens_details.cached_tokens`, `cache_creation_input_tokens`).
`POST /v1/messages` does the same in the Anthropic Messages API's shapes (prompt = its `system`,
`messages` and `tools`; usage split into input and cache-read tokens), for the Messages route's
replays (`benchmarks.messages_markers`); its requests are not checked.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson
from aiohttp import web

from benchmarks.validity import problem
from proxy.cost.cachesim import CacheUse

SUMMARY = (
    "<analysis>Reviewed the turns.</analysis><summary>The user asked the agent to work "
    "on the repository; files were read, commands run, findings noted. Open tasks remain "
    "as in the latest messages.</summary>"
)


class CacheModel(Protocol):
    def serve(self, body: dict[str, Any], *, now: float) -> CacheUse:
        """Prompt tokens this request reads from the cache and writes to it; updates the cache."""
        ...


@dataclass
class Seen:
    prompt_tokens: int
    cached_tokens: int
    summary: bool
    problem: str
    written: int = 0
    written_1h: int = 0
    cache_prompt: int = 0
    """The request's prompt tokens as the cache model counts them (its blocks, not the JSON)."""
    body: dict[str, Any] | None = None
    """The request as received, when the fake keeps bodies (`keep_bodies`)."""


@dataclass
class FakeLLM:
    cache: CacheModel | None = None
    seen: list[Seen] = field(default_factory=list)
    clock: Callable[[], float] = time.time
    keep_bodies: bool = False
    summary_text: str = SUMMARY

    def app(self) -> web.Application:
        app = web.Application(client_max_size=1 << 30)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/v1/messages", self.messages)
        return app

    async def messages(self, request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        summary = is_summary_call(body)
        as_chat = {
            "tools": body.get("tools"),
            "messages": [
                {"role": "system", "content": _blocks(body.get("system"))},
                *body["messages"],
            ],
        }
        tokens = prompt_tokens(as_chat)
        used = self.cache.serve(as_chat, now=self.clock()) if self.cache else CacheUse()
        cached = min(used.read, tokens)
        written = min(used.written, tokens - cached)
        self.seen.append(
            Seen(tokens, cached, summary, "", written, min(used.written_1h, written), used.prompt)
        )
        return web.json_response(
            {
                "id": "msg_replay",
                "type": "message",
                "role": "assistant",
                "model": body.get("model", "m"),
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "content": [{"type": "text", "text": self.summary_text if summary else "ok"}],
                "usage": {
                    "input_tokens": tokens - cached - written,
                    "cache_read_input_tokens": cached,
                    "cache_creation_input_tokens": written,
                    "output_tokens": 5,
                },
            }
        )

    async def chat(self, request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        summary = is_summary_call(body)
        tokens = prompt_tokens(body)
        used = self.cache.serve(body, now=self.clock()) if self.cache else CacheUse()
        cached = min(used.read, tokens)
        written = min(used.written, tokens - cached)
        kept = body if self.keep_bodies else None
        self.seen.append(
            Seen(
                tokens,
                cached,
                summary,
                problem(body),
                written,
                min(used.written_1h, written),
                used.prompt,
                kept,
            )
        )
        content = self.summary_text if summary else "ok"
        return web.json_response(
            {
                "id": "chatcmpl-replay",
                "object": "chat.completion",
                "created": 1,
                "model": body.get("model", "m"),
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": content},
                    }
                ],
                "usage": {
                    "prompt_tokens": tokens,
                    "completion_tokens": 5,
                    "total_tokens": tokens + 5,
                    "prompt_tokens_details": {"cached_tokens": cached},
                    "cache_creation_input_tokens": written,
                },
            }
        )


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
