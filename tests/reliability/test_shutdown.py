"""Graceful shutdown: streams in flight finish within the drain timeout; the rest end in band."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from proxy.config import load_settings
from proxy.server.app import create_app
from tests.fakes.openai_upstream import FakeOpenAI, Reply
from tests.redis_server import free_port
from tests.reliability.support import UPSTREAM_KEY, auth, chat, sse_events, wait_until
from tests.server.harness import write_config

DRAIN_S = 1.5


async def _stream(url: str, session: str) -> bytes:
    headers = {**auth(), "X-Ctx-Session": session}
    async with (
        aiohttp.ClientSession() as http,
        http.post(url, json=chat(stream=True), headers=headers) as response,
    ):
        chunks = []
        try:
            async for chunk in response.content.iter_any():
                chunks.append(chunk)
        except aiohttp.ClientPayloadError:
            chunks.append(b"<cut>")
        return b"".join(chunks)


async def test_streams_finish_within_the_drain_timeout_and_the_rest_end_in_band(
    aiohttp_server: Any, tmp_path: Path
) -> None:
    fake = FakeOpenAI()
    short = [Reply(content="abc", chunks=3, chunk_delay_s=0.2) for _ in range(10)]
    long = [Reply(content="abcde", chunks=5, chunk_delay_s=1.0) for _ in range(10)]
    fake.script.extend(short + long)
    upstream = await aiohttp_server(fake.app())
    config = write_config(tmp_path, upstream=str(upstream.make_url("")).rstrip("/"))
    config.write_text(
        config.read_text().replace("[server]", f"[server]\ndrain_timeout_s = {DRAIN_S}")
    )
    settings = load_settings(config, environ={"FAKE_UPSTREAM_KEY": UPSTREAM_KEY})
    port = free_port()
    runner = web.AppRunner(
        create_app(settings), shutdown_timeout=DRAIN_S, handler_cancellation=True
    )  # what `ctxproxy serve` does with `drain_timeout_s`
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    streams = []
    for index in range(20):  # in script order: the first ten get the short replies
        streams.append(asyncio.create_task(_stream(url, f"s{index}")))
        await wait_until(lambda i=index: len(fake.chat) > i, within=5)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await runner.cleanup()
    assert loop.time() - started < DRAIN_S + 0.5
    results = await asyncio.gather(*streams)
    for raw in results[:10]:
        assert raw.endswith(b"data: [DONE]\n\n"), raw[-80:]
    for raw in results[10:]:
        last = orjson.loads(sse_events(raw)[-1])
        assert last["error"]["code"] in ("stream_interrupted", "shutting_down"), raw[-200:]
