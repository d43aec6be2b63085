"""The fake OpenAI upstream with a slow, countable summarizer."""

from __future__ import annotations

import asyncio
import time

import orjson
from aiohttp import web

from tests.fakes.openai_upstream import FakeOpenAI, _is_summary_call


class SlowSummaryFake(FakeOpenAI):
    """Summarizer calls wait `summary_delay_s` first; cancelled ones are timestamped."""

    def __init__(self, summary_delay_s: float = 0.0) -> None:
        super().__init__()
        self.summary_delay_s = summary_delay_s
        self.summary_started: list[float] = []
        self.summary_cancelled: list[float] = []

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if _is_summary_call(orjson.loads(body)) and self.summary_delay_s:
            self.summary_started.append(time.monotonic())
            try:
                await asyncio.sleep(self.summary_delay_s)
            except asyncio.CancelledError:
                self.summary_cancelled.append(time.monotonic())
                raise
        return await super().chat_completions(request)
