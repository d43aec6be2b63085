"""More requests in flight than any client pool's default: all of them reach the upstream at
once, as long-lived streams do (aiohttp caps a session at 100 connections unless told not to),
and with Redis every one keeps its session state (the store's pool holds 64 connections)."""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp import web

from proxy.server.appkeys import STORE
from tests.redis_server import RedisServer
from tests.reliability.conftest import MakeRig
from tests.reliability.support import auth, chat

IN_FLIGHT = 150
ANSWER = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "gpt-4o",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
}


class Gate:
    """An upstream that answers nobody until `IN_FLIGHT` requests are waiting on it at once."""

    def __init__(self) -> None:
        self.waiting = 0
        self.all_in = asyncio.Event()

    def reset(self) -> None:
        self.waiting = 0
        self.all_in = asyncio.Event()

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.chat)
        return app

    async def chat(self, request: web.Request) -> web.Response:
        await request.read()
        self.waiting += 1
        if self.waiting >= IN_FLIGHT:
            self.all_in.set()
        try:
            await asyncio.wait_for(self.all_in.wait(), timeout=10)
        except TimeoutError:
            return web.json_response({"error": {"message": "not all arrived"}}, status=504)
        return web.json_response(ANSWER)


async def send_all(http: aiohttp.ClientSession, url: str) -> list[tuple[int, str | None]]:
    """`IN_FLIGHT` requests at once, one session each: (status, `X-Ctx-Store`) of each."""

    async def send(index: int) -> tuple[int, str | None]:
        headers = {**auth(), "X-Ctx-Session": f"s{index}"}
        async with http.post(url, json=chat(), headers=headers) as response:
            await response.read()
            return response.status, response.headers.get("X-Ctx-Store")

    return await asyncio.gather(*(send(index) for index in range(IN_FLIGHT)))


async def test_a_hundred_and_fifty_requests_in_flight_all_reach_the_upstream(
    make_rig: MakeRig,
) -> None:
    gate = Gate()
    rig = await make_rig(upstream_app=gate.app())
    connector = aiohttp.TCPConnector(limit=0)  # the test's own client must not cap them either
    async with aiohttp.ClientSession(connector=connector) as http:
        answers = await send_all(http, rig.url("/v1/chat/completions"))
    assert answers == [(200, None)] * IN_FLIGHT
    assert gate.waiting == IN_FLIGHT


async def test_with_redis_every_request_in_flight_keeps_its_session_state(
    make_rig: MakeRig, own_redis: RedisServer, key_prefix: str
) -> None:
    gate = Gate()
    # A generous per-operation bound: on a loaded shared machine 150 loads queued behind 64
    # connections may take longer than the default 0.5 s, and a time-out (degraded) is not what
    # this test is about; without the store's gate the 65th operation fails at once anyway.
    rig = await make_rig(
        upstream_app=gate.app(),
        store_url=own_redis.url,
        key_prefix=key_prefix,
        store_op_timeout_s=5,
    )
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        for _ in range(2):  # the second round loads what the first recorded, all at once
            assert (
                await send_all(http, rig.url("/v1/chat/completions")) == [(200, None)] * IN_FLIGHT
            )
            await rig.settled()
            gate.reset()
    sessions = await rig.app[STORE].list_sessions("default", limit=1000)
    assert sorted(int(row["requests"]) for row in sessions) == [2] * IN_FLIGHT
