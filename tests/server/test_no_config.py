"""`ctxproxy serve` with no config: tenant `default`, no workspace, the upstream from
`OPENAI_BASE_URL`, whatever folder it is started from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest

from proxy.config import load_settings
from proxy.server.app import create_app
from tests.fakes.openai_upstream import FakeOpenAI

REPOSITORY = Path(__file__).resolve().parents[2]  # holds config/workspaces/default, the sample


async def test_no_config_from_the_repository_root_sends_the_clients_messages_unchanged(
    aiohttp_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeOpenAI()
    upstream = await aiohttp_server(fake.app())
    monkeypatch.chdir(REPOSITORY)
    environ = {"OPENAI_BASE_URL": str(upstream.make_url("/v1"))}
    proxy = await aiohttp_server(create_app(load_settings(None, environ=environ)))
    messages: list[Any] = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "hi"},
    ]
    client = openai.AsyncOpenAI(
        base_url=str(proxy.make_url("/v1")), api_key="sk-client", max_retries=0
    )
    async with client:
        await client.chat.completions.create(model="gpt-4o", messages=messages)
    assert fake.chat[-1].body["messages"] == messages
    assert fake.chat[-1].headers["Authorization"] == "Bearer sk-client"
