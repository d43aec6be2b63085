"""Replay the recorded sessions of ../shared/traces/ turn by turn, as their agents sent them.

A request is sent at each assistant turn, carrying every message before it (the full history so
far, with the session's tools). Through ctxproxy (in process, memory store) or directly to the
fake upstream. Background work the proxy spawns after a response (recording usage) is awaited
before the next turn, as an agent's next turn would come seconds later.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from benchmarks import targets
from benchmarks.common import TRACES
from benchmarks.fake_llm import FakeLLM, Seen
from benchmarks.payloads import load_trace
from proxy.config import load_settings
from proxy.server.app import Ports, create_app
from proxy.server.appkeys import LIFECYCLE

MODELS = {"openai": "gpt-4o", "anthropic": "claude-sonnet-4-5", "none": "gpt-4o"}


@dataclass
class Replayed:
    """One session's replay: what the upstream saw, and ctxproxy's response headers."""

    trace: str
    seen: list[Seen] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    chat_at: list[int] = field(default_factory=list)
    """Indexes into `seen` of the client's own requests; the others are summarizer calls."""

    @property
    def chat(self) -> list[Seen]:
        return [self.seen[i] for i in self.chat_at]

    @property
    def summarizer(self) -> list[Seen]:
        chat = set(self.chat_at)
        return [s for i, s in enumerate(self.seen) if i not in chat]


def trace_names() -> list[str]:
    return sorted(p.name for p in TRACES.glob("*.json"))


def requests_of(trace: dict[str, Any], model: str) -> Iterator[dict[str, Any]]:
    messages = trace["messages"]
    for index, message in enumerate(messages):
        if message["role"] == "assistant" and any(m["role"] == "user" for m in messages[:index]):
            body: dict[str, Any] = {"model": model, "messages": messages[:index]}
            if trace.get("tools"):
                body["tools"] = trace["tools"]
            yield body


@contextlib.asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[TestServer]:
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield server
    finally:
        await server.close()


@dataclass
class Rig:
    """A fake upstream and, when `tenant_toml` is given, ctxproxy in front of it."""

    fake: FakeLLM
    url: str
    proxy: web.Application | None = None


@contextlib.asynccontextmanager
async def rig(
    tmp: Path,
    *,
    tenant_toml: str | None,
    cache_style: str = "openai",
    clock: Callable[[], float] | None = None,
) -> AsyncIterator[Rig]:
    fake = FakeLLM()
    async with serving(fake.app()) as upstream:
        base = str(upstream.make_url("/v1"))
        if tenant_toml is None:
            yield Rig(fake, f"{base}/chat/completions")
            return
        config = targets.ctxproxy_config(tmp, base, 9)
        text = config.read_text().replace(
            'cache_style = "openai"', f'cache_style = "{cache_style}"'
        )
        config.write_text(text + tenant_toml)
        settings = load_settings(config, environ={"BENCH_UPSTREAM_KEY": "sk-fake"})
        app = create_app(settings, Ports(clock=clock) if clock else None)  # simulated time
        async with serving(app) as proxy:
            yield Rig(fake, str(proxy.make_url("/v1/chat/completions")), app)


async def replay(
    rig: Rig, name: str, *, model: str, before_each: Callable[[], None] = lambda: None
) -> Replayed:
    out = Replayed(name)
    rig.fake.seen = out.seen
    headers = {"Authorization": "Bearer sk-replay", "X-Ctx-Session": name.removesuffix(".json")}
    async with aiohttp.ClientSession() as client:
        for body in requests_of(load_trace(name), model):
            before_each()
            async with client.post(rig.url, json=body, headers=headers) as response:
                await response.read()
                if response.status != 200:
                    raise RuntimeError(f"{name}: status {response.status}")
                out.headers.append(dict(response.headers))
            out.chat_at.append(len(out.seen) - 1)  # the summarizer, if any, was called before
            if rig.proxy is not None:
                await asyncio.gather(*list(rig.proxy[LIFECYCLE].tasks))
    return out
