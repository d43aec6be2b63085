"""How a Messages answer reaches the client: a stream cut, left idle or ended by an error gets the
API's error event (never a silent clean end), a slow preparation is kept alive, and with
`report_usage = "client"` the input tokens are those of the client's full history."""

from __future__ import annotations

from typing import Any

import aiohttp
import anthropic
import orjson
import pytest

from proxy.server import keepalive
from proxy.server.appkeys import STORE
from proxy.sse import SSEDecoder
from tests.e2e.agent import settled
from tests.fakes.anthropic_upstream import Reply, text
from tests.fakes.openai_upstream import Reply as ChatReply
from tests.reliability.slowfake import SlowSummaryFake
from tests.reliability.support import COMPACT_AT_1000
from tests.server.messages_support import MODEL, MakeMessagesProxy, make_messages_proxy
from tests.server.test_messages import HELLO, long_session

__all__ = ["make_messages_proxy"]  # the fixture, imported for pytest

BLOCKS = ({"type": "text", "text": "first part"}, {"type": "text", "text": "second part"})
CLIENT_USAGE = 'report_usage = "client"\n'


async def stream_raw(proxy: Any, body: dict[str, Any], session: str = "s") -> tuple[int, bytes]:
    headers = {"x-api-key": "k", "X-Ctx-Session": session}
    async with (
        aiohttp.ClientSession() as http,
        http.post(proxy.base_url + "/v1/messages", json=body, headers=headers) as got,
    ):
        return got.status, await got.read()


def events(raw: bytes) -> list[tuple[str, Any]]:
    return [(e.event, orjson.loads(e.data)) for e in SSEDecoder().feed(raw) if e.data]


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (Reply(content=BLOCKS, cut_after=1), "upstream stream cut before the answer was complete"),
        (Reply(content=BLOCKS, stall_s=2.0), "upstream went silent before the answer was complete"),
    ],
)
async def test_a_cut_or_silent_stream_ends_with_the_apis_error_event(
    make_messages_proxy: MakeMessagesProxy, reply: Reply, message: str
) -> None:
    proxy = await make_messages_proxy(idle_timeout_s=0.5)
    proxy.fake.script(reply)
    body = {"model": MODEL, "max_tokens": 10, "messages": HELLO, "stream": True}
    status, raw = await stream_raw(proxy, body)
    got = events(raw)
    assert status == 200 and got[-1] == (
        "error",
        {"type": "error", "error": {"type": "api_error", "message": message}},
    )
    assert b"data: {\n" not in raw and "message_stop" not in [name for name, _ in got]
    await settled(proxy.app)
    state = await proxy.app[STORE].load("default", "s")
    assert state.int_field("requests") == 1 and "last_prompt_tokens" not in state.fields
    async with proxy.client() as client:
        proxy.fake.script(reply)
        with pytest.raises(anthropic.APIError):
            async with client.messages.stream(model=MODEL, max_tokens=10, messages=HELLO) as s:
                await s.get_final_message()


async def test_an_upstream_error_event_passes_as_it_came(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    proxy = await make_messages_proxy()
    proxy.fake.script(Reply(content=BLOCKS, error_after=1))
    body = {"model": MODEL, "max_tokens": 10, "messages": HELLO, "stream": True}
    _, raw = await stream_raw(proxy, body)
    assert raw.endswith(
        b'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", '
        b'"message": "Overloaded"}}\n\n'
    )


async def test_a_slow_preparation_is_kept_alive_and_a_late_error_comes_in_band(
    make_messages_proxy: MakeMessagesProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keepalive, "AFTER_S", 0.2)
    monkeypatch.setattr(keepalive, "EVERY_S", 0.25)
    fake = SlowSummaryFake(summary_delay_s=1.0)
    proxy = await make_messages_proxy(kind="openai", fake=fake, tenant_extra=COMPACT_AT_1000)
    history = [{"role": "user" if n % 2 == 0 else "assistant", "content": f"turn {n} " + "x" * 300}
               for n in range(9)]  # fmt: skip
    fake.script.append(ChatReply(prompt_tokens=5000))
    status, _ = await stream_raw(proxy, {"model": MODEL, "max_tokens": 10, "messages": history})
    await settled(proxy.app)
    fake.script.append(ChatReply(status=429, error={"message": "slow down", "type": "rate"}))
    more = [*history, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}]
    body = {"model": MODEL, "max_tokens": 10, "messages": more, "stream": True}
    status, raw = await stream_raw(proxy, body)
    assert status == 200 and raw.startswith(keepalive.COMMENT)
    assert events(raw)[-1] == (
        "error",
        {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
    )
    assert len(fake.summary_requests) == 1


async def upstream_and_client_usage(
    make_messages_proxy: MakeMessagesProxy, kind: str, stream: bool, extra: str
) -> tuple[int, int]:
    """(input tokens the upstream reported, input tokens the client was told) for a history
    the proxy prunes to about a third."""
    proxy = await make_messages_proxy(kind=kind, tenant_extra=extra)
    if kind == "anthropic":
        usage = {"input_tokens": 500, "cache_read_input_tokens": 1500, "output_tokens": 3}
        proxy.fake.script(text("ok", usage=usage, delta_usage={**usage, "output_tokens": 3}))
        reported = 500
    else:
        proxy.fake.script.append(ChatReply(content="ok", prompt_tokens=2000, cached_tokens=1500))
        reported = 500
    history = long_session(results=6)
    async with proxy.client() as client:
        if stream:
            async with client.messages.stream(
                model=MODEL,
                max_tokens=10,
                messages=history,  # type: ignore[arg-type]
            ) as events:
                answer = await events.get_final_message()
        else:
            answer = await client.messages.create(model=MODEL, max_tokens=10, messages=history)  # type: ignore[arg-type]
    assert answer.usage.cache_read_input_tokens == 1500
    return reported, answer.usage.input_tokens


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
@pytest.mark.parametrize("stream", [False, True])
async def test_client_usage_scales_input_tokens_to_the_clients_history(
    make_messages_proxy: MakeMessagesProxy, kind: str, stream: bool
) -> None:
    reported, told = await upstream_and_client_usage(make_messages_proxy, kind, stream, "")
    assert told == reported
    reported, told = await upstream_and_client_usage(
        make_messages_proxy, kind, stream, CLIENT_USAGE
    )
    whole = told + 1500  # the cache counters as reported
    assert 2.5 < whole / 2000 < 3.5  # about three times the prompt the upstream saw


async def test_client_usage_scales_the_count_too(make_messages_proxy: MakeMessagesProxy) -> None:
    counts = []
    for extra in ("", CLIENT_USAGE):
        proxy = await make_messages_proxy(tenant_extra=extra)
        async with proxy.client() as client:
            counted = await client.messages.count_tokens(
                model=MODEL,
                messages=long_session(results=6),  # type: ignore[arg-type]
            )
        counts.append(counted.input_tokens)
    assert 2.5 < counts[1] / counts[0] < 3.5
