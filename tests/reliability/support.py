"""Helpers of the reliability suite: a proxy rig around any upstream app, raw requests, settling."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import openai
from aiohttp import web
from aiohttp.test_utils import TestServer

from proxy.server.appkeys import LIFECYCLE, STORE
from proxy.settings import Settings
from tests.fakes.openai_upstream import FakeOpenAI

UPSTREAM_KEY = "sk-up-Qv7XbN2mKp9Lr4Wt"
"""The upstream credential the proxy reads from `FAKE_UPSTREAM_KEY` (a canary)."""


@dataclass
class Rig:
    """The proxy in process, its fake upstream, and the upstream's server (to count connections)."""

    fake: FakeOpenAI
    upstream: TestServer
    server: TestServer
    app: web.Application
    settings: Settings
    workspace: Path
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        return str(self.server.make_url("/v1"))

    def url(self, path: str) -> str:
        return str(self.server.make_url(path))

    def client(self, api_key: str = "sk-client", **kw: Any) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=self.base_url, api_key=api_key, max_retries=0, **kw)

    def upstream_connections(self) -> int:
        """Connections the upstream server holds open right now."""
        handler = self.upstream.runner.server
        return len(handler.connections) if handler is not None else 0

    async def settled(self) -> None:
        """Wait for the after-request work (state writes, events) of every answered request."""
        for _ in range(100):
            tasks = list(self.app[LIFECYCLE].tasks)
            if not tasks:
                return
            await asyncio.gather(*tasks, return_exceptions=True)
        raise AssertionError("background tasks never settled")

    async def sessions(self, tenant: str = "default") -> list[dict[str, str]]:
        return await self.app[STORE].list_sessions(tenant, limit=100)


def chat(content: str = "hi", *, stream: bool = False, **extra: Any) -> dict[str, Any]:
    return {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": content}],
        "stream": stream,
        **extra,
    }


def auth(token: str = "sk-client") -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def post_json(
    session: aiohttp.ClientSession, url: str, body: Any, **headers: str
) -> tuple[int, bytes, Any]:
    """Status, raw body and headers of one request."""
    async with session.post(url, json=body, headers={**auth(), **headers}) as response:
        return response.status, await response.read(), response.headers


def assert_openai_error(raw: bytes) -> dict[str, Any]:
    import orjson

    body = orjson.loads(raw)
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    assert isinstance(body["error"]["message"], str)
    error: dict[str, Any] = body["error"]
    return error


def sse_events(raw: bytes) -> list[bytes]:
    """`data:` payloads of a `\\n\\n`-framed stream (what the proxy sends the client)."""
    return [
        block.removeprefix(b"data: ") for block in raw.split(b"\n\n") if block.startswith(b"data: ")
    ]


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def current_tasks() -> set[asyncio.Task[Any]]:
    """Live tasks, less the servers' idle keep-alive connection handlers (counted apart)."""
    return {
        t
        for t in asyncio.all_tasks()
        if not t.done() and "RequestHandler.start" not in repr(t.get_coro())
    }


async def wait_until(predicate: Any, *, within: float, step: float = 0.02) -> float:
    """Seconds until `predicate()` was true; AssertionError after `within` seconds."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    while loop.time() - start < within:
        if predicate():
            return loop.time() - start
        await asyncio.sleep(step)
    raise AssertionError(f"condition not met within {within}s")


def history(turns: int = 5, *, tag: str = "") -> list[dict[str, Any]]:
    """A conversation of `turns` user/assistant pairs plus a last user message."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": f"You help. {tag}"}]
    for index in range(turns):
        messages.append({"role": "user", "content": f"question {index} {tag} " + "x" * 200})
        messages.append({"role": "assistant", "content": f"answer {index} " + "y" * 200})
    messages.append({"role": "user", "content": f"last question {tag}"})
    return messages


COMPACT_AT_1000 = '[tenants.default.compact]\nthreshold_tokens = 1000\nmode = "sync"\n'
