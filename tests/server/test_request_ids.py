"""Every answer carries an `X-Request-Id`, distinct per request, errors included."""

from __future__ import annotations

import re

import aiohttp

from tests.server.harness import Proxy

CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}


async def test_request_ids_are_distinct_hex_and_on_errors_too(proxy: Proxy) -> None:
    url = proxy.base_url.removesuffix("/v1") + "/v1/chat/completions"
    seen = []
    async with aiohttp.ClientSession() as http:
        for body in (CHAT, CHAT, {"model": "gpt-4o"}):  # the last one is a 400
            async with http.post(url, json=body, headers={"Authorization": "Bearer k"}) as r:
                await r.read()
                seen.append((r.status, r.headers.get("X-Request-Id", "")))
    assert [status for status, _ in seen] == [200, 200, 400]
    ids = [request_id for _, request_id in seen]
    assert all(re.fullmatch(r"[0-9a-f]{16}", i) for i in ids), ids
    assert len(set(ids)) == 3


async def test_streams_carry_their_request_id_too(proxy: Proxy) -> None:
    """A stream's headers go out before the handler returns: the id must be among them."""
    url = proxy.base_url.removesuffix("/v1") + "/v1/chat/completions"
    async with (
        aiohttp.ClientSession() as http,
        http.post(url, json={**CHAT, "stream": True}, headers={"Authorization": "Bearer k"}) as r,
    ):
        body = await r.read()
    assert r.status == 200 and body.endswith(b"data: [DONE]\n\n")
    assert re.fullmatch(r"[0-9a-f]{16}", r.headers.get("X-Request-Id", "")), dict(r.headers)
