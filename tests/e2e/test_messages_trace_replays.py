"""The real agent sessions of ../shared/traces/ through `/v1/messages`, turn by turn, next to the
same sessions through `/v1/chat/completions`.

Each replayed request is a trace's history up to one of its assistant turns (at most
`MAX_REQUESTS` per trace, evenly spaced, the last always), as a chat body for the chat route and,
converted to the Messages API (`proxy.translate.anthropic_request`, as a Messages client would
have sent it), for the Messages route. Both upstreams report the prompt they received (characters
/ 4) as its usage and answer the proxy's summarizer calls, so compaction triggers on both routes
alike (threshold 20,000 tokens, the example workspace). Every request the Anthropic upstream
receives must be one the Messages API accepts, and the share of the client's prompt the proxy
saves on the Messages route must be within a few points of what it saves on the chat route.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from openai.types.chat import ChatCompletion

from proxy.translate.anthropic_request import to_messages_request
from tests.e2e.agent import settled
from tests.e2e.test_trace_replays import replayed_turns
from tests.fakes.openai_upstream import estimate_prompt_tokens
from tests.inbound.builders import wire_problem
from tests.server.conftest import MakeProxy
from tests.server.messages_support import MakeMessagesProxy, make_messages_proxy
from tests.traces import TRACE_FILES

__all__ = ["make_messages_proxy"]  # the fixture, imported for pytest

MAX_REQUESTS = 16
COMPACT = "[tenants.default.compact]\nthreshold_tokens = 20000\n"
SUMMARY = "<analysis>read</analysis><summary>The agent read files and ran commands.</summary>"

pytestmark = pytest.mark.skipif(not TRACE_FILES, reason="../shared/traces is not available")


def prompt_chars(body: dict[str, Any]) -> int:
    """Characters of a Messages request's prompt: its system and messages as JSON."""
    return len(orjson.dumps([body.get("system"), body["messages"]]))


async def chat_savings(make_proxy: MakeProxy, trace: dict[str, Any]) -> float:
    proxy = await make_proxy(tenant_extra=COMPACT)
    tools = {"tools": trace["tools"]} if trace.get("tools") else {}
    sent = kept = 0
    async with proxy.client(default_headers={"X-Ctx-Session": "replay"}) as client:
        for turn in replayed_turns(trace["messages"], limit=MAX_REQUESTS):
            body = {"model": "claude-x", "messages": trace["messages"][:turn], **tools}
            await client.post("/chat/completions", cast_to=ChatCompletion, body=body)
            await settled(proxy.app)
            sent += estimate_prompt_tokens(body)
            kept += estimate_prompt_tokens(proxy.fake.chat[-1].body)
    return 1 - kept / sent


async def messages_savings(make_messages_proxy: MakeMessagesProxy, trace: dict[str, Any]) -> float:
    proxy = await make_messages_proxy(workspace=True, tenant_extra=COMPACT)
    proxy.fake.measure_usage = True
    proxy.fake.summary_text = SUMMARY
    tools = {"tools": trace["tools"]} if trace.get("tools") else {}
    sent = kept = 0
    headers = {"x-api-key": "k", "X-Ctx-Session": "replay"}
    async with aiohttp.ClientSession() as http:
        for turn in replayed_turns(trace["messages"], limit=MAX_REQUESTS):
            chat_body = {"model": "claude-x", "messages": trace["messages"][:turn], **tools}
            body = to_messages_request(chat_body)
            url = proxy.base_url + "/v1/messages"
            async with http.post(url, json=body, headers=headers) as got:
                assert got.status == 200, f"turn {turn}: {(await got.read())[:300]!r}"
            await settled(proxy.app)
            received = proxy.fake.received[-1].body
            assert wire_problem(received) is None, f"turn {turn}"
            sent, kept = sent + prompt_chars(body), kept + prompt_chars(received)
    for summary in proxy.fake.summary_requests:
        assert wire_problem(summary.body) is None
    return 1 - kept / sent


@pytest.mark.parametrize("path", TRACE_FILES, ids=lambda p: p.stem)
async def test_a_trace_through_the_messages_route_is_valid_and_saves_as_the_chat_route(
    make_proxy: MakeProxy, make_messages_proxy: MakeMessagesProxy, path: Path
) -> None:
    trace = json.loads(path.read_bytes())  # noqa: ASYNC240 (a local file, read once)
    chat = await chat_savings(make_proxy, trace)
    messages = await messages_savings(make_messages_proxy, trace)
    print(f"{path.stem}: Messages route saves {messages:.1%}, chat route {chat:.1%}")
    assert abs(messages - chat) < 0.05
