"""ctxproxy in process in front of either fake upstream, driven by the official `anthropic` SDK
as a Messages client (`POST /v1/messages`).

`make_messages_proxy(kind="anthropic")` puts it in front of the fake Anthropic API (the
upstream's own key; the client's is a proxy key), `kind="openai"` in front of the fake OpenAI API.
Import the fixture into a test module to use it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anthropic
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from proxy.config import load_settings
from proxy.server.app import create_app
from proxy.settings import Settings
from tests.e2e.agent import settled
from tests.fakes.anthropic_upstream import FakeAnthropic
from tests.fakes.openai_upstream import FakeOpenAI
from tests.server.harness import write_config

UPSTREAM_KEY = "sk-ant-upstream"
CLIENT_KEY = "sk-client"
MODEL = "claude-sonnet-4-5"


@dataclass
class MessagesProxy:
    fake: Any
    """`FakeAnthropic` or `FakeOpenAI`, as `kind` says."""
    server: TestServer
    app: web.Application
    settings: Settings
    workspace: Path

    @property
    def base_url(self) -> str:
        return str(self.server.make_url("")).rstrip("/")

    def client(self, api_key: str = CLIENT_KEY, **kw: Any) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(
            base_url=self.base_url, api_key=api_key, max_retries=0, **kw
        )

    def sync_client(self, api_key: str = CLIENT_KEY, **kw: Any) -> anthropic.Anthropic:
        return anthropic.Anthropic(base_url=self.base_url, api_key=api_key, max_retries=0, **kw)

    @property
    def sent(self) -> dict[str, Any]:
        """The body of the last (non-summarizer) request the upstream received."""
        if isinstance(self.fake, FakeOpenAI):
            return self.fake.chat[-1].body
        received: dict[str, Any] = self.fake.received[-1].body
        return received


MakeMessagesProxy = Callable[..., Awaitable[MessagesProxy]]


@pytest.fixture
async def make_messages_proxy(aiohttp_server: Any, tmp_path: Path) -> MakeMessagesProxy:
    async def make(
        *,
        kind: Literal["anthropic", "openai"] = "anthropic",
        tenant_extra: str = "",
        workspace: bool = False,
        forward_client_key: bool = False,
        fake: Any = None,
        upstream_extra: str = "",
        **values: Any,
    ) -> MessagesProxy:
        """`workspace`: the example workspace (bootstrap adds to the system) or an empty one;
        `forward_client_key`: to the Anthropic upstream (else its own key is used); `fake`: a
        fake upstream of `kind` to use instead of a new one; `upstream_extra`: lines for the
        upstream's table."""
        if fake is None:
            fake = FakeAnthropic(api_key=UPSTREAM_KEY) if kind == "anthropic" else FakeOpenAI()
        upstream = await aiohttp_server(fake.app())
        if kind == "anthropic":
            values = {"upstream_kind": "anthropic", "upstream_path": "", **values}
            values.setdefault("cache_style", "anthropic")
            forward = "true" if forward_client_key else "false"
            tenant_extra = f"forward_client_key = {forward}\n" + tenant_extra
        config = write_config(
            tmp_path,
            upstream=str(upstream.make_url("")).rstrip("/"),
            workspace=workspace,
            tenant_extra=tenant_extra,
            **values,
        )
        if upstream_extra:
            text = config.read_text(encoding="utf-8")
            extra = f"{upstream_extra}\n[tenants.default]"
            config.write_text(text.replace("[tenants.default]", extra), encoding="utf-8")
        settings = load_settings(config, environ={"FAKE_UPSTREAM_KEY": UPSTREAM_KEY})
        app = create_app(settings)
        server = await aiohttp_server(app)
        return MessagesProxy(fake, server, app, settings, tmp_path / "ws")

    return make


@dataclass
class MessagesAgent:
    """A Messages client that resends its full history on every turn, as Claude Code does."""

    client: anthropic.AsyncAnthropic
    app: web.Application
    system: Any = None
    model: str = MODEL
    history: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    def add(self, *messages: dict[str, Any]) -> None:
        self.history.extend(messages)

    async def turn(self, **extra: Any) -> Any:
        """Send the history, append the answer (blocks as the SDK dumps them), wait for the
        proxy's bookkeeping; the answer."""
        system = {"system": self.system} if self.system is not None else {}
        raw = await self.client.messages.with_raw_response.create(
            model=self.model, max_tokens=extra.pop("max_tokens", 1024),
            messages=self.history, **system, **extra,
        )  # fmt: skip
        self.headers.append(dict(raw.headers))
        answer = await raw.parse()
        self.history.append({"role": "assistant", "content": blocks_of(answer)})
        await settled(self.app)
        return answer

    def header(self, name: str, request: int = -1) -> str:
        return self.headers[request][name.lower()]


def blocks_of(message: Any) -> list[dict[str, Any]]:
    """A message's content blocks as a client sends them back (no `None` fields)."""
    return [block.model_dump(exclude_none=True) for block in message.content]
