"""Requests aiohttp's HTTP parser refuses get an OpenAI-shaped 400, logged at warning, not error."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from proxy.config import load_settings
from proxy.server.app import create_app
from proxy.server.parser_errors import ProxyRunner
from tests.fakes.openai_upstream import FakeOpenAI
from tests.redis_server import free_port
from tests.reliability.support import assert_openai_error
from tests.server.harness import write_config

BODY = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
NOT_COMPRESSED = b"these bytes were never compressed " * 4
MALFORMED = {
    "header over 8,190 bytes": (b"X-Big: " + b"a" * 9000 + b"\r\n", BODY),
    "NUL in a header": (b"X-Evil: a\x00b\r\n", BODY),
    "control character in a header": (b"X-Evil: a\x01b\r\n", BODY),
    "bare LF": (b"X-Evil: a\nInjected: 1\r\n", BODY),
    "Transfer-Encoding and Content-Length": (b"Transfer-Encoding: chunked\r\n", BODY),
    "undecodable gzip": (b"Content-Encoding: gzip\r\n", NOT_COMPRESSED),
    "undecodable deflate": (b"Content-Encoding: deflate\r\n", NOT_COMPRESSED),
    "unsupported br": (b"Content-Encoding: br\r\n", NOT_COMPRESSED),
}


@pytest.fixture
async def served(aiohttp_server: Any, tmp_path: Path) -> AsyncIterator[tuple[FakeOpenAI, int]]:
    """The proxy as `ctxproxy serve` runs it (`ProxyRunner`); (its fake upstream, its port)."""
    fake = FakeOpenAI()
    upstream = await aiohttp_server(fake.app())
    config = write_config(tmp_path, upstream=str(upstream.make_url("")).rstrip("/"))
    app = create_app(load_settings(config, environ={"FAKE_UPSTREAM_KEY": "sk-up"}))
    runner = ProxyRunner(app, handler_cancellation=True)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    yield fake, port
    await runner.cleanup()


async def exchange(port: int, extra_headers: bytes, body: bytes) -> tuple[int, bytes, bytes]:
    """(status, head, body) of one raw request."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-c\r\n"
        b"Content-Type: application/json\r\nConnection: close\r\n"
        + extra_headers
        + b"Content-Length: %d\r\n\r\n" % len(body)
        + body
    )
    await writer.drain()
    async with asyncio.timeout(5):
        raw = await reader.read()
    writer.close()
    head, _, answer = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), head, answer


@pytest.mark.parametrize("name", list(MALFORMED))
async def test_a_malformed_request_gets_an_openai_shaped_400_logged_at_warning(
    served: tuple[FakeOpenAI, int], caplog: pytest.LogCaptureFixture, name: str
) -> None:
    fake, port = served
    with caplog.at_level(logging.DEBUG):
        status, head, body = await exchange(port, *MALFORMED[name])
        await asyncio.sleep(0.05)  # aiohttp logs a refused body once more after the answer
    assert status == 400, body
    assert b"application/json" in head.lower()
    error = assert_openai_error(body)
    assert b"aaaa" not in body and b"Injected" not in body  # the request's bytes are not echoed
    assert error["type"] == "invalid_request_error"
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert any(r.levelno == logging.WARNING for r in caplog.records)
    assert fake.received == []


async def test_a_plain_runner_still_logs_them_at_warning(
    aiohttp_server: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Whatever runner serves the app (here the tests' own), no error is logged for them."""
    fake = FakeOpenAI()
    upstream = await aiohttp_server(fake.app())
    config = write_config(tmp_path, upstream=str(upstream.make_url("")).rstrip("/"))
    server = await aiohttp_server(
        create_app(load_settings(config, environ={"FAKE_UPSTREAM_KEY": "sk-up"}))
    )
    with caplog.at_level(logging.DEBUG):
        for extra, body in MALFORMED.values():
            status, _, _ = await exchange(server.port, extra, body)
            assert status == 400
        await asyncio.sleep(0.05)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) >= len(MALFORMED)
    assert all("Bearer" not in m and "aaaa" not in m for m in warned)
