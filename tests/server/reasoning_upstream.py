"""A fake OpenAI-compatible server that sends its reasoning text as `reasoning_content` (as
DeepSeek and vLLM do): a real aiohttp server, answering every chat request "42." after the
reasoning "6 times 7.", in JSON or as a stream with usage."""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from tests.fakes.openai_upstream import FakeOpenAI

MODEL = "gpt-4o"


class Reasoner(FakeOpenAI):
    """The fake OpenAI API whose chat route answers with `reasoning_content` (module doc)."""

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        usage = {"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29}
        message = {"role": "assistant", "content": "42.", "reasoning_content": "6 times 7."}
        if not body.get("stream"):
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            return web.json_response(_chunk("chat.completion", choice, usage=usage))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        deltas = [{"role": "assistant", "content": ""}, {"reasoning_content": "6 times "},
                  {"reasoning_content": "7."}, {"content": "42."}]  # fmt: skip
        for n, delta in enumerate(deltas):
            finish = "stop" if n == len(deltas) - 1 else None
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            await response.write(_event(_chunk("chat.completion.chunk", choice)))
        await response.write(_event(_chunk("chat.completion.chunk", None, usage=usage)))
        await response.write(b"data: [DONE]\n\n")
        return response


def _chunk(kind: str, choice: Any, **extra: Any) -> dict[str, Any]:
    choices = [choice] if choice is not None else []
    return {"id": "chatcmpl-r", "object": kind, "created": 1, "model": MODEL,
            "choices": choices, **extra}  # fmt: skip


def _event(payload: Any) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"
