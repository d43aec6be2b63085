"""Every answer carries an `X-Request-Id`, distinct per request, errors included."""

from __future__ import annotations

import re

import aiohttp

from tests.fakes.openai_upstream import Reply
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


async def test_an_upstream_request_id_is_relayed_and_ours_still_comes_as_x_ctx_request_id(
    proxy: Proxy,
) -> None:
    proxy.fake.default = Reply(headers={"x-request-id": "req_upstream_42"})
    url = proxy.base_url.removesuffix("/v1") + "/v1/chat/completions"
    ours = []
    async with aiohttp.ClientSession() as http:
        for body in (CHAT, {**CHAT, "stream": True}):
            async with http.post(url, json=body, headers={"Authorization": "Bearer k"}) as r:
                await r.read()
                assert r.status == 200
                assert r.headers.getall("X-Request-Id") == ["req_upstream_42"]
                ours.append(r.headers.get("X-Ctx-Request-Id", ""))
    assert all(re.fullmatch(r"[0-9a-f]{16}", i) for i in ours) and ours[0] != ours[1], ours


async def test_without_an_upstream_id_both_headers_carry_ours(proxy: Proxy) -> None:
    url = proxy.base_url.removesuffix("/v1") + "/v1/chat/completions"
    async with aiohttp.ClientSession() as http:
        for body in (CHAT, {"model": "gpt-4o"}):  # an answer and one of the proxy's own errors
            async with http.post(url, json=body, headers={"Authorization": "Bearer k"}) as r:
                await r.read()
                assert r.headers["X-Ctx-Request-Id"] == r.headers["X-Request-Id"]
