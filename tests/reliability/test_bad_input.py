"""Bad bodies and headers get 400/413/431 and an OpenAI-shaped error, never a 5xx."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import orjson
import pytest

from tests.reliability.conftest import MakeRig
from tests.reliability.support import Rig, assert_openai_error, auth, chat, post_json

MAX_BODY = 4 * 1024 * 1024


@pytest.fixture
async def rig(make_rig: MakeRig) -> Rig:
    return await make_rig(max_body_bytes=MAX_BODY)


async def _post_raw(rig: Rig, path: str, data: Any, **headers: str) -> tuple[int, bytes]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            rig.url(path),
            data=data,
            headers={**auth(), "Content-Type": "application/json", **headers},
        ) as response,
    ):
        return response.status, await response.read()


def _nested(depth: int) -> bytes:
    return (
        b'{"model": "m", "messages": [{"role": "user", "content": "x", "deep": '
        + (b"[" * depth + b"]" * depth)
        + b"}]}"
    )


BAD_BODIES = {
    "invalid json": b"{not json",
    "empty": b"",
    "array": b"[]",
    "string": b'"hello"',
    "messages missing": b'{"model": "m"}',
    "messages a string": b'{"model": "m", "messages": "hi"}',
    "messages empty": b'{"model": "m", "messages": []}',
    "message a number": b'{"model": "m", "messages": [1]}',
    "role a number": b'{"model": "m", "messages": [{"role": 3}]}',
    "model a number": b'{"model": 5, "messages": [{"role": "user", "content": "x"}]}',
    "stream a string": b'{"stream": "yes", "messages": [{"role": "user", "content": "x"}]}',
    "invalid utf-8": b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}',
    "lone surrogate": b'{"messages": [{"role": "user", "content": "\\ud800"}]}',
    "10,000 deep": _nested(10_000),
    "300 deep": _nested(300),
}


@pytest.mark.parametrize("name", list(BAD_BODIES))
async def test_bad_bodies_get_400_with_an_openai_error(rig: Rig, name: str) -> None:
    status, raw = await _post_raw(rig, "/v1/chat/completions", BAD_BODIES[name])
    assert status == 400, raw
    assert_openai_error(raw)
    assert rig.fake.chat == []


async def test_wrongly_typed_content_is_forwarded_for_the_upstream_to_judge(rig: Rig) -> None:
    body = chat()
    body["messages"] = [
        {"role": "user", "content": 42},
        {"role": "tool", "content": {"a": [1, 2]}, "tool_call_id": 7},
        {"role": "assistant", "content": None, "tool_calls": "nope"},
        {"role": "user", "content": [{"type": "text"}, 3, None]},
    ]
    status, raw = await _post_raw(rig, "/v1/chat/completions", orjson.dumps(body))
    assert status < 500, raw


async def test_fifty_thousand_messages_are_served_in_bounded_time(rig: Rig) -> None:
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(50_000)
    ]
    started = time.monotonic()
    status, raw = await _post_raw(
        rig, "/v1/chat/completions", orjson.dumps({"model": "m", "messages": messages})
    )
    assert status == 200, raw[:300]
    assert time.monotonic() - started < 20


async def test_a_two_mebibyte_body_passes(rig: Rig) -> None:
    body = chat("x" * (2 * 1024 * 1024))
    status, raw = await _post_raw(rig, "/v1/chat/completions", orjson.dumps(body))
    assert status == 200, raw[:300]
    assert len(rig.fake.chat[-1].body["messages"][-1]["content"]) == 2 * 1024 * 1024


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/embeddings"])
@pytest.mark.parametrize("chunked", [False, True])
async def test_a_body_over_max_body_bytes_is_413(rig: Rig, path: str, chunked: bool) -> None:
    data = orjson.dumps(chat("x" * (MAX_BODY + 10)))

    async def pieces() -> Any:
        for start in range(0, len(data), 65536):
            yield data[start : start + 65536]

    status, raw = await _post_raw(rig, path, pieces() if chunked else data)
    assert status == 413
    assert assert_openai_error(raw)["code"] == "request_too_large"
    assert rig.fake.received == []


async def _raw_exchange(rig: Rig, request: bytes) -> bytes:
    assert rig.server.port is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", rig.server.port)
    try:
        writer.write(request)
        await writer.drain()
        async with asyncio.timeout(5):
            return await reader.read(65536)
    finally:
        writer.close()


def _request(extra_headers: bytes, body: bytes = b'{"messages": [{"role": "user"}]}') -> bytes:
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-c\r\n"
        b"Content-Type: application/json\r\nConnection: close\r\n"
        + extra_headers
        + b"Content-Length: %d\r\n\r\n" % len(body)
        + body
    )


def _status(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param(b"X-Big: " + b"a" * 16384 + b"\r\n", id="one 16 KiB header"),
        pytest.param(b"".join(b"X-H%d: %s\r\n" % (i, b"b" * 1000) for i in range(100)), id="many"),
        pytest.param(b"X-Evil: a\rInjected: 1\r\n", id="bare CR"),
        pytest.param(b"X-Evil: a\x00b\r\n", id="NUL"),
        pytest.param(b"X-Evil: a\r\n folded\r\n", id="obs-fold"),
        pytest.param(b"Bad Name: a\r\n", id="space in name"),
    ],
)
async def test_malformed_or_huge_headers_are_refused_before_the_upstream(
    rig: Rig, headers: bytes
) -> None:
    response = await _raw_exchange(rig, _request(headers))
    assert _status(response) in (400, 413, 431), response[:200]
    assert rig.fake.received == []


async def test_a_bare_line_feed_in_a_header_never_reaches_the_upstream_as_a_header(
    rig: Rig,
) -> None:
    body = orjson.dumps(chat())
    response = await _raw_exchange(rig, _request(b"X-Evil: a\nInjected: 1\r\n", body))
    assert _status(response) < 500, response[:200]
    for received in rig.fake.received:
        assert "Injected" not in received.headers
        assert all("\n" not in v and "\r" not in v for v in received.headers.values())


@pytest.mark.parametrize("limit", ["0", "-1", "abc", "1e3", " 5", "²", "1.5"])
async def test_a_session_list_limit_that_is_not_a_positive_integer_is_400(
    rig: Rig, limit: str
) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.get(rig.url("/v1/ctx/sessions"), params={"limit": limit}, headers=auth()) as response,
    ):
        assert response.status == 400
        error = assert_openai_error(await response.read())
        assert error["param"] == "limit"


async def test_a_session_list_limit_caps_at_a_thousand_and_counts(rig: Rig) -> None:
    async with aiohttp.ClientSession() as http:
        for index in range(3):
            status, _, _ = await post_json(
                http, rig.url("/v1/chat/completions"), chat(), **{"X-Ctx-Session": f"s{index}"}
            )
            assert status == 200
        await rig.settled()
        for limit, expected in (("2", 2), ("99999999999999999999", 3), ("", 3)):
            async with http.get(
                rig.url("/v1/ctx/sessions"), params={"limit": limit}, headers=auth()
            ) as response:
                assert response.status == 200
                assert len((await response.json())["sessions"]) == expected
