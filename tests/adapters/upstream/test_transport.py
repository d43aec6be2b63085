"""Reading an upstream body with a bounded silence, and a JSON body's answer relayed untouched,
against a real local HTTP server."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator

import aiohttp
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from proxy.adapters.upstream.transport import (
    Timeouts,
    UpstreamIdle,
    iter_body,
    open_response,
    post_json,
    streamed_reply,
    whole_reply,
)
from proxy.errors import UpstreamTimeout, UpstreamUnreachable
from tests.redis_server import free_port

CHUNKS = [b"one ", b"two ", b"three"]


async def drip(request: web.Request) -> web.StreamResponse:
    """Sends the chunks `gap` seconds apart (query string), then ends."""
    gap = float(request.query.get("gap", "0"))
    response = web.StreamResponse()
    await response.prepare(request)
    for chunk in CHUNKS:
        await response.write(chunk)
        await asyncio.sleep(gap)
    await response.write_eof()
    return response


async def echo(request: web.Request) -> web.Response:
    """Answers with the JSON body it was sent, and a hop-by-hop header that must not cross."""
    body = await request.json()
    return web.json_response(body, status=201, headers={"Keep-Alive": "timeout=5"})


@pytest.fixture
async def server() -> AsyncIterator[TestServer]:
    app = web.Application()
    app.router.add_get("/", drip)
    app.router.add_post("/", drip)
    app.router.add_post("/echo", echo)
    async with TestServer(app) as running:
        yield running


async def read_all(url: str, *, idle_s: float, pause_s: float = 0.0) -> list[bytes]:
    async with aiohttp.ClientSession() as http, http.get(url) as response:
        got = []
        async for chunk in iter_body(response, idle_s=idle_s):
            got.append(chunk)
            await asyncio.sleep(pause_s)
        return got


async def test_a_slow_reader_is_not_upstream_silence(server: TestServer) -> None:
    got = await read_all(str(server.make_url("/")), idle_s=0.1, pause_s=0.25)
    assert b"".join(got) == b"".join(CHUNKS)


async def test_gaps_under_the_bound_pass(server: TestServer) -> None:
    got = await read_all(str(server.make_url("/?gap=0.1")), idle_s=0.4)
    assert b"".join(got) == b"".join(CHUNKS)


async def test_a_silence_over_the_bound_raises_upstream_idle_in_time(server: TestServer) -> None:
    started = time.monotonic()
    with pytest.raises(UpstreamIdle):
        await read_all(str(server.make_url("/?gap=3")), idle_s=0.3)
    assert time.monotonic() - started < 0.3 * 2 + 0.5  # fired at the bound, not at the next tick


async def test_a_connection_that_cannot_open_is_an_upstream_timeout() -> None:
    """A listener whose accept queue is full drops new SYNs: the connect bound must fire."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(4):  # fill the accept queue (never accepted)
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            filler.connect(("127.0.0.1", port))
        fillers.append(filler)
    await asyncio.sleep(0.1)
    timeouts = Timeouts(connect_s=0.3, first_byte_s=30, total_s=30)
    try:
        async with aiohttp.ClientSession() as http:
            for whole_call in (False, True):
                started = time.monotonic()
                with pytest.raises(UpstreamTimeout):
                    await open_response(
                        http,
                        "POST",
                        f"http://127.0.0.1:{port}/",
                        headers={},
                        data=b"{}",
                        timeouts=timeouts,
                        whole_call=whole_call,
                    )
                assert time.monotonic() - started < 0.3 * 2 + 1
    finally:
        for sock in (listener, *fillers):
            sock.close()


async def test_a_refused_connection_names_the_upstreams_address_not_aiohttps_wording() -> None:
    port = free_port()
    async with aiohttp.ClientSession() as http:
        with pytest.raises(UpstreamUnreachable) as caught:
            await open_response(http, "POST", f"http://user:sk-key@127.0.0.1:{port}/v1/chat",
                                headers={}, data=b"{}", timeouts=Timeouts())  # fmt: skip
    assert caught.value.message == f"upstream 127.0.0.1:{port} unreachable: Connection refused"


async def test_a_whole_reply_is_the_answer_untouched_without_hop_by_hop_headers(
    server: TestServer,
) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    async with aiohttp.ClientSession() as http:
        response, sent = await post_json(
            http, str(server.make_url("/echo")), body, headers={}, timeouts=Timeouts(), stream=False
        )
        reply = await whole_reply(response, sent_bytes=sent)
    assert reply.status == 201 and reply.stream is None and reply.body is not None
    assert reply.body.replace(b" ", b"") == orjson.dumps(body) and sent == len(orjson.dumps(body))
    assert "keep-alive" not in {name.lower() for name in reply.headers}
    assert response.closed


async def test_releasing_a_streamed_reply_mid_body_closes_its_connection(
    server: TestServer,
) -> None:
    async with aiohttp.ClientSession() as http:
        response, sent = await post_json(
            http, str(server.make_url("/?gap=5")), {}, headers={}, timeouts=Timeouts(), stream=True
        )
        reply = streamed_reply(response, idle_s=30, sent_bytes=sent)
        assert reply.stream is not None and sent == 2
        assert await anext(reply.stream) == CHUNKS[0]
        await reply.release()
        assert response.closed and response.connection is None
        with pytest.raises(StopAsyncIteration):
            await anext(reply.stream)
