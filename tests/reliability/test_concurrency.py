"""More requests in flight than any client pool's default: all of them reach the upstream at
once, as long-lived streams do (aiohttp caps a session at 100 connections unless told not to)."""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp import web

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


async def test_a_hundred_and_fifty_requests_in_flight_all_reach_the_upstream(
    make_rig: MakeRig,
) -> None:
    gate = Gate()
    rig = await make_rig(upstream_app=gate.app())
    connector = aiohttp.TCPConnector(limit=0)  # the test's own client must not cap them either
    async with aiohttp.ClientSession(connector=connector) as http:

        async def send(index: int) -> int:
            headers = {**auth(), "X-Ctx-Session": f"s{index}"}
            url = rig.url("/v1/chat/completions")
            async with http.post(url, json=chat(), headers=headers) as response:
                await response.read()
                return response.status

        statuses = await asyncio.gather(*(send(index) for index in range(IN_FLIGHT)))
    assert statuses == [200] * IN_FLIGHT
    assert gate.waiting == IN_FLIGHT
