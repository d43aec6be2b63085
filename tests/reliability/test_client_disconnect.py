"""A client that goes away: the upstream request is closed within a second, nothing leaks."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from proxy.config import load_settings
from proxy.server.app import create_app
from proxy.server.appkeys import LIFECYCLE, STORE
from proxy.server.observe.metrics import METRICS
from tests.fakes.openai_upstream import FakeOpenAI, Reply
from tests.redis_server import free_port
from tests.reliability.conftest import MakeRig
from tests.reliability.slowfake import SlowSummaryFake
from tests.reliability.support import (
    COMPACT_AT_1000,
    UPSTREAM_KEY,
    Rig,
    auth,
    chat,
    current_tasks,
    history,
    post_json,
    wait_until,
)
from tests.server.harness import write_config
from tests.server.observe.test_metrics import rendered, value

LEAVERS = 60


async def _baseline(rig: Rig) -> tuple[int, int]:
    """Warm the pool with one whole request; (tasks, upstream connections) at rest."""
    async with aiohttp.ClientSession() as http:
        await post_json(http, rig.url("/v1/chat/completions"), chat())
    await rig.settled()
    await asyncio.sleep(0.05)
    return len(current_tasks()), rig.upstream_connections()


async def _back_to_baseline(rig: Rig, baseline: tuple[int, int]) -> None:
    tasks, connections = baseline
    await rig.settled()
    await wait_until(lambda: len(current_tasks()) <= tasks, within=2)
    await wait_until(lambda: rig.upstream_connections() <= connections, within=2)


async def test_disconnect_mid_stream_closes_the_upstream_within_a_second(
    make_rig: MakeRig,
) -> None:
    rig = await make_rig()
    baseline = await _baseline(rig)
    rig.fake.default = Reply(content="abcdefghij", chunks=10, chunk_delay_s=0.3)
    http = aiohttp.ClientSession()
    response = await http.post(
        rig.url("/v1/chat/completions"), json=chat(stream=True), headers=auth()
    )
    await response.content.readuntil(b"\n\n")
    response.close()
    await http.close()
    gone = time.monotonic()
    await wait_until(lambda: rig.fake.cancelled, within=1)
    assert rig.fake.cancelled[0] - gone < 1
    await _back_to_baseline(rig, baseline)


@pytest.mark.parametrize("stream", [True, False])
async def test_disconnect_before_the_first_byte_closes_the_upstream_within_a_second(
    make_rig: MakeRig, stream: bool
) -> None:
    rig = await make_rig()
    baseline = await _baseline(rig)
    rig.fake.default = Reply(first_byte_delay_s=5)
    async with aiohttp.ClientSession() as http:
        call = asyncio.create_task(
            post_json(http, rig.url("/v1/chat/completions"), chat(stream=stream))
        )
        await wait_until(lambda: len(rig.fake.chat) == 2, within=2)
        call.cancel()
        gone = time.monotonic()
        with pytest.raises(asyncio.CancelledError):
            await call
    await wait_until(lambda: rig.fake.cancelled, within=1)
    assert rig.fake.cancelled[0] - gone < 1
    await _back_to_baseline(rig, baseline)


async def test_disconnect_during_a_sync_compaction_stores_no_summary(make_rig: MakeRig) -> None:
    fake = SlowSummaryFake(summary_delay_s=5)
    rig = await make_rig(fake=fake, tenant_extra=COMPACT_AT_1000)
    messages = history(6)
    headers = {**auth(), "X-Ctx-Session": "compact-me"}
    fake.script.append(Reply(prompt_tokens=5000))
    async with aiohttp.ClientSession() as http:
        body = {"model": "gpt-4o", "messages": messages}
        async with http.post(rig.url("/v1/chat/completions"), json=body, headers=headers) as r:
            assert r.status == 200
        await rig.settled()
        again = {"model": "gpt-4o", "messages": [*messages, {"role": "user", "content": "more"}]}
        call = asyncio.create_task(
            http.post(rig.url("/v1/chat/completions"), json=again, headers=headers)
        )
        await wait_until(lambda: fake.summary_started, within=2)
        call.cancel()
        gone = time.monotonic()
        with pytest.raises(asyncio.CancelledError):
            await call
    await wait_until(lambda: fake.summary_cancelled, within=1)
    assert fake.summary_cancelled[0] - gone < 1
    await rig.settled()
    detail = await rig.app[STORE].session_detail("default", "compact-me")
    assert detail is not None and detail["compactions"] == []
    assert len(fake.chat) == 1, "the cancelled request never reached the upstream"


@contextlib.asynccontextmanager
async def _served(
    aiohttp_server: Any, tmp_path: Path, upstream_app: web.Application, *, cancellation: bool
) -> AsyncIterator[tuple[web.Application, str]]:
    """The proxy in front of `upstream_app`, served with or without aiohttp's handler
    cancellation (`ctxproxy serve` runs with it); (the app, its base URL)."""
    upstream = await aiohttp_server(upstream_app)
    config = write_config(tmp_path, upstream=str(upstream.make_url("")).rstrip("/"))
    app = create_app(load_settings(config, environ={"FAKE_UPSTREAM_KEY": UPSTREAM_KEY}))
    runner = web.AppRunner(app, handler_cancellation=cancellation)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield app, f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def _counted(app: web.Application, route: str, status: str) -> float:
    samples = rendered(app[METRICS])
    return value(samples, "ctxproxy_http_requests_total", tenant="default", route=route,
                 status=status)  # fmt: skip


async def _leave_after_the_first_bytes(
    url: str, *, until: bytes, session: str, method: str = "POST"
) -> None:
    headers = {**auth(), "X-Ctx-Session": session}
    body = chat(stream=True) if method == "POST" else None
    async with aiohttp.ClientSession() as http:
        response = await http.request(method, url, json=body, headers=headers)
        await response.content.readuntil(until)
        response.close()


@pytest.mark.parametrize("cancellation", [True, False])
async def test_clients_leaving_mid_stream_are_499s_not_500s_nor_upstream_cuts(
    aiohttp_server: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture, cancellation: bool
) -> None:
    """Each client reads the first event of a long stream and goes."""
    fake = FakeOpenAI()
    fake.default = Reply(content="x" * 40, chunks=40, chunk_delay_s=0.05)
    route = "/v1/chat/completions"
    async with _served(aiohttp_server, tmp_path, fake.app(), cancellation=cancellation) as (
        app,
        base,
    ):
        with caplog.at_level(logging.DEBUG):
            await asyncio.gather(
                *(
                    _leave_after_the_first_bytes(base + route, until=b"\n\n", session=f"s{i}")
                    for i in range(LEAVERS)
                )
            )
            statuses = ("200", "499", "500")
            await wait_until(
                lambda: sum(_counted(app, route, s) for s in statuses) == LEAVERS, within=5
            )
            while tasks := list(app[LIFECYCLE].tasks):
                await asyncio.gather(*tasks)
        assert [_counted(app, route, s) for s in statuses] == [0, LEAVERS, 0]
        samples = rendered(app[METRICS])
        assert value(samples, "ctxproxy_stream_interrupted_total", tenant="default") == 0
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
        sessions = await app[STORE].list_sessions("default", limit=1000)
        assert len(sessions) == LEAVERS and {s["requests"] for s in sessions} == {"1"}
        assert all("last_prompt_tokens" not in s for s in sessions)


async def _slow_body(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
    await response.prepare(request)
    for _ in range(40):
        await response.write(b"x" * 100 + b"\n")
        await asyncio.sleep(0.05)
    if request.path.endswith("/cut"):
        assert request.transport is not None
        request.transport.close()
        return response
    await response.write_eof()
    return response


async def test_a_pass_through_client_that_leaves_is_a_499_not_a_500(
    aiohttp_server: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    upstream = web.Application()
    upstream.router.add_get("/v1/files/slow", _slow_body)
    async with _served(aiohttp_server, tmp_path, upstream, cancellation=False) as (app, base):
        with caplog.at_level(logging.DEBUG):
            await _leave_after_the_first_bytes(
                base + "/v1/files/slow", until=b"\n", session="p", method="GET"
            )
            await wait_until(lambda: _counted(app, "/v1/{tail}", "499") == 1, within=5)
        assert _counted(app, "/v1/{tail}", "500") == 0
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_a_pass_through_body_the_upstream_cuts_never_ends_cleanly(
    aiohttp_server: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    upstream = web.Application()
    upstream.router.add_get("/v1/files/cut", _slow_body)
    async with (
        _served(aiohttp_server, tmp_path, upstream, cancellation=True) as (_app, base),
        aiohttp.ClientSession() as http,
        http.get(base + "/v1/files/cut", headers=auth()) as response,
    ):
        with pytest.raises(aiohttp.ClientPayloadError):
            await response.read()
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert messages == ["pass-through upstream body cut: ClientPayloadError"]
