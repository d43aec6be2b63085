"""Upstream faults: refused, reset, stale keep-alive, cut streams, silence, error statuses."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import openai
import orjson
import pytest

from tests.fakes.openai_upstream import Reply
from tests.redis_server import free_port
from tests.reliability.conftest import MakeRig
from tests.reliability.rawhttp import RawUpstream
from tests.reliability.support import assert_openai_error, auth, chat, post_json, sse_events


async def test_refused_upstream_answers_502_openai_shaped(make_rig: MakeRig) -> None:
    rig = await make_rig(upstream_url=f"http://127.0.0.1:{free_port()}")
    async with aiohttp.ClientSession() as http:
        started = time.monotonic()
        status, raw, _ = await post_json(http, rig.url("/v1/chat/completions"), chat())
    assert status == 502
    assert assert_openai_error(raw)["code"] == "upstream_unreachable"
    assert time.monotonic() - started < 2


@pytest.mark.parametrize("stream", [False, True])
async def test_reset_before_headers_is_retried_once_then_502(
    make_rig: MakeRig, stream: bool
) -> None:
    raw_upstream = RawUpstream("reset")
    await raw_upstream.start()
    try:
        rig = await make_rig(upstream_url=raw_upstream.url)
        async with aiohttp.ClientSession() as http:
            status, raw, _ = await post_json(
                http, rig.url("/v1/chat/completions"), chat(stream=stream)
            )
    finally:
        await raw_upstream.close()
    assert status == 502
    assert_openai_error(raw)
    assert raw_upstream.connections == 2, "one attempt and exactly one retry"


async def test_stale_keep_alive_connections_are_retried_transparently(make_rig: MakeRig) -> None:
    raw_upstream = RawUpstream("stale")
    await raw_upstream.start()
    try:
        rig = await make_rig(upstream_url=raw_upstream.url)
        async with rig.client() as client:
            for _ in range(50):
                done = await client.chat.completions.create(
                    model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
                )
                assert done.choices[0].message.content == "ok"
    finally:
        await raw_upstream.close()
    assert raw_upstream.answered == 50


async def test_passthrough_post_survives_a_stale_keep_alive_connection(make_rig: MakeRig) -> None:
    raw_upstream = RawUpstream("stale")
    await raw_upstream.start()
    try:
        rig = await make_rig(upstream_url=raw_upstream.url)
        async with aiohttp.ClientSession() as http:
            for _ in range(6):
                body = {"model": "e", "input": "hello"}
                status, raw, _ = await post_json(http, rig.url("/v1/embeddings"), body)
                assert status == 200, raw
    finally:
        await raw_upstream.close()


async def test_upstream_closing_idle_connections_causes_no_client_errors(
    make_rig: MakeRig,
) -> None:
    rig = await make_rig(upstream_server_kw={"keepalive_timeout": 0.25})
    gaps = (0.2, 0.24, 0.25, 0.26, 0.3)
    async with rig.client() as client:
        for index in range(20):
            await client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
            )
            await asyncio.sleep(gaps[index % len(gaps)])
    assert len(rig.fake.chat) == 20


async def _record_prompt_tokens(rig_client: openai.AsyncOpenAI, tokens: int) -> None:
    stream = await rig_client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True,
        extra_headers={"X-Ctx-Session": "cut-session"},
    )  # fmt: skip
    async for _ in stream:
        pass


@pytest.mark.parametrize("half_event", [False, True])
async def test_mid_stream_cut_ends_in_band_and_keeps_last_prompt_tokens(
    make_rig: MakeRig, half_event: bool
) -> None:
    rig = await make_rig()
    rig.fake.script.append(Reply(prompt_tokens=4321))
    async with rig.client() as client:
        await _record_prompt_tokens(client, 4321)
        rig.fake.script.append(
            Reply(content="abcdef", chunks=3, cut_after=2, half_event=half_event, prompt_tokens=9)
        )
        stream = await client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True,
            extra_headers={"X-Ctx-Session": "cut-session"},
        )  # fmt: skip
        got: list[str] = []
        with pytest.raises(openai.APIError):
            async for chunk in stream:
                got.append(chunk.choices[0].delta.content or "")
    assert "".join(got) == "abcd"
    await rig.settled()
    (row,) = await rig.sessions()
    assert row["last_prompt_tokens"] == "4321"
    assert row["requests"] == "2"


async def test_mid_stream_cut_forwards_only_whole_events_then_the_error(make_rig: MakeRig) -> None:
    rig = await make_rig()
    rig.fake.default = Reply(content="abcdef", chunks=3, cut_after=1, half_event=True)
    async with aiohttp.ClientSession() as http:
        status, raw, _ = await post_json(http, rig.url("/v1/chat/completions"), chat(stream=True))
    assert status == 200
    assert raw.endswith(b"\n\n") and b'"cho\n' not in raw
    events = sse_events(raw)
    *content, last = events
    assert all(orjson.loads(e)["choices"] for e in content)
    assert orjson.loads(last)["error"]["code"] == "stream_interrupted"
    assert len(rig.fake.chat) == 1, "no retry after the first byte"


async def test_gaps_under_the_bounds_pass(make_rig: MakeRig) -> None:
    rig = await make_rig(first_byte_timeout_s=1.5, idle_timeout_s=1.0)
    rig.fake.default = Reply(content="abc", chunks=3, first_byte_delay_s=0.8, chunk_delay_s=0.6)
    async with rig.client() as client:
        stream = await client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "abc"


async def test_silence_past_the_idle_bound_ends_the_stream_and_closes_the_upstream(
    make_rig: MakeRig,
) -> None:
    rig = await make_rig(idle_timeout_s=0.5)
    rig.fake.default = Reply(content="abc", chunks=3, chunk_delay_s=5)
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            rig.url("/v1/chat/completions"), json=chat(stream=True), headers=auth()
        ) as response,
    ):
        first = await response.content.readuntil(b"\n\n")
        first_at = time.monotonic()
        rest = await response.read()
        ended_at = time.monotonic()
    assert orjson.loads(first.removeprefix(b"data: "))["choices"]
    assert orjson.loads(sse_events(rest)[-1])["error"]["code"] == "stream_interrupted"
    assert ended_at - first_at < 0.5 + 1
    assert rig.fake.cancelled and rig.fake.cancelled[0] - first_at < 0.5 + 1


@pytest.mark.parametrize("stream", [False, True])
async def test_first_byte_past_its_bound_is_504_and_the_upstream_is_closed(
    make_rig: MakeRig, stream: bool
) -> None:
    """A stream must start within `first_byte_timeout_s`; a whole (non-streaming) call, which
    arrives all at once, must end within `timeout_s` (DESIGN: streams have no total bound)."""
    bounds = {"first_byte_timeout_s": 0.4, "timeout_s": 30} if stream else {"timeout_s": 0.4}
    rig = await make_rig(**bounds)
    rig.fake.default = Reply(first_byte_delay_s=5)
    async with aiohttp.ClientSession() as http:
        started = time.monotonic()
        status, raw, headers = await post_json(
            http, rig.url("/v1/chat/completions"), chat(stream=stream), **{"X-Ctx-Session": "s-t"}
        )
    assert status == 504
    assert assert_openai_error(raw)["code"] == "upstream_timeout"
    assert headers["X-Ctx-Session"] == "s-t" and headers["X-Request-Id"]
    for _ in range(50):
        if rig.fake.cancelled:
            break
        await asyncio.sleep(0.02)
    assert rig.fake.cancelled and rig.fake.cancelled[0] - started < 0.4 + 1


async def test_a_whole_call_may_take_longer_than_a_streams_first_byte(make_rig: MakeRig) -> None:
    rig = await make_rig(first_byte_timeout_s=0.3, timeout_s=10)
    rig.fake.default = Reply(content="slow but whole", first_byte_delay_s=0.8)
    async with aiohttp.ClientSession() as http:
        status, raw, _ = await post_json(http, rig.url("/v1/chat/completions"), chat())
    assert status == 200
    assert orjson.loads(raw)["choices"][0]["message"]["content"] == "slow but whole"


@pytest.mark.parametrize("status", [400, 401, 404, 429, 500, 503])
@pytest.mark.parametrize("stream", [False, True])
async def test_error_statuses_pass_through_after_exactly_one_attempt(
    make_rig: MakeRig, status: int, stream: bool
) -> None:
    rig = await make_rig()
    error = {"message": f"scripted {status}", "type": "x", "param": None, "code": f"c{status}"}
    headers = {"Retry-After": "3", "x-ratelimit-remaining-tokens": "0", "x-request-id": "req-9"}
    rig.fake.script.append(Reply(status=status, error=error, headers=headers))
    async with aiohttp.ClientSession() as http:
        got, raw, got_headers = await post_json(
            http, rig.url("/v1/chat/completions"), chat(stream=stream)
        )
    assert got == status
    assert orjson.loads(raw) == {"error": error}
    for name, value in headers.items():
        assert got_headers[name] == value
    assert len(rig.fake.chat) == 1


OVERFLOW = {"message": "This model's maximum context length is 8192 tokens.",
            "type": "invalid_request_error", "param": "messages",
            "code": "context_length_exceeded"}  # fmt: skip


@pytest.mark.parametrize("compact", [True, False])
async def test_context_length_error_compacts_and_retries_once_else_passes_through(
    make_rig: MakeRig, compact: bool
) -> None:
    from tests.reliability.support import COMPACT_AT_1000, history

    extra = COMPACT_AT_1000 if compact else "[tenants.default.compact]\nenabled = false\n"
    rig = await make_rig(tenant_extra=extra)
    rig.fake.script.extend([Reply(status=400, error=OVERFLOW), Reply(status=400, error=OVERFLOW)])
    async with aiohttp.ClientSession() as http:
        body = {"model": "gpt-4o", "messages": history(6)}
        status, raw, _ = await post_json(http, rig.url("/v1/chat/completions"), body)
    assert status == 400 and orjson.loads(raw) == {"error": OVERFLOW}
    assert len(rig.fake.chat) == (2 if compact else 1)
    assert len(rig.fake.summary_requests) == (1 if compact else 0)
