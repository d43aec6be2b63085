"""A proxy whose upstream leads back to itself answers 508 instead of calling itself for ever;
a chain of distinct proxies still works. Every request a proxy sends upstream carries the loop
marker `X-Ctx-Via` (the ids of the proxies passed, its own last)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import openai
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from proxy.config import load_settings
from proxy.server.app import create_app
from proxy.server.appkeys import SERVICES
from proxy.settings import Settings
from tests.fakes.openai_upstream import FakeOpenAI
from tests.server.harness import write_config

HI: list[Any] = [{"role": "user", "content": "hi"}]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def start_proxy(aiohttp_server: Any, folder: Path, *, upstream: str, port: int = 0) -> Any:
    """A proxy in `folder` forwarding to `upstream` (a base URL without `/v1`)."""
    return await aiohttp_server(create_app(settings_in(folder, upstream)), port=port or None)


def settings_in(folder: Path, upstream: str) -> Settings:
    folder.mkdir()
    return load_settings(write_config(folder, upstream=upstream), environ={})


def client_of(server: TestServer) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=str(server.make_url("/v1")), api_key="sk-c", max_retries=0)


async def test_a_proxy_whose_upstream_is_itself_answers_508(
    aiohttp_server: Any, tmp_path: Path
) -> None:
    port = free_port()
    proxy = await start_proxy(aiohttp_server, tmp_path / "p", upstream=f"http://localhost:{port}",
                              port=port)  # fmt: skip
    async with client_of(proxy) as client:
        with pytest.raises(openai.APIStatusError) as caught:
            await client.chat.completions.create(model="gpt-4o", messages=HI)
    assert caught.value.status_code == 508
    assert caught.value.body["code"] == "loop_detected"  # type: ignore[index]
    assert "came back to the proxy" in caught.value.message
    async with ClientSession() as http, http.get(proxy.make_url("/v1/models")) as response:
        assert response.status == 508  # the pass-through too
        assert (await response.json())["error"]["code"] == "loop_detected"


async def test_two_proxies_calling_each_other_answer_508(
    aiohttp_server: Any, tmp_path: Path
) -> None:
    port_a, port_b = free_port(), free_port()
    await start_proxy(aiohttp_server, tmp_path / "a", upstream=f"http://127.0.0.1:{port_b}",
                      port=port_a)  # fmt: skip
    b = await start_proxy(aiohttp_server, tmp_path / "b", upstream=f"http://127.0.0.1:{port_a}",
                          port=port_b)  # fmt: skip
    async with client_of(b) as client:
        with pytest.raises(openai.APIStatusError) as caught:
            await client.chat.completions.create(model="gpt-4o", messages=HI)
    assert caught.value.status_code == 508


async def test_a_chain_of_two_distinct_proxies_still_works(
    aiohttp_server: Any, tmp_path: Path
) -> None:
    fake = FakeOpenAI()
    upstream = await aiohttp_server(fake.app())
    first = await start_proxy(aiohttp_server, tmp_path / "a", upstream=_root(upstream))
    second = await start_proxy(aiohttp_server, tmp_path / "b", upstream=_root(first))
    async with client_of(second) as client:
        answer = await client.chat.completions.create(model="gpt-4o", messages=HI)
        await client.models.list()
    assert answer.choices[0].message.content == "Hello from the fake upstream."
    ids = [server.app[SERVICES].instance for server in (second, first)]
    assert fake.chat[-1].headers["X-Ctx-Via"] == ", ".join(ids)
    assert len(set(ids)) == 2


def _root(server: TestServer) -> str:
    return str(server.make_url("")).rstrip("/")
