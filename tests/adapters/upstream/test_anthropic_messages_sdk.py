"""The official openai SDK, as a user runs it, reading what AnthropicUpstream translates.

A minimal relay stands in for the proxy's handler: it sends through the adapter and copies the
reply (body or stream) to the client as it arrives.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import openai
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from proxy.adapters.upstream.anthropic_messages import AnthropicUpstream
from tests.fakes.anthropic_upstream import FakeAnthropic, overloaded, text, tool_use

ServerFactory = Callable[[web.Application], Awaitable[TestServer]]


@pytest.fixture
def fake() -> FakeAnthropic:
    return FakeAnthropic()


def relay_app(upstream: AnthropicUpstream) -> web.Application:

    async def completions(request: web.Request) -> web.StreamResponse:
        reply = await upstream.send_chat(
            await request.json(), headers=request.headers, api_key=None
        )
        try:
            if reply.stream is None:
                return web.Response(status=reply.status, body=reply.body, headers=reply.headers)
            response = web.StreamResponse(status=reply.status, headers=reply.headers)
            await response.prepare(request)
            async for chunk in reply.stream:
                await response.write(chunk)
            await response.write_eof()
            return response
        finally:
            await reply.release()

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    return app


@pytest.fixture
async def openai_client(
    fake: FakeAnthropic, aiohttp_server: ServerFactory
) -> AsyncIterator[openai.AsyncOpenAI]:
    upstream_server = await aiohttp_server(fake.app())
    base_url = str(upstream_server.make_url("")).rstrip("/")
    async with aiohttp.ClientSession() as session:
        upstream = AnthropicUpstream(session=session, base_url=base_url, api_key=fake.api_key)
        relay = await aiohttp_server(relay_app(upstream))
        url = str(relay.make_url("/v1"))
        async with openai.AsyncOpenAI(base_url=url, api_key="client", max_retries=0) as client:
            yield client


async def test_openai_sdk_reads_translated_tool_calls(
    fake: FakeAnthropic, openai_client: openai.AsyncOpenAI
) -> None:
    fake.script(tool_use(("toolu_1", "get_weather", {"city": "Paris"})))
    completion = await openai_client.chat.completions.create(
        model="claude-sonnet-4-5", messages=[{"role": "user", "content": "Weather?"}]
    )
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls is not None
    function = choice.message.tool_calls[0].function  # type: ignore[union-attr]
    assert (function.name, json.loads(function.arguments)) == ("get_weather", {"city": "Paris"})
    assert completion.usage is not None and completion.usage.prompt_tokens == 12


async def test_openai_sdk_streams_text_and_usage(
    fake: FakeAnthropic, openai_client: openai.AsyncOpenAI
) -> None:
    fake.script(text("Streaming through the proxy works."))
    stream = await openai_client.chat.completions.create(
        model="claude-sonnet-4-5",
        messages=[{"role": "user", "content": "Hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    pieces, usage = [], None
    async for chunk in stream:
        pieces += [c.delta.content or "" for c in chunk.choices]
        usage = chunk.usage or usage
    assert "".join(pieces) == "Streaming through the proxy works."
    assert usage is not None and usage.completion_tokens == 5


async def test_openai_sdk_raises_on_overload(
    fake: FakeAnthropic, openai_client: openai.AsyncOpenAI
) -> None:
    fake.script(overloaded())
    with pytest.raises(openai.APIStatusError) as raised:
        await openai_client.chat.completions.create(
            model="claude-sonnet-4-5", messages=[{"role": "user", "content": "Hi"}]
        )
    assert raised.value.status_code == 529
