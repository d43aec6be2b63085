"""`serve`: the socket is bound before "serving on" is said; on stop, the requests in flight are
counted, drained and answered, then "stopped"."""

from __future__ import annotations

import asyncio
import logging
import socket
from pathlib import Path
from typing import Any

import openai
import pytest

from proxy.config import load_settings
from proxy.server.app import create_app
from proxy.server.appkeys import LIFECYCLE
from proxy.server.runner import bound_url, serve
from tests.fakes.openai_upstream import FakeOpenAI, Reply
from tests.server.harness import write_config


async def test_stop_drains_the_request_in_flight_and_says_so(
    aiohttp_server: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="proxy")
    fake = FakeOpenAI()
    fake.default = Reply(first_byte_delay_s=0.3)
    upstream = await aiohttp_server(fake.app())
    config = write_config(tmp_path, upstream=str(upstream.make_url("")).rstrip("/"))
    app = create_app(load_settings(config, environ={"FAKE_UPSTREAM_KEY": "sk-up"}))
    urls: list[str] = []
    bound, stop = asyncio.Event(), asyncio.Event()

    def on_serving(url: str) -> None:
        urls.append(url)
        bound.set()

    serving = asyncio.create_task(
        serve(app, host="127.0.0.1", port=0, drain_s=5, on_serving=on_serving, stop=stop)
    )
    await asyncio.wait_for(bound.wait(), 10)
    client = openai.AsyncOpenAI(base_url=f"{urls[0]}/v1", api_key="k", max_retries=0)
    async with client:
        asking = asyncio.create_task(
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        )
        for _ in range(500):
            if app[LIFECYCLE].in_flight:
                break
            await asyncio.sleep(0.01)
        stop.set()
        completion = await asking
    await asyncio.wait_for(serving, 10)
    assert completion.choices[0].message.content == "Hello from the fake upstream."
    said = [r.getMessage() for r in caplog.records if r.name == "proxy"]
    assert said == ["shutting down (draining 1 requests, at most 5s)…", "stopped"]
    assert app[LIFECYCLE].in_flight == 0


async def test_a_port_in_use_raises_before_anything_is_said(
    aiohttp_server: Any, tmp_path: Path
) -> None:
    fake = FakeOpenAI()
    upstream = await aiohttp_server(fake.app())
    config = write_config(tmp_path, upstream=str(upstream.make_url("")).rstrip("/"))
    app = create_app(load_settings(config, environ={}))
    said: list[str] = []
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError):
            await serve(app, host="127.0.0.1", port=port, drain_s=1, on_serving=said.append)
    assert said == []


def test_bound_urls_bracket_ipv6_hosts() -> None:
    assert bound_url(("127.0.0.1", 8787)) == "http://127.0.0.1:8787"
    assert bound_url(("::1", 8787, 0, 0)) == "http://[::1]:8787"
