"""With the store unreachable, requests still go through, and nothing is promised that the
store would have to keep."""

from __future__ import annotations

import logging

import pytest

from tests.redis_server import RedisServer, free_port
from tests.server.conftest import MakeProxy


async def test_store_down_serves_without_persisting_tool_outputs(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(store_url=f"redis://127.0.0.1:{free_port()}/0")
    big = "line of a very long build log\n" * 2_500  # 75,000 chars: over persist_over_chars
    messages = [
        {"role": "user", "content": "build it"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": big},
    ]
    async with proxy.client() as client:
        raw = await client.chat.completions.with_raw_response.create(
            model="gpt-4o", messages=messages
        )  # type: ignore[arg-type]
    assert raw.headers["x-ctx-store"] == "degraded"
    sent = proxy.fake.chat[-1].body["messages"][-1]["content"]
    assert "<persisted-output" not in sent, "an output id that could only 404"
    assert sent == big


async def test_redis_down_at_start_up_is_one_warning_naming_the_url_without_its_password(
    make_proxy: MakeProxy, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"redis://:s3cret@127.0.0.1:{free_port()}/0"
    with caplog.at_level(logging.WARNING):
        await make_proxy(store_url=url)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == [
        f"state store {url.replace('s3cret', '***')} unreachable at start-up; serving without state"
    ]


async def test_redis_up_at_start_up_logs_no_warning(
    make_proxy: MakeProxy, caplog: pytest.LogCaptureFixture, redis_server: RedisServer
) -> None:
    with caplog.at_level(logging.WARNING):
        await make_proxy(store_url=redis_server.url)
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
