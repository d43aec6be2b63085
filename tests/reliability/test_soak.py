"""Soak: concurrent mixed traffic (streams, aborts, resets, 429s, compactions) leaks nothing.

The suite runs a short variant (`CTXPROXY_SOAK_S`, default 60 s; the benchmark runs 600 s).
Deselect it with `-m "not soak"`.
"""

from __future__ import annotations

import asyncio
import os
import random
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from tests.fakes.openai_upstream import FakeOpenAI, Reply, _completion, _is_summary_call
from tests.redis_server import RedisServer
from tests.reliability.conftest import MakeRig
from tests.reliability.support import COMPACT_AT_1000, Rig, auth, current_tasks, history, open_fds

pytestmark = pytest.mark.soak

SOAK_S = float(os.environ.get("CTXPROXY_SOAK_S", "60"))
WORKERS = 100
REPLIES = {
    "ok": Reply(content="abcdef", chunks=3, chunk_delay_s=0.01, prompt_tokens=100),
    "slow": Reply(content="abcdefghij", chunks=10, chunk_delay_s=0.1, prompt_tokens=100),
    "reset": Reply(content="abcdef", chunks=3, cut_after=1, half_event=True),
    "429": Reply(status=429, headers={"Retry-After": "1"}),
    "big": Reply(prompt_tokens=5000),
}


class SoakFake(FakeOpenAI):
    """Answers by the marker in the last message; checks every request it gets is valid."""

    def __init__(self) -> None:
        super().__init__()
        self.invalid: list[str] = []
        self.count = 0

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        if _is_summary_call(body):
            return await super().chat_completions(request)
        self.count += 1
        problem = _invalid(body)
        if problem:
            self.invalid.append(problem)
        reply = REPLIES[str(body["messages"][-1].get("content", "")).split("#")[-1]]
        if reply.status != 200:
            error = {"message": "slow down", "type": "rate", "param": None, "code": None}
            return web.json_response({"error": error}, status=reply.status, headers=reply.headers)
        if body.get("stream"):
            return await self._stream(request, body, reply)
        return web.json_response(_completion(body, reply))


def _invalid(body: dict[str, Any]) -> str:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "no messages"
    roles = [m.get("role") for m in messages]
    first_other = next((i for i, r in enumerate(roles) if r != "system"), len(roles))
    if "system" in roles[first_other:]:
        return "system after the start"
    return ""


async def _one(http: aiohttp.ClientSession, rig: Rig, rng: random.Random, index: int) -> str:
    """One request of a random kind; '' if it behaved as it should, else what went wrong."""
    roll = rng.random()
    kind = ("429" if roll < 0.05 else "reset" if roll < 0.15 else "abort" if roll < 0.35
            else "big" if roll < 0.40 else "ok")  # fmt: skip
    stream = kind in ("reset", "abort") or rng.random() < 0.7
    marker = "slow" if kind == "abort" else kind
    messages = history(6, tag=f"w{index}") if kind == "big" else [{"role": "user", "content": "q"}]
    messages = [*messages, {"role": "user", "content": f"go #{marker}"}]
    headers = {**auth(), "X-Ctx-Session": f"soak-{index}-{kind == 'big'}"}
    body = {"model": "m", "messages": messages, "stream": stream}
    async with http.post(rig.url("/v1/chat/completions"), json=body, headers=headers) as r:
        if kind == "abort":
            await r.content.readuntil(b"\n\n")
            r.close()
            return ""
        raw = await r.read()
    if kind == "429":
        return "" if r.status == 429 else f"429 became {r.status}"
    if r.status != 200:
        return f"{kind}: {r.status}"
    if kind == "reset" and b"stream_interrupted" not in raw:
        return "reset without the in-band error"
    if kind != "reset" and stream and not raw.endswith(b"data: [DONE]\n\n"):
        return f"{kind}: stream ended badly"
    return ""


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.soak
@pytest.mark.timeout(SOAK_S + 90)
async def test_mixed_load_leaks_no_task_descriptor_connection_or_memory(
    make_rig: MakeRig, redis_server: RedisServer, key_prefix: str
) -> None:
    fake = SoakFake()
    rig = await make_rig(
        fake=fake, store_url=redis_server.url, key_prefix=key_prefix, tenant_extra=COMPACT_AT_1000
    )
    loop = asyncio.get_running_loop()
    end = loop.time() + SOAK_S
    problems: list[str] = []
    checkpoint: dict[str, int] = {}

    async def worker(index: int, http: aiohttp.ClientSession) -> None:
        rng = random.Random(index)
        for _ in range(100_000):
            if loop.time() >= end:
                return
            problems.append(await _one(http, rig, rng, index))

    async def sample() -> None:
        await asyncio.sleep(SOAK_S / 3)
        checkpoint.update(rss=_rss(), tasks=len(current_tasks()), fds=open_fds())

    base_tasks = len(current_tasks())
    connector = aiohttp.TCPConnector(limit=WORKERS)
    async with aiohttp.ClientSession(connector=connector) as http:
        await asyncio.gather(sample(), *(worker(i, http) for i in range(WORKERS)))
    await rig.settled()
    await asyncio.sleep(0.5)
    assert [p for p in problems if p] == []
    assert fake.invalid == []
    assert fake.count > 20 * SOAK_S, "the soak did not get going"
    assert len(current_tasks()) <= base_tasks + 2
    # pooled keep-alive connections (proxy → upstream, proxy → Redis) stay open: compare with
    # the steady state under load, and bound the pool
    assert open_fds() <= checkpoint["fds"] + 10
    assert rig.upstream_connections() <= 100, "aiohttp's default pool limit"
    assert _rss() <= checkpoint["rss"] * 1.10
