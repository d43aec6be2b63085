"""A client that goes away: the upstream request is closed within a second, nothing leaks."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest

from proxy.server.appkeys import STORE
from tests.fakes.openai_upstream import Reply
from tests.reliability.conftest import MakeRig
from tests.reliability.slowfake import SlowSummaryFake
from tests.reliability.support import (
    COMPACT_AT_1000,
    Rig,
    auth,
    chat,
    current_tasks,
    history,
    post_json,
    wait_until,
)


async def _baseline(rig: Rig) -> tuple[int, int]:
    """Warm the pool with one whole request; (tasks, upstream connections) at rest."""
    async with aiohttp.ClientSession() as http:
        await post_json(http, rig.url("/v1/chat/completions"), chat())
    await rig.settled()
    await asyncio.sleep(0.05)
    return len(current_tasks()), rig.upstream_connections()


async def _back_to_baseline(rig: Rig, baseline: tuple[int, int]) -> None:
    tasks, connections = baseline
    await rig.settled()
    await wait_until(lambda: len(current_tasks()) <= tasks, within=2)
    await wait_until(lambda: rig.upstream_connections() <= connections, within=2)


async def test_disconnect_mid_stream_closes_the_upstream_within_a_second(
    make_rig: MakeRig,
) -> None:
    rig = await make_rig()
    baseline = await _baseline(rig)
    rig.fake.default = Reply(content="abcdefghij", chunks=10, chunk_delay_s=0.3)
    http = aiohttp.ClientSession()
    response = await http.post(
        rig.url("/v1/chat/completions"), json=chat(stream=True), headers=auth()
    )
    await response.content.readuntil(b"\n\n")
    response.close()
    await http.close()
    gone = time.monotonic()
    await wait_until(lambda: rig.fake.cancelled, within=1)
    assert rig.fake.cancelled[0] - gone < 1
    await _back_to_baseline(rig, baseline)


@pytest.mark.parametrize("stream", [True, False])
async def test_disconnect_before_the_first_byte_closes_the_upstream_within_a_second(
    make_rig: MakeRig, stream: bool
) -> None:
    rig = await make_rig()
    baseline = await _baseline(rig)
    rig.fake.default = Reply(first_byte_delay_s=5)
    async with aiohttp.ClientSession() as http:
        call = asyncio.create_task(
            post_json(http, rig.url("/v1/chat/completions"), chat(stream=stream))
        )
        await wait_until(lambda: len(rig.fake.chat) == 2, within=2)
        call.cancel()
        gone = time.monotonic()
        with pytest.raises(asyncio.CancelledError):
            await call
    await wait_until(lambda: rig.fake.cancelled, within=1)
    assert rig.fake.cancelled[0] - gone < 1
    await _back_to_baseline(rig, baseline)


async def test_disconnect_during_a_sync_compaction_stores_no_summary(make_rig: MakeRig) -> None:
    fake = SlowSummaryFake(summary_delay_s=5)
    rig = await make_rig(fake=fake, tenant_extra=COMPACT_AT_1000)
    messages = history(6)
    headers = {**auth(), "X-Ctx-Session": "compact-me"}
    fake.script.append(Reply(prompt_tokens=5000))
    async with aiohttp.ClientSession() as http:
        body = {"model": "gpt-4o", "messages": messages}
        async with http.post(rig.url("/v1/chat/completions"), json=body, headers=headers) as r:
            assert r.status == 200
        await rig.settled()
        again = {"model": "gpt-4o", "messages": [*messages, {"role": "user", "content": "more"}]}
        call = asyncio.create_task(
            http.post(rig.url("/v1/chat/completions"), json=again, headers=headers)
        )
        await wait_until(lambda: fake.summary_started, within=2)
        call.cancel()
        gone = time.monotonic()
        with pytest.raises(asyncio.CancelledError):
            await call
    await wait_until(lambda: fake.summary_cancelled, within=1)
    assert fake.summary_cancelled[0] - gone < 1
    await rig.settled()
    detail = await rig.app[STORE].session_detail("default", "compact-me")
    assert detail is not None and detail["compactions"] == []
    assert len(fake.chat) == 1, "the cancelled request never reached the upstream"
