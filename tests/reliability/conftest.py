"""Fixtures of the reliability suite: the proxy in front of any upstream app; a private Redis."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from proxy.config import load_settings
from proxy.server.app import create_app
from tests.fakes.openai_upstream import FakeOpenAI
from tests.redis_server import RedisServer
from tests.reliability.support import UPSTREAM_KEY, Rig
from tests.server.harness import write_config

MakeRig = Callable[..., Awaitable[Rig]]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "soak: long mixed-load run; deselect with -m 'not soak'")


@pytest.fixture
async def make_rig(aiohttp_server: Any, tmp_path: Path) -> MakeRig:
    """`make_rig(fake=..., upstream_app=..., **template values)`; several rigs may share a fake."""
    count = 0

    async def make(
        *,
        fake: FakeOpenAI | None = None,
        upstream_app: web.Application | None = None,
        environ: dict[str, str] | None = None,
        upstream_url: str | None = None,
        upstream_server_kw: dict[str, Any] | None = None,
        **values: Any,
    ) -> Rig:
        nonlocal count
        count += 1
        fake = fake or FakeOpenAI()
        upstream = await aiohttp_server(upstream_app or fake.app(), **(upstream_server_kw or {}))
        here = tmp_path / f"rig{count}"
        here.mkdir()
        url = upstream_url or str(upstream.make_url("")).rstrip("/")
        values.setdefault("store_op_timeout_s", 0.5)  # what the fault suites time against
        config = write_config(here, upstream=url, **values)
        env = {"FAKE_UPSTREAM_KEY": UPSTREAM_KEY, **(environ or {})}
        settings = load_settings(config, environ=env)
        app = create_app(settings)
        server = await aiohttp_server(app)
        return Rig(fake, upstream, server, app, settings, here / "ws")

    return make


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A Redis server of this test alone: it may be stopped, paused or restarted."""
    server = RedisServer()
    server.start()
    yield server
    if server.proc is not None:
        server.resume()
    server.stop()
