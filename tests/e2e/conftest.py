"""End-to-end fixtures: the proxy in process in front of fake upstreams.

`make_proxy` (from tests/server) puts it in front of the fake OpenAI API; `make_anthropic_proxy`
in front of the fake Anthropic Messages API (`kind = "anthropic"`, `cache_style = "anthropic"`,
`forward_client_key = false` so the upstream's own key is used, as with a real Anthropic key).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from proxy.adapters.workspace import FileWorkspace
from proxy.config import load_settings
from proxy.server.app import Ports, create_app
from proxy.server.factories import workspaces_of
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.server.conftest import make_proxy as make_proxy
from tests.server.harness import write_config

UPSTREAM_KEY = "sk-ant-upstream"


@pytest.fixture(params=["memory", "redis"])
def store(request: pytest.FixtureRequest) -> dict[str, str]:
    """`make_proxy` settings for each store: the embedded one, and a real Redis server."""
    if request.param == "memory":
        return {}
    server = request.getfixturevalue("redis_server")
    # These tests are about what a session becomes, not store latency: at the harness's 0.5 s a
    # slow reply under a loaded run opens the breaker, the turn goes degraded and a compaction
    # the test expects does not happen (seen once in a full run).
    return {
        "store_url": server.url,
        "key_prefix": request.getfixturevalue("key_prefix"),
        "store_op_timeout_s": "5.0",
    }


@dataclass
class AnthropicProxy:
    fake: FakeAnthropic
    server: TestServer
    app: web.Application
    workspace: Path

    def client(self, **kw: Any) -> openai.AsyncOpenAI:
        base_url = str(self.server.make_url("/v1"))
        return openai.AsyncOpenAI(base_url=base_url, api_key="sk-client", max_retries=0, **kw)


MakeAnthropicProxy = Callable[..., Awaitable[AnthropicProxy]]


@pytest.fixture
async def make_anthropic_proxy(aiohttp_server: Any, tmp_path: Path) -> MakeAnthropicProxy:
    async def make(
        *,
        tenant_extra: str = "",
        workspace_clock: Callable[[], float] | None = None,
        **values: Any,
    ) -> AnthropicProxy:
        """`workspace_clock`: the clock of the workspace's once-a-second file checks."""
        fake = FakeAnthropic(api_key=UPSTREAM_KEY)
        upstream = await aiohttp_server(fake.app())
        config = write_config(
            tmp_path,
            upstream=str(upstream.make_url("")).rstrip("/"),
            upstream_kind="anthropic",
            upstream_path="",
            cache_style="anthropic",
            tenant_extra="forward_client_key = false\n" + tenant_extra,
            **values,
        )
        settings = load_settings(config, environ={"FAKE_UPSTREAM_KEY": UPSTREAM_KEY})
        ports = None
        if workspace_clock is not None:
            workspaces = workspaces_of(settings)
            ports = Ports(workspace=FileWorkspace(workspaces=workspaces, clock=workspace_clock))
        app = create_app(settings, ports)
        server = await aiohttp_server(app)
        return AnthropicProxy(fake=fake, server=server, app=app, workspace=tmp_path / "ws")

    return make
