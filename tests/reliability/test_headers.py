"""Headers and routing: hop-by-hop names never cross, redirects are not followed, gzip is decoded
once, and the client cannot pick the upstream."""

from __future__ import annotations

import asyncio
import gzip
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st
from multidict import CIMultiDict

from proxy.adapters.upstream.headers import (
    came_back,
    client_response_headers,
    upstream_request_headers,
)
from tests.reliability.conftest import MakeRig
from tests.reliability.support import Rig, auth, chat

COMPLETION = {"id": "c", "object": "chat.completion", "created": 1, "model": "m",
              "choices": [{"index": 0, "message": {"role": "assistant", "content": "zipped"},
                           "finish_reason": "stop"}]}  # fmt: skip
HOP = ("connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
       "upgrade", "proxy-authenticate", "proxy-authorization")  # fmt: skip


class Recorder:
    """An upstream answering by the `X-Scenario` header it receives; `evil` counts requests."""

    def __init__(self) -> None:
        self.seen: list[CIMultiDict[str]] = []
        self.redirect_to = ""

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append(CIMultiDict(request.headers))
        await request.read()
        scenario = request.headers.get("X-Scenario", "")
        if scenario == "redirect":
            raise web.HTTPTemporaryRedirect(self.redirect_to + request.path)
        body = orjson.dumps(COMPLETION)
        headers = CIMultiDict({"Content-Type": "application/json"})
        if scenario == "two-cookies":
            headers.add("Set-Cookie", "a=1; Path=/")
            headers.add("Set-Cookie", "b=2; Path=/")
        if scenario == "gzip":
            body = gzip.compress(body)
            headers["Content-Encoding"] = "gzip"
        if scenario == "hop":
            headers.update({"Connection": "X-Up-Hop", "X-Up-Hop": "1", "Proxy-Up": "1",
                            "Keep-Alive": "timeout=5", "X-Kept": "yes"})  # fmt: skip
        return web.Response(body=body, headers=headers)


@pytest.fixture
async def wired(make_rig: MakeRig, aiohttp_server: Any) -> tuple[Rig, Recorder, Recorder]:
    upstream, evil = Recorder(), Recorder()
    evil_server = await aiohttp_server(evil.app())
    upstream.redirect_to = str(evil_server.make_url("")).rstrip("/")
    rig = await make_rig(upstream_app=upstream.app())
    return rig, upstream, evil


CLIENT_HOP = {
    "Connection": "keep-alive, X-Client-Hop",
    "X-Client-Hop": "secret",
    "Keep-Alive": "timeout=5",
    "TE": "trailers",
    "Trailer": "X-Later",
    "Proxy-Authorization": "Basic Zm9vOmJhcg==",
    "Proxy-Whatever": "1",
    "X-Kept": "yes",
}


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/embeddings", "/v1/models"])
async def test_hop_by_hop_headers_cross_in_neither_direction(
    wired: tuple[Rig, Recorder, Recorder], path: str
) -> None:
    rig, upstream, _ = wired
    headers = {**auth(), **CLIENT_HOP, "X-Scenario": "hop"}
    async with aiohttp.ClientSession() as http:
        method = "GET" if path.endswith("models") else "POST"
        async with http.request(method, rig.url(path), json=chat(), headers=headers) as r:
            assert r.status == 200
            back = r.headers
            await r.read()
    sent = upstream.seen[-1]
    assert sent["X-Kept"] == "yes"
    for name in ("X-Client-Hop", "Keep-Alive", "TE", "Trailer", "Proxy-Authorization",
                 "Proxy-Whatever"):  # fmt: skip
        assert name not in sent, name
    assert "x-client-hop" not in sent.get("Connection", "").lower()
    assert back["X-Kept"] == "yes"
    for name in ("X-Up-Hop", "Proxy-Up", "Keep-Alive"):
        assert name not in back, name


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/models"])
async def test_repeated_headers_reach_the_client_each_one(
    wired: tuple[Rig, Recorder, Recorder], path: str
) -> None:
    rig, _, _ = wired
    headers = {**auth(), "X-Scenario": "two-cookies"}
    async with aiohttp.ClientSession() as http:
        method = "GET" if path.endswith("models") else "POST"
        async with http.request(method, rig.url(path), json=chat(), headers=headers) as r:
            assert r.status == 200
            await r.read()
            assert r.headers.getall("Set-Cookie") == ["a=1; Path=/", "b=2; Path=/"]


async def test_redirects_are_relayed_not_followed(wired: tuple[Rig, Recorder, Recorder]) -> None:
    rig, _, evil = wired
    headers = {**auth("sk-must-not-travel"), "X-Scenario": "redirect"}
    async with aiohttp.ClientSession() as http:
        for method, path in (("POST", "/v1/chat/completions"), ("GET", "/v1/models")):
            async with http.request(
                method, rig.url(path), json=chat(), headers=headers, allow_redirects=False
            ) as r:
                assert r.status == 307
    assert evil.seen == []


