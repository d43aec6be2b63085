"""Fixtures for end-to-end tests: a fake upstream and the proxy in front of it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from proxy.config import load_settings
from proxy.server.app import create_app
from tests.fakes.openai_upstream import FakeOpenAI
from tests.server.harness import Proxy, write_config

MakeProxy = Callable[..., Awaitable[Proxy]]


@pytest.fixture
async def make_proxy(aiohttp_server: Any, tmp_path: Path) -> MakeProxy:
    async def make(
        *, workspace: bool = True, fake: FakeOpenAI | None = None, **values: Any
    ) -> Proxy:
        fake = fake or FakeOpenAI()
        upstream = await aiohttp_server(fake.app())
        config = write_config(
            tmp_path, upstream=str(upstream.make_url("")).rstrip("/"), workspace=workspace, **values
        )
        settings = load_settings(config, environ={"FAKE_UPSTREAM_KEY": "sk-upstream-secret"})
        app = create_app(settings)
        server = await aiohttp_server(app)  # TestServer cancels handlers on disconnect
        return Proxy(
            fake=fake, server=server, app=app, settings=settings, workspace=tmp_path / "ws"
        )

    return make


@pytest.fixture
async def proxy(make_proxy: MakeProxy) -> Proxy:
    return await make_proxy()
