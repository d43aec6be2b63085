"""Keeping a streaming client's connection alive while the proxy is slow to start the answer.

A synchronous compaction can take as long as a summarizer call. For a stream, if the pipeline has
not finished `AFTER_S` after it began, the proxy commits to `200 text/event-stream`, sends SSE
comment lines (which every SSE client ignores) every `EVERY_S` seconds, and relays the upstream's
stream into that same response once it comes. From then on an upstream error can only be told in
band (`proxy.server.relay.end_in_band`), and only the headers known at the start are sent
(`X-Ctx-Session`, the request id): the other `X-Ctx-*` headers describe what had not happened yet.

The fast path costs one timer: nothing is written unless the pipeline is slow.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from types import MappingProxyType
from typing import TypeVar

from aiohttp import web

AFTER_S = 2.0
EVERY_S = 10.0
COMMENT = b": ctxproxy is preparing the context\n\n"
SSE_HEADERS = MappingProxyType({"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
T = TypeVar("T")


async def kept_alive(keepalive: KeepAlive | None, work: Awaitable[T]) -> T:
    """`work` awaited with `keepalive` armed meanwhile (when there is one; the early response
    it may have started is then `keepalive.response`)."""
    if keepalive is None:
        return await work
    keepalive.start()
    try:
        return await work
    finally:
        await keepalive.stop()


class KeepAlive:
    """Starts the early response on a timer; `stop()` hands it back (None if it never started)."""

    def __init__(self, request: web.Request, headers: Mapping[str, str]) -> None:
        self._request = request
        self._headers = {**SSE_HEADERS, **headers}
        self._loop = asyncio.get_running_loop()
        self.response: web.StreamResponse | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        """Arms the timer (again, for a second slow step such as an overflow retry)."""
        if self.response is not None:
            self._ticker = asyncio.ensure_future(self._tick(first_after=EVERY_S))
        else:
            self._timer = self._loop.call_later(AFTER_S, self._begin)

    def _begin(self) -> None:
        self._ticker = asyncio.ensure_future(self._tick(first_after=0.0))

    async def _tick(self, *, first_after: float) -> None:
        await asyncio.sleep(first_after)
        if self.response is None:
            response = web.StreamResponse(status=200, headers=self._headers)
            await response.prepare(self._request)
            self.response = response
        while True:
            await self.response.write(COMMENT)
            await asyncio.sleep(EVERY_S)

    async def stop(self) -> web.StreamResponse | None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        ticker, self._ticker = self._ticker, None
        if ticker is not None:
            ticker.cancel()
            await asyncio.wait({ticker})  # a cancellation of our own still reaches us
            if not ticker.cancelled():
                ticker.exception()  # a client gone: the relay's next write finds out
        return self.response
