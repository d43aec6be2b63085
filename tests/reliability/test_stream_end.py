"""A chat stream is complete only with `[DONE]`: a body that ends cleanly before it (a chunked
terminator, or the close of a close-delimited body) reaches the client as an in-band error."""

from __future__ import annotations

from collections.abc import AsyncIterator

import openai
import orjson
import pytest

from proxy.server.observe.metrics import METRICS
from tests.reliability.conftest import MakeRig
from tests.reliability.rawhttp import EndingSSEUpstream
from tests.reliability.support import Rig, sse_events
from tests.server.observe.test_metrics import rendered, value


@pytest.fixture(params=["chunked", "close"])
async def rig(request: pytest.FixtureRequest, make_rig: MakeRig) -> AsyncIterator[Rig]:
    upstream = EndingSSEUpstream(request.param)
    await upstream.start()
    yield await make_rig(upstream_url=upstream.url)
    await upstream.close()


async def test_a_stream_ending_without_done_makes_the_sdk_raise(rig: Rig) -> None:
    got: list[str] = []
    async with rig.client() as client:
        stream = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        with pytest.raises(openai.APIError) as caught:
            async for chunk in stream:
                got.append(chunk.choices[0].delta.content or "")
    assert "".join(got) == "abc"
    assert "stream_interrupted" in str(caught.value.body)
    await rig.settled()
    (session,) = await rig.sessions()
    assert "last_prompt_tokens" not in session
    samples = rendered(rig.app[METRICS])
    assert value(samples, "ctxproxy_stream_interrupted_total", tenant="default") == 1


async def test_the_error_event_is_the_last_thing_the_client_reads(rig: Rig) -> None:
    import aiohttp

    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            rig.url("/v1/chat/completions"), json=body, headers={"Authorization": "Bearer k"}
        ) as response,
    ):
        raw = await response.read()
    events = sse_events(raw)
    assert len(events) == 4 and raw.endswith(b"\n\n")
    assert orjson.loads(events[-1])["error"]["code"] == "stream_interrupted"
