"""A stream whose context takes long to prepare (a synchronous compaction) is kept alive with SSE
comments, and still gets its answer, or an in-band error, on the same 200 response."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson
import pytest

from proxy.server import keepalive
from proxy.server.appkeys import STORE
from tests.fakes.openai_upstream import Reply
from tests.reliability.conftest import MakeRig
from tests.reliability.slowfake import SlowSummaryFake
from tests.reliability.support import COMPACT_AT_1000, Rig, auth, history, sse_events, wait_until

SESSION = "keep-me"


@pytest.fixture(autouse=True)
def quick_keepalive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(keepalive, "AFTER_S", 0.2)
    monkeypatch.setattr(keepalive, "EVERY_S", 0.25)


async def compacting_rig(make_rig: MakeRig, **values: Any) -> tuple[Rig, SlowSummaryFake]:
    """A session whose next request compacts synchronously, with a summarizer taking 1 s."""
    fake = SlowSummaryFake(summary_delay_s=1.0)
    rig = await make_rig(fake=fake, tenant_extra=COMPACT_AT_1000, **values)
    fake.script.append(Reply(prompt_tokens=5000))
    async with aiohttp.ClientSession() as http:
        body = {"model": "gpt-4o", "messages": history(6)}
        async with http.post(rig.url("/v1/chat/completions"), json=body, headers=headers()) as r:
            assert r.status == 200
    await rig.settled()
    return rig, fake


def headers() -> dict[str, str]:
    return {**auth(), "X-Ctx-Session": SESSION}


async def stream_again(rig: Rig) -> tuple[int, Any, bytes]:
    body = {"model": "gpt-4o", "messages": [*history(6), {"role": "user", "content": "more"}],
            "stream": True}  # fmt: skip
    async with (
        aiohttp.ClientSession() as http,
        http.post(rig.url("/v1/chat/completions"), json=body, headers=headers()) as response,
    ):
        return response.status, response.headers, await response.read()


async def test_a_slow_compaction_sends_comments_then_the_answer(make_rig: MakeRig) -> None:
    rig, fake = await compacting_rig(make_rig)
    fake.script.append(Reply(content="after the summary", chunks=3))
    status, got_headers, raw = await stream_again(rig)
    assert status == 200 and got_headers["X-Ctx-Session"] == SESSION
    assert len(got_headers.get("X-Request-Id", "")) == 16  # sent with the keep-alive's headers
    assert raw.startswith(keepalive.COMMENT), raw[:200]
    assert raw.count(keepalive.COMMENT) >= 2  # 1 s of work: a comment at 0.2 s, then every 0.25 s
    events = [e for e in sse_events(raw) if e != b"[DONE]"]
    text = "".join(orjson.loads(e)["choices"][0]["delta"].get("content") or ""
                   for e in events if orjson.loads(e)["choices"])  # fmt: skip
    assert text == "after the summary" and raw.endswith(b"data: [DONE]\n\n")
    await rig.settled()
    detail = await rig.app[STORE].session_detail("default", SESSION)
    assert detail is not None and len(detail["compactions"]) == 1  # the compaction went through


async def test_the_sdk_reads_a_kept_alive_stream(make_rig: MakeRig) -> None:
    rig, fake = await compacting_rig(make_rig)
    fake.script.append(Reply(content="sdk sees this", chunks=2))
    client = rig.client()
    stream = await client.chat.completions.create(
        model="gpt-4o", messages=[*history(6), {"role": "user", "content": "more"}], stream=True,
        extra_headers={"X-Ctx-Session": SESSION})  # fmt: skip
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "sdk sees this"


async def test_an_upstream_error_after_the_keepalive_comes_in_band(make_rig: MakeRig) -> None:
    rig, fake = await compacting_rig(make_rig)
    fake.script.append(Reply(status=429, error={"message": "slow down", "type": "rate_limit"}))
    status, _, raw = await stream_again(rig)
    assert status == 200 and raw.startswith(keepalive.COMMENT)
    last = orjson.loads(sse_events(raw)[-1])
    assert last["error"]["message"] == "slow down"


async def test_an_upstream_timeout_after_the_keepalive_comes_in_band(make_rig: MakeRig) -> None:
    rig, fake = await compacting_rig(make_rig, first_byte_timeout_s=0.3)
    fake.script.append(Reply(first_byte_delay_s=5))
    status, _, raw = await stream_again(rig)
    assert status == 200 and raw.startswith(keepalive.COMMENT)
    assert orjson.loads(sse_events(raw)[-1])["error"]["code"] == "upstream_timeout"


async def test_a_quick_stream_is_untouched(make_rig: MakeRig) -> None:
    rig = await make_rig()
    async with (
        aiohttp.ClientSession() as http,
        http.post(rig.url("/v1/chat/completions"), headers=auth(),
                  json={"model": "gpt-4o", "messages": history(1), "stream": True}) as response,
    ):  # fmt: skip
        raw = await response.read()
        assert response.headers["X-Ctx-Compacted"] == "0"  # all X-Ctx-* headers, as usual
    assert raw.startswith(b"data: ") and keepalive.COMMENT not in raw


async def test_a_client_leaving_during_the_keepalive_cancels_the_compaction(
    make_rig: MakeRig,
) -> None:
    rig, fake = await compacting_rig(make_rig)
    body = {"model": "gpt-4o", "messages": [*history(6), {"role": "user", "content": "more"}],
            "stream": True}  # fmt: skip
    async with aiohttp.ClientSession() as http:
        response = await http.post(rig.url("/v1/chat/completions"), json=body, headers=headers())
        assert await response.content.readuntil(b"\n\n") == keepalive.COMMENT
        response.close()  # gone while the summary is still being written
    await wait_until(lambda: fake.summary_cancelled, within=2)
    await rig.settled()
    detail = await rig.app[STORE].session_detail("default", SESSION)
    assert detail is not None and detail["compactions"] == []
    assert len(fake.chat) == 1, "the abandoned request never reached the upstream"
