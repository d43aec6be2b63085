"""Canary keys never show: not in logs at any level, error bodies, events, metrics or Redis."""

from __future__ import annotations

import logging
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis

from proxy.server.appkeys import STORE
from proxy.server.keys import digest
from tests.fakes.openai_upstream import Reply
from tests.redis_server import RedisServer
from tests.reliability.conftest import MakeRig
from tests.reliability.support import UPSTREAM_KEY, Rig, auth, history

PROXY_KEY = "ctx-Kf3Wq8Zr5Tn1Vb7Hm4Lp"
CLIENT_KEY = "zqXr6Pd2Ny8Js4Fw9CmT"
ADMIN_KEY = "adm-Yt5Gh1Ue7Ox3Ia9Sd"
SECRETS = (PROXY_KEY, CLIENT_KEY, ADMIN_KEY, UPSTREAM_KEY)
TENANTS = (
    f'keys = ["{digest(PROXY_KEY)}"]\nforward_client_key = false\n'
    '[tenants.default.compact]\nthreshold_tokens = 1000\n'
    '[tenants.open]\nworkspace = "ws"\nupstream = "fake"\n'
)  # fmt: skip


def leaked_pieces(haystack: str) -> list[str]:
    """Every 8-character piece of a canary found in `haystack`."""
    return [
        secret[i : i + 8]
        for secret in SECRETS
        for i in range(len(secret) - 7)
        if secret[i : i + 8] in haystack
    ]


async def _exchange(
    http: aiohttp.ClientSession, rig: Rig, method: str, path: str, **kw: Any
) -> str:
    async with http.request(method, rig.url(path), **kw) as response:
        return f"{response.status} {dict(response.headers)} {await response.text()}"


async def _traffic(rig: Rig) -> list[str]:
    seen: list[str] = []
    messages = history(6)
    grown = [*messages, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "go"}]
    keyed = {**auth(PROXY_KEY), "X-Ctx-Session": "canary"}
    rig.fake.script.extend(
        [
            Reply(prompt_tokens=5000),
            Reply(),
            Reply(status=500, headers={"x-request-id": "r1"}),
            Reply(status=429, headers={"Retry-After": "1"}),
            Reply(cut_after=1, half_event=True),
        ]
    )
    async with aiohttp.ClientSession() as http:
        post = "/v1/chat/completions"
        for body in (
            {"model": "m", "messages": messages},
            {"model": "m", "messages": grown},
            {"model": "m", "messages": grown},
            {"model": "m", "messages": grown},
            {"model": "m", "messages": grown, "stream": True},
        ):
            seen.append(await _exchange(http, rig, "POST", post, json=body, headers=keyed))
        opened = auth(CLIENT_KEY)
        seen.append(
            await _exchange(http, rig, "POST", post, json={"messages": grown}, headers=opened)
        )
        seen.append(await _exchange(http, rig, "POST", post, data=b"{bad", headers=opened))
        seen.append(await _exchange(http, rig, "GET", "/v1/models", headers=opened))
        seen.append(
            await _exchange(http, rig, "GET", "/v1/ctx/sessions?all=1", headers=auth(ADMIN_KEY))
        )
        seen.append(await _exchange(http, rig, "GET", "/v1/ctx/sessions/canary", headers=keyed))
        seen.append(await _exchange(http, rig, "GET", "/v1/ctx/outputs/nope", headers=keyed))
        seen.append(await _exchange(http, rig, "GET", "/metrics"))
        seen.append(await _exchange(http, rig, "GET", "/readyz"))
    await rig.settled()
    return seen


async def _redis_dump(url: str, prefix: str) -> str:
    redis: Any = aioredis.Redis.from_url(url)
    parts: list[str] = []
    try:
        async for key in redis.scan_iter(match=f"{prefix}*", count=500):
            kind = (await redis.type(key)).decode()
            value: Any = {
                "string": redis.get, "hash": redis.hgetall, "set": redis.smembers,
                "zset": lambda k: redis.zrange(k, 0, -1, withscores=True),
                "stream": lambda k: redis.xrange(k), "list": lambda k: redis.lrange(k, 0, -1),
            }[kind](key)  # fmt: skip
            parts.append(f"{key!r} {await value!r}")
    finally:
        await redis.aclose()
    assert parts, "nothing stored: the scan proves nothing"
    return "\n".join(parts)


async def test_canary_keys_appear_nowhere(
    make_rig: MakeRig, redis_server: RedisServer, key_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    rig = await make_rig(
        store_url=redis_server.url, key_prefix=key_prefix, tenant_extra=TENANTS,
        admin_keys=f'["{digest(ADMIN_KEY)}"]',
    )  # fmt: skip
    seen = await _traffic(rig)
    assert len(rig.fake.summary_requests) == 1, "the summarizer ran with the upstream key"
    assert rig.fake.summary_requests[0].headers["Authorization"] == f"Bearer {UPSTREAM_KEY}"
    events = await rig.app[STORE].read_events("0", block_ms=0, count=10_000)
    assert events
    logs = caplog.text + "\n".join(
        f"{r.getMessage()} {r.args!r} {r.exc_text or ''} {r.__dict__!r}" for r in caplog.records
    )
    assert leaked_pieces(logs) == []
    assert leaked_pieces("\n".join(seen)) == []
    assert leaked_pieces(repr(events)) == []
    assert leaked_pieces(await _redis_dump(redis_server.url, key_prefix)) == []
    assert repr(rig.settings).count(UPSTREAM_KEY) == 0
