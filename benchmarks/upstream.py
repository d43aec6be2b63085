"""A fast fake OpenAI-compatible upstream, run as its own process: `python -m benchmarks.upstream
--port N`. It reads the whole body but never parses it: answers are pre-encoded bytes.

A body containing `"stream":true` gets an SSE stream of 20 content chunks, a finish chunk, a usage
chunk when `include_usage` was asked for, and `[DONE]`. A body naming the model
`bench-big-stream` gets a 20 MiB stream (for the memory benchmark).
"""

from __future__ import annotations

import argparse

import orjson
from aiohttp import web

CHUNKS = 20
BIG_STREAM_BYTES = 20 * 1024 * 1024
USAGE = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120,
         "prompt_tokens_details": {"cached_tokens": 0}}
BASE = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1, "model": "m"}


def _event(payload: dict[str, object]) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def _chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
    return _event({**BASE, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


COMPLETION = orjson.dumps({
    "id": "chatcmpl-bench", "object": "chat.completion", "created": 1, "model": "m",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": "word " * CHUNKS}}],
    "usage": USAGE,
})
STREAM = [_chunk({"role": "assistant", "content": "word "})]
STREAM += [_chunk({"content": "word "}) for _ in range(CHUNKS - 1)]
FINISH = _chunk({}, "stop")
USAGE_CHUNK = _event({**BASE, "choices": [], "usage": USAGE})
DONE = b"data: [DONE]\n\n"
BIG_EVENT = _chunk({"content": "x" * 65_000})


async def chat(request: web.Request) -> web.StreamResponse:
    raw = await request.read()
    if b'"stream":true' not in raw and b'"stream": true' not in raw:
        return web.Response(body=COMPLETION, content_type="application/json")
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    events = STREAM
    if b'"bench-big-stream"' in raw:
        events = [BIG_EVENT] * (BIG_STREAM_BYTES // len(BIG_EVENT))
    for event in events:
        await response.write(event)
    await response.write(FINISH)
    if b'"include_usage"' in raw:
        await response.write(USAGE_CHUNK)
    await response.write(DONE)
    await response.write_eof()
    return response


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = web.Application(client_max_size=1 << 30)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/chat/completions", chat)
    web.run_app(app, host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
