"""How a relayed chat stream ends: complete once `[DONE]` is relayed, whatever the client does
next (the openai SDK closes the connection on `[DONE]`)."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from proxy.server.appkeys import STORE
from tests.fakes.openai_upstream import Reply
from tests.reliability.support import COMPACT_AT_1000, history
from tests.server.conftest import MakeProxy
from tests.server.harness import Proxy
from tests.server.observe.test_metrics import scrape, value

ROUTE = "/v1/chat/completions"


async def _stream_turn(proxy: Proxy, messages: list[dict[str, Any]], session: str) -> str:
    """One streamed request through the SDK, read to its end; the `X-Ctx-Compacted` it got."""
    async with proxy.client() as client:
        raw = await client.chat.completions.with_raw_response.create(
            model="gpt-4o",
            messages=messages,  # type: ignore[arg-type]
            stream=True,
            extra_headers={"X-Ctx-Session": session},
        )
        stream = raw.parse()
        text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert text == "Hello from the fake upstream."
    return raw.headers["x-ctx-compacted"]


@pytest.mark.parametrize("end_delay_s", [0.0, 0.05, 0.5])
async def test_a_stream_whose_done_was_relayed_is_recorded_and_compaction_follows(
    make_proxy: MakeProxy, end_delay_s: float
) -> None:
    proxy = await make_proxy(tenant_extra=COMPACT_AT_1000)
    proxy.fake.default = Reply(prompt_tokens=5000, end_delay_s=end_delay_s)
    messages = history(6)
    compacted = [await _stream_turn(proxy, messages, "loop")]
    await scrape(proxy)  # every after-request task has run
    detail = await proxy.app[STORE].session_detail("default", "loop")
    assert detail is not None
    assert detail["state"]["requests"] == "1"
    assert detail["state"]["last_prompt_tokens"] == "5000"
    messages += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}]
    compacted.append(await _stream_turn(proxy, messages, "loop"))
    assert compacted == ["0", "1"]  # as the same loop without streaming
    assert len(proxy.fake.summary_requests) == 1
    samples = await scrape(proxy)
    assert value(samples, "ctxproxy_http_requests_total", tenant="default", route=ROUTE,
                 status="200") == 2  # fmt: skip
    assert value(samples, "ctxproxy_http_requests_total", tenant="default", route=ROUTE,
                 status="499") == 0  # fmt: skip
    assert value(samples, "ctxproxy_tokens_total", tenant="default", kind="prompt") == 10000


@pytest.mark.parametrize("end_delay_s", [0.0, 0.5])
async def test_a_client_that_hangs_up_on_done_gets_its_request_recorded(
    make_proxy: MakeProxy, end_delay_s: float
) -> None:
    proxy = await make_proxy()
    proxy.fake.default = Reply(prompt_tokens=321, end_delay_s=end_delay_s)
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    headers = {"Authorization": "Bearer sk-client", "X-Ctx-Session": "hang-up"}
    async with aiohttp.ClientSession() as http:
        response = await http.post(proxy.server.make_url(ROUTE), json=body, headers=headers)
        await response.content.readuntil(b"data: [DONE]\n\n")
        response.close()  # drops the connection, whatever comes next
    samples = await scrape(proxy)
    detail = await proxy.app[STORE].session_detail("default", "hang-up")
    assert detail is not None and detail["state"]["last_prompt_tokens"] == "321"
    assert value(samples, "ctxproxy_http_requests_total", tenant="default", route=ROUTE,
                 status="200") == 1  # fmt: skip