async def test_gzip_bodies_are_decoded_exactly_once(wired: tuple[Rig, Recorder, Recorder]) -> None:
    rig, _, _ = wired
    headers = {**auth(), "X-Scenario": "gzip"}
    async with aiohttp.ClientSession(auto_decompress=False) as http:
        async with http.post(rig.url("/v1/chat/completions"), json=chat(), headers=headers) as r:
            assert "Content-Encoding" not in r.headers
            assert orjson.loads(await r.read()) == COMPLETION
        async with http.get(rig.url("/v1/models"), headers=headers) as r:
            assert r.headers["Content-Encoding"] == "gzip"
            assert orjson.loads(gzip.decompress(await r.read())) == COMPLETION
    async with rig.client() as client:
        done = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}],
            extra_headers={"X-Scenario": "gzip"},
        )  # fmt: skip
    assert done.choices[0].message.content == "zipped"


async def test_the_client_cannot_pick_the_upstream(wired: tuple[Rig, Recorder, Recorder]) -> None:
    rig, upstream, evil = wired
    target = upstream.redirect_to
    body = {**chat(), "base_url": target, "api_base": target + "/v1", "api_key": "sk-x"}
    headers = {**auth(), "X-Forwarded-Host": target, "OpenAI-Base-URL": target,
               "X-Upstream": target, "Forwarded": f"host={target}"}  # fmt: skip
    async with aiohttp.ClientSession() as http:
        async with http.post(rig.url("/v1/chat/completions"), json=body, headers=headers) as r:
            assert r.status == 200
        for path in ("/v1/..%2f..%2fx", "/v1/%2F%2F" + target.removeprefix("http://"), "/v1/@x"):
            async with http.get(rig.url(path), headers=auth()) as r:
                assert r.status < 500
    assert evil.seen == []
    assert len(upstream.seen) == 3  # the chat request and two paths; `..%2f` is refused (400)


async def test_an_absolute_form_request_target_does_not_choose_the_host(
    wired: tuple[Rig, Recorder, Recorder],
) -> None:
    rig, upstream, evil = wired
    assert rig.server.port is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", rig.server.port)
    writer.write(
        f"GET {upstream.redirect_to}/v1/models HTTP/1.1\r\nHost: x\r\n"
        "Authorization: Bearer sk-c\r\nConnection: close\r\n\r\n".encode()
    )
    async with asyncio.timeout(5):
        answer = await reader.read()
    writer.close()
    assert int(answer.split(b" ", 2)[1]) < 500
    assert evil.seen == []


names = st.sampled_from([*HOP, "proxy-x", "x-a", "x-b", "authorization", "x-ctx-session",
                         "content-type", "x-request-id", "host", "content-length"])  # fmt: skip
cased = names.flatmap(lambda n: st.sampled_from([n, n.upper(), n.title()]))


@settings(max_examples=300, deadline=None)
@given(
    headers=st.lists(st.tuples(cased, st.sampled_from(["1", "v"])), max_size=12),
    listed=st.lists(st.lists(cased, max_size=3), max_size=3),
)
def test_no_hop_by_hop_or_connection_listed_name_crosses(
    headers: list[tuple[str, str]], listed: list[list[str]]
) -> None:
    given_headers = CIMultiDict(headers)
    for names_ in listed:
        given_headers.add("Connection", ", ".join(names_))
    dropped = {
        n.strip().lower() for v in given_headers.getall("connection", []) for n in v.split(",")
    }
    for out in (
        upstream_request_headers(given_headers, rebuilt_body=True),
        upstream_request_headers(given_headers, rebuilt_body=False),
        client_response_headers(given_headers, decoded_body=True),
    ):
        for name, _ in out.items():
            lower = name.lower()
            assert lower not in HOP and not lower.startswith("proxy-"), name
            assert lower not in dropped, name
    up = upstream_request_headers(given_headers, rebuilt_body=True)
    assert not any(n.lower() in ("authorization", "x-ctx-session", "host") for n, _ in up.items())
    kept = [n for n, _ in headers if n.lower() in ("x-a", "x-b") and n.lower() not in dropped]
    assert sorted(n.lower() for n, _ in up.items() if n.lower() in ("x-a", "x-b")) == sorted(
        n.lower() for n in kept
    )


def test_the_loop_marker_lists_the_proxies_passed_then_this_one() -> None:
    client = CIMultiDict([("X-Ctx-Via", "aa, bb"), ("X-Ctx-Via", "cc"), ("X-Ctx-Session", "s")])
    for rebuilt in (True, False):
        out = upstream_request_headers(client, rebuilt_body=rebuilt, via="dd")
        assert out.getall("X-Ctx-Via") == ["aa, bb, cc, dd"] and "X-Ctx-Session" not in out
    assert "X-Ctx-Via" not in upstream_request_headers(client, rebuilt_body=True)
    assert came_back(client, "bb") and came_back(client, "cc")
    assert not came_back(client, "b") and not came_back(CIMultiDict(), "aa")
