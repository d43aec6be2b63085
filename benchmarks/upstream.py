"""A fast fake OpenAI-compatible upstream, run as its own process: `python -m benchmarks.upstream
--port N`. It reads the whole body but never parses it: answers are pre-encoded bytes.

A body containing `"stream":true` gets an SSE stream of 20 content chunks, a finish chunk, a usage
chunk when `include_usage` was asked for, and `[DONE]`. A body naming the model
`bench-big-stream` gets a 20 MiB stream (for the memory benchmark). `POST /v1/messages` answers
the same way in the Anthropic Messages API's shapes (a `message`, or its event stream of 20 text
deltas), for the Messages route's benchmark (`benchmarks.messages_route`).
"""

from __future__ import annotations

import argparse

import orjson
from aiohttp import web

CHUNKS = 20
BIG_STREAM_BYTES = 20 * 1024 * 1024
USAGE = {
    "prompt_tokens": 100,
    "completion_tokens": 20,
    "total_tokens": 120,
    "prompt_tokens_details": {"cached_tokens": 0},
}
BASE = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1, "model": "m"}


def _event(payload: dict[str, object]) -> bytes:
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def _chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
    return _event({**BASE, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


COMPLETION = orjson.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "word " * CHUNKS},
            }
        ],
        "usage": USAGE,
    }
)
STREAM = [_chunk({"role": "assistant", "content": "word "})]
STREAM += [_chunk({"content": "word "}) for _ in range(CHUNKS - 1)]
FINISH = _chunk({}, "stop")
USAGE_CHUNK = _event({**BASE, "choices": [], "usage": USAGE})
DONE = b"data: [DONE]\n\n"
BIG_EVENT = _chunk({"content": "x" * 65_000})


MESSAGE = orjson.dumps(
    {
        "id": "msg_bench",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [{"type": "text", "text": "word " * CHUNKS}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 20},
    }
)


def _named(name: str, payload: dict[str, object]) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


_START = {
    "id": "msg_bench",
    "type": "message",
    "role": "assistant",
    "model": "m",
    "content": [],
    "stop_reason": None,
    "stop_sequence": None,
    "usage": {"input_tokens": 100, "output_tokens": 1},
}
EVENTS = b"".join(
    [
        _named("message_start", {"type": "message_start", "message": _START}),
        _named(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        *(
            _named(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": "word "},
                },
            )
            for _ in range(CHUNKS)
        ),
        _named("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _named(
            "message_delta",
            {
                "type": "message_delta",
                "usage": {"output_tokens": 20},
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            },
        ),
        _named("message_stop", {"type": "message_stop"}),
    ]
)


async def messages(request: web.Request) -> web.StreamResponse:
    raw = await request.read()
    if b'"stream":true' not in raw and b'"stream": true' not in raw:
        return web.Response(body=MESSAGE, content_type="application/json")
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for event in EVENTS.split(b"\n\n")[:-1]:  # one write per event, as an API sends them
        await response.write(event + b"\n\n")
    await response.write_eof()
    return response


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
    app.router.add_post("/v1/messages", messages)
    web.run_app(app, host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
