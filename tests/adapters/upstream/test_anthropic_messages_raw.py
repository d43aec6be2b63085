"""`AnthropicUpstream.send_messages`: a Messages body to the fake Anthropic API as it is, and the
answer back untouched (JSON, event stream, errors, counting)."""

from __future__ import annotations

import json

from proxy.adapters.upstream.anthropic_messages import AnthropicUpstream
from tests.adapters.upstream.test_anthropic_messages import Harness
from tests.adapters.upstream.test_anthropic_messages import harness as harness
from tests.fakes.anthropic_upstream import rate_limited, text

BODY = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "Hi"}],
    "metadata": {"user_id": "u"},
}
CLIENT_HEADERS = {
    "anthropic-beta": "context-management-2025-06-27",
    "x-api-key": "sk-client",
    "Authorization": "Bearer sk-client",
    "user-agent": "claude-cli/2.1",
    "X-Ctx-Session": "s",
}


async def test_the_body_goes_as_given_and_the_answer_comes_back_as_it_came(
    harness: Harness,
) -> None:
    harness.fake.api_key = "sk-ant-test"
    harness.fake.script(text("Hi!"))
    upstream = harness.upstream()
    reply = await upstream.send_messages(BODY, headers=CLIENT_HEADERS, api_key=None)
    received = harness.fake.received[-1]
    assert reply.status == 200 and reply.stream is None
    message = json.loads(reply.body or b"")
    assert message["content"] == [{"type": "text", "text": "Hi!"}]
    assert message["id"] == "msg_fake0001" and reply.headers["request-id"] == "req_fake"
    assert received.body == BODY
    headers = received.headers
    assert headers["x-api-key"] == "sk-ant-test" and "authorization" not in headers
    assert headers["anthropic-version"] == "2023-06-01"  # ours: the client sent none
    assert headers["anthropic-beta"] == CLIENT_HEADERS["anthropic-beta"]
    assert headers["user-agent"] == "claude-cli/2.1" and "x-ctx-session" not in headers


async def test_a_stream_comes_back_as_the_bytes_the_upstream_sent(harness: Harness) -> None:
    harness.fake.script(text("Streamed."))
    upstream = harness.upstream()
    body = {**BODY, "stream": True}
    reply = await upstream.send_messages(body, headers={"anthropic-version": "v9"}, api_key=None)
    assert reply.stream is not None and reply.body is None
    try:
        raw = b"".join([chunk async for chunk in reply.stream])
    finally:
        await reply.release()
    assert raw.startswith(b"event: message_start\ndata: ")
    assert raw.endswith(b'event: message_stop\ndata: {"type": "message_stop"}\n\n')
    assert b'"text": "Strea' in raw  # the fake's own spacing: nothing was re-encoded
    assert harness.fake.received[-1].headers["anthropic-version"] == "v9"


async def test_a_bearer_goes_as_a_bearer_and_errors_come_back_as_they_came(
    harness: Harness,
) -> None:
    harness.fake.api_key = "sk-ant-oat01-x"
    harness.fake.script(rate_limited("9"))
    upstream: AnthropicUpstream = harness.upstream(api_key="sk-configured")
    reply = await upstream.send_messages(BODY, headers={}, api_key="sk-ant-oat01-x", as_bearer=True)
    headers = harness.fake.received[-1].headers
    assert headers["authorization"] == "Bearer sk-ant-oat01-x" and "x-api-key" not in headers
    assert reply.status == 429 and reply.headers["retry-after"] == "9"
    assert json.loads(reply.body or b"")["error"]["type"] == "rate_limit_error"


async def test_count_tokens_goes_to_its_endpoint_with_the_query(harness: Harness) -> None:
    upstream = harness.upstream()
    body = {"model": "m", "messages": [{"role": "user", "content": "x" * 400}]}
    reply = await upstream.send_messages(
        body, headers={}, api_key=None, endpoint="messages/count_tokens", query="beta=true"
    )
    received = harness.fake.received[-1]
    assert (received.path, received.query) == ("/v1/messages/count_tokens", "beta=true")
    assert reply.status == 200 and json.loads(reply.body or b"")["input_tokens"] > 100
