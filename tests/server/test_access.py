"""The access line: one per request at INFO, once it is over (streams after their end, errors
too), with method, path, status, tenant, session, latency and tokens; never content or a key."""

from __future__ import annotations

import asyncio
import json
import logging

import aiohttp
import pytest

from proxy.logs import JsonFormatter
from tests.fakes.openai_upstream import Reply
from tests.server.harness import Proxy

SECRET_TEXT = "the launch code is 0000"
KEY = "sk-client-secret-key"


def access_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "proxy.access"]


async def wait_for_records(caplog: pytest.LogCaptureFixture, count: int) -> list[logging.LogRecord]:
    """The line is written as the handler returns, which may be just after the client has read
    the end of a stream."""
    for _ in range(100):
        if len(access_records(caplog)) >= count:
            break
        await asyncio.sleep(0.01)
    return access_records(caplog)


async def test_a_chat_request_gets_one_access_line_without_content_or_key(
    proxy: Proxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    proxy.fake.default = Reply(prompt_tokens=1234, completion_tokens=56)
    async with proxy.client(api_key=KEY) as client:
        await client.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": SECRET_TEXT}],
            extra_headers={"X-Ctx-Session": "task-7"},
        )
    [record] = await wait_for_records(caplog, 1)
    assert record.levelno == logging.INFO
    message = record.getMessage()
    assert message.startswith("POST /v1/chat/completions 200 tenant=default session=task-7 ")
    assert message.endswith(" tokens=1234+56")
    line = json.loads(JsonFormatter().format(record))
    assert line["status"] == 200 and line["session"] == "task-7" and line["tenant"] == "default"
    assert line["prompt_tokens"] == 1234 and line["completion_tokens"] == 56
    assert line["latency_ms"] >= 0
    text = json.dumps(line)
    assert SECRET_TEXT not in text and KEY not in text and "launch" not in text


async def test_a_stream_is_logged_once_after_its_end(
    proxy: Proxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    proxy.fake.default = Reply(prompt_tokens=300, completion_tokens=9, chunk_delay_s=0.05)
    async with proxy.client() as client:
        stream = await client.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": "hi"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = 0
        async for _ in stream:
            if chunks == 0:
                assert access_records(caplog) == []  # not while the stream is running
            chunks += 1
    [record] = await wait_for_records(caplog, 1)
    assert chunks > 1
    assert " 200 " in record.getMessage() and record.getMessage().endswith(" tokens=300+9")
    await asyncio.sleep(0.05)
    assert len(access_records(caplog)) == 1


async def test_errors_are_logged_with_their_status(
    proxy: Proxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    url = proxy.base_url + "/chat/completions"
    async with aiohttp.ClientSession() as http:
        async with http.post(url, json={"model": "gpt-4o"}, headers={"Authorization": "Bearer k"}):
            pass
        async with http.get(proxy.base_url.removesuffix("/v1") + "/nowhere?key=sk-query") as r:
            assert r.status == 404
    records = await wait_for_records(caplog, 2)
    messages = [r.getMessage() for r in records]
    assert messages[0].startswith("POST /v1/chat/completions 400 tenant=default session=-")
    assert messages[0].endswith(" tokens=-")
    assert messages[1].startswith("GET /nowhere 404 tenant=default session=-")  # open tenant
    assert "sk-query" not in " ".join(messages)


async def test_at_warning_level_there_is_no_access_line(
    proxy: Proxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.WARNING, logger="proxy.access")
    async with proxy.client() as client:
        await client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
        )
    await asyncio.sleep(0.05)
    assert access_records(caplog) == []
