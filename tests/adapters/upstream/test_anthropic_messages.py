"""AnthropicUpstream against the fake Anthropic API (a real aiohttp server)."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from proxy.adapters.upstream.anthropic_messages import AnthropicUpstream
from proxy.adapters.upstream.transport import Timeouts
from proxy.errors import UpstreamTimeout, UpstreamUnreachable
from proxy.ports import UpstreamReply
from proxy.sse import SSEDecoder
from tests.factories import assistant, call, tool, user
from tests.fakes.anthropic_upstream import (
    FakeAnthropic,
    Reply,
    overloaded,
    rate_limited,
    text,
    tool_use,
)
from tests.redis_server import free_port

ServerFactory = Callable[[web.Application], Awaitable[TestServer]]


@dataclass
class Harness:
    fake: FakeAnthropic
    base_url: str
    session: aiohttp.ClientSession

    def upstream(self, **kw: Any) -> AnthropicUpstream:
        return AnthropicUpstream(
            session=self.session, base_url=self.base_url, **{"api_key": "sk-ant-test", **kw}
        )


@pytest.fixture
async def harness(aiohttp_server: ServerFactory) -> AsyncIterator[Harness]:
    fake = FakeAnthropic()
    server = await aiohttp_server(fake.app())
    async with aiohttp.ClientSession() as session:
        yield Harness(fake, str(server.make_url("")).rstrip("/"), session)


def chat(*messages: dict[str, Any], **body: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "messages": list(messages) or [user("Hi")], **body}


async def send(
    upstream: AnthropicUpstream, body: dict[str, Any], headers: dict[str, str] | None = None
) -> UpstreamReply:
    return await upstream.send_chat(body, headers=headers or {}, api_key=None)


async def drain(reply: UpstreamReply) -> list[str]:
    """The `data:` payloads of a streamed reply (its connection released afterwards)."""
    assert reply.stream is not None and reply.body is None
    try:
        raw = b"".join([chunk async for chunk in reply.stream])
    finally:
        await reply.release()
    return [event.data for event in SSEDecoder().feed(raw)]


async def test_non_streamed_answer_is_a_chat_completion(harness: Harness) -> None:
    reply = await send(harness.upstream(), chat(n=1, temperature=0.2))
    assert reply.status == 200 and reply.stream is None and reply.body is not None
    assert reply.headers["content-type"] == "application/json"
    assert reply.headers["x-request-id"] == "req_fake"
    completion = json.loads(reply.body)
    assert completion["choices"][0]["message"]["content"] == "Hello!"
    assert completion["model"] == "claude-sonnet-4-5"
    received = harness.fake.received[0]
    assert received.headers["x-api-key"] == "sk-ant-test"
    assert received.headers["anthropic-version"] == "2023-06-01"
    assert received.body == {
        "model": "claude-sonnet-4-5",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
        "max_tokens": 4096,
    }
    assert reply.sent_bytes == len(orjson.dumps(received.body))  # the translated body's size


async def test_client_anthropic_headers_pass_through_and_credentials_do_not(
    harness: Harness,
) -> None:
    headers = {
        "Anthropic-Beta": "context-1m-2025-08-07",
        "anthropic-version": "2023-01-01",
        "Authorization": "Bearer client-token",
        "OpenAI-Organization": "org-1",
    }
    await send(harness.upstream(), chat(), headers)
    received = harness.fake.received[0].headers
    assert received["anthropic-beta"] == "context-1m-2025-08-07"
    assert received["anthropic-version"] == "2023-01-01"
    assert "authorization" not in received and "openai-organization" not in received


async def test_without_a_configured_key_the_clients_key_is_sent(harness: Harness) -> None:
    upstream = harness.upstream(api_key=None)
    ok = await upstream.send_chat(chat(), headers={}, api_key="sk-ant-test")
    assert ok.status == 200
    denied = await upstream.send_chat(chat(), headers={}, api_key="sk-wrong")
    assert denied.status == 401 and denied.body is not None
    assert json.loads(denied.body)["error"]["type"] == "authentication_error"


async def test_streamed_tool_calls_with_usage(harness: Harness) -> None:
    harness.fake.script(
        tool_use(("toolu_1", "ls", {"path": "/"}), ("toolu_2", "cat", {"f": "a"}), lead="On it.")
    )
    reply = await send(
        harness.upstream(), chat(stream=True, stream_options={"include_usage": True})
    )
    assert reply.status == 200 and reply.headers["content-type"] == "text/event-stream"
    payloads = await drain(reply)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    calls = [
        c
        for chunk in chunks
        if chunk["choices"]
        for c in chunk["choices"][0]["delta"].get("tool_calls") or []
    ]
    arguments = [
        "".join(c["function"]["arguments"] for c in calls if c["index"] == i) for i in (0, 1)
    ]
    assert [json.loads(a) for a in arguments] == [{"path": "/"}, {"f": "a"}]
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["usage"]["prompt_tokens"] == 12
    assert harness.fake.received[0].body["stream"] is True
    assert "stream_options" not in harness.fake.received[0].body


async def test_a_request_the_api_rejects_comes_back_as_an_openai_error(harness: Harness) -> None:
    unanswered = chat(user("go"), assistant(None, call("toolu_9")), user("and?"))
    reply = await send(harness.upstream(), unanswered)
    assert reply.status == 400 and reply.body is not None
    error = json.loads(reply.body)["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith(
        "messages.1: `tool_use` ids were found without `tool_result` blocks"
    )
    answered = chat(
        user("go"), assistant(None, call("toolu_9")), tool("toolu_9", "ok"), user("and?")
    )
    assert (await send(harness.upstream(), answered)).status == 200


@pytest.mark.parametrize("stream", [False, True])
async def test_overloaded_stays_529(harness: Harness, stream: bool) -> None:
    harness.fake.script(overloaded())
    reply = await send(harness.upstream(), chat(stream=stream))
    assert (reply.status, reply.stream) == (529, None)
    assert reply.body is not None
    assert json.loads(reply.body)["error"] == {
        "message": "Overloaded",
        "type": "overloaded_error",
        "param": None,
        "code": "overloaded",
    }


async def test_rate_limit_keeps_retry_after(harness: Harness) -> None:
    harness.fake.script(rate_limited("7"))
    reply = await send(harness.upstream(), chat())
    assert reply.status == 429 and reply.headers["retry-after"] == "7"


async def test_error_event_mid_stream_ends_with_an_in_band_error(harness: Harness) -> None:
    harness.fake.script(
        Reply(
            content=({"type": "text", "text": "partial"}, {"type": "text", "text": "x"}),
            error_after=1,
        )
    )
    payloads = await drain(await send(harness.upstream(), chat(stream=True)))
    assert "[DONE]" not in payloads
    assert json.loads(payloads[-1])["error"]["type"] == "overloaded_error"
    assert (
        "".join(json.loads(p)["choices"][0]["delta"].get("content") or "" for p in payloads[:-1])
        == "partial"
    )


async def test_an_idle_gap_ends_the_stream_with_an_in_band_error(harness: Harness) -> None:
    harness.fake.script(text("slow", stall_s=2.0))
    payloads = await drain(
        await send(harness.upstream(timeouts=Timeouts(idle_s=0.2)), chat(stream=True))
    )
    assert json.loads(payloads[-1])["error"]["code"] == "upstream_timeout"


async def test_no_first_byte_in_time_raises_upstream_timeout(harness: Harness) -> None:
    harness.fake.script(text("late", delay_s=2.0), text("late", delay_s=2.0))
    with pytest.raises(UpstreamTimeout):
        await send(harness.upstream(timeouts=Timeouts(first_byte_s=0.2)), chat(stream=True))
    with pytest.raises(UpstreamTimeout):
        await send(harness.upstream(timeouts=Timeouts(total_s=0.2)), chat())


async def test_a_refused_connection_raises_upstream_unreachable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with aiohttp.ClientSession() as session:
        upstream = AnthropicUpstream(
            session=session, base_url=f"http://127.0.0.1:{port}", api_key="k"
        )
        with pytest.raises(UpstreamUnreachable):
            await send(upstream, chat())


async def test_redirects_are_not_followed(aiohttp_server: ServerFactory) -> None:
    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPTemporaryRedirect("http://example.invalid/v1/messages")

    app = web.Application()
    app.router.add_post("/v1/messages", redirect)
    server = await aiohttp_server(app)
    async with aiohttp.ClientSession() as session:
        upstream = AnthropicUpstream(
            session=session, base_url=str(server.make_url("")).rstrip("/"), api_key="k"
        )
        assert (await send(upstream, chat())).status == 307


async def test_a_refused_connection_names_the_upstreams_address() -> None:
    port = free_port()
    async with aiohttp.ClientSession() as session:
        upstream = AnthropicUpstream(session=session, base_url=f"http://127.0.0.1:{port}")
        for stream in (False, True):
            with pytest.raises(UpstreamUnreachable) as caught:
                await upstream.send_chat(
                    {"model": "claude-x", "messages": [{"role": "user", "content": "hi"}],
                     "stream": stream}, headers={}, api_key="sk-ant")  # fmt: skip
            expected = f"upstream 127.0.0.1:{port} unreachable: Connection refused"
            assert caught.value.message == expected
