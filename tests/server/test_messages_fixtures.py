"""Claude Code's recorded requests (tests/fixtures/claude_code) replayed through `/v1/messages`
against both fake upstreams, and any Messages body the pipeline leaves alone: it reaches an
Anthropic upstream exactly as the client sent it."""

from __future__ import annotations

import copy
from typing import Any

import aiohttp
import pytest
from hypothesis import HealthCheck, given, settings

from tests.inbound.builders import chat_problem, fixture, fixture_names, marker_count, wire_problem
from tests.inbound.strategies import bodies
from tests.inbound.test_through_stages import unmarked
from tests.server.messages_support import MakeMessagesProxy, MessagesProxy, make_messages_proxy

__all__ = ["make_messages_proxy"]  # the fixture, imported for pytest

UNKNOWN_BLOCKS = "server_tools_citations"
"""Holds a block type nobody knows yet: carried faithfully, refused by the (fake) API."""


async def replay(proxy: MessagesProxy, name: str) -> tuple[int, bytes]:
    recorded = fixture(name)
    headers = {k: v for k, v in recorded["headers"].items() if k != "content-type"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(proxy.base_url + recorded["path"], json=recorded["body"], headers=headers) as got,
    ):
        return got.status, await got.read()


@pytest.mark.parametrize("name", fixture_names())
async def test_a_recorded_request_reaches_anthropic_as_sent_but_for_markers_of_ours(
    make_messages_proxy: MakeMessagesProxy, name: str
) -> None:
    proxy = await make_messages_proxy(forward_client_key=True)
    recorded = fixture(name)
    key = recorded["headers"].get("x-api-key") or recorded["headers"]["authorization"][7:]
    proxy.fake.api_key = key
    status, answer = await replay(proxy, name)
    received = proxy.fake.received[-1]
    sent = recorded["body"]
    assert unmarked(received.body) == unmarked(sent)
    assert marker_count(sent) <= marker_count(received.body) <= 4
    assert received.path == recorded["path"].split("?")[0]
    assert received.headers.get("anthropic-beta") == recorded["headers"].get("anthropic-beta")
    if name != UNKNOWN_BLOCKS:
        assert status == 200, answer[:300]
        assert wire_problem(received.body) is None


@pytest.mark.parametrize("name", [n for n in fixture_names() if n != UNKNOWN_BLOCKS])
async def test_a_recorded_request_is_a_valid_chat_request_for_an_openai_upstream(
    make_messages_proxy: MakeMessagesProxy, name: str
) -> None:
    proxy = await make_messages_proxy(kind="openai")
    status, answer = await replay(proxy, name)
    assert status == 200, answer[:300]
    if name == "count_tokens":
        assert proxy.fake.received == [] and b'"input_tokens"' in answer
        return
    assert chat_problem(proxy.sent) is None
    assert len(proxy.sent["messages"]) >= len(fixture(name)["body"]["messages"])


@pytest.fixture
async def quiet_proxy(make_messages_proxy: MakeMessagesProxy) -> MessagesProxy:
    """No workspace, no markers of ours: a short body is one the pipeline leaves alone."""
    return await make_messages_proxy(cache_style="none")


@settings(
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(sent=bodies())
async def test_a_body_the_pipeline_leaves_alone_reaches_the_upstream_as_the_client_sent_it(
    quiet_proxy: MessagesProxy, sent: dict[str, Any]
) -> None:
    kept = copy.deepcopy(sent)
    async with (
        aiohttp.ClientSession() as http,
        http.post(quiet_proxy.base_url + "/v1/messages", json=sent, headers={"x-api-key": "k"}),
    ):
        pass
    assert quiet_proxy.fake.received[-1].body == kept
