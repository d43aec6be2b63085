"""How a relayed chat stream ends: complete once `[DONE]` is relayed, whatever the client does
next (the openai SDK closes the connection on `[DONE]`); which events the relay copies without
decoding them (`plain_end`, `Copier.feed`), and that usage is never lost on the way."""

from __future__ import annotations

import itertools
import json
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st

from proxy.server.appkeys import STORE
from proxy.server.stream_relay import Copier, find_usage, plain_end
from proxy.usage import usage_from
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


def event(payload: object, *, separators: tuple[str, str] = (",", ":")) -> bytes:
    return b"data: " + json.dumps(payload, separators=separators).encode() + b"\n\n"


def chunk(content: str, **extra: Any) -> dict[str, Any]:
    return {"id": "c", "choices": [{"index": 0, "delta": {"content": content}}], **extra}


def test_events_whose_usage_is_null_are_copied_without_decoding() -> None:
    """OpenAI sends `"usage":null` in every chunk but the last (include_usage on)."""
    read = b"".join(
        [
            event(chunk("a", usage=None)),
            event(chunk("b", usage=None), separators=(", ", ": ")),
            event(chunk("c", usage=None), separators=(",", " :\t")),
            event(chunk('the text "usage":{"prompt_tokens": 1} is no usage', usage=None)),
        ]
    )
    assert plain_end(read) == len(read)


@pytest.mark.parametrize(
    "last",
    [
        event({"choices": [], "usage": {"prompt_tokens": 5}}),
        event({"choices": [], "usage": {"prompt_tokens": 5}}, separators=(", ", " : ")),
        event(chunk("x", usage=None, extra={"usage": {"prompt_tokens": 5}})),
        event(chunk('say "usage', usage=None)),  # ends a string: costs a decode, loses nothing
        event({"error": {"message": "overloaded"}}),
        b"data: [DONE]\n\n",
        b'data: {"usage":nul',  # the rest in the next read
    ],
)
def test_the_plain_copy_stops_at_the_first_event_the_relay_must_read(last: bytes) -> None:
    plain = event(chunk("a", usage=None)) + event(chunk("b"))
    assert plain_end(plain + last + event(chunk("c", usage=None))) == len(plain)


JSON_TEXT = st.sampled_from(
    ["usage", '"usage":{', '"usage":null', 'say "usage', "\\", '"usage" : {"a": 1}']
) | st.text(max_size=8)
JSON_KEY = st.sampled_from(["usage", "content", 'x"usage', "choices"]) | st.text(max_size=4)
JSON_VALUE = st.recursive(
    st.none() | st.integers() | JSON_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(JSON_KEY, inner, max_size=3),
    max_leaves=8,
)
SEPARATORS = st.sampled_from([(",", ":"), (", ", ": "), (",", " : "), (",\t", ":\t")])


@given(
    payload=st.dictionaries(JSON_KEY, JSON_VALUE, max_size=4),
    usage=st.none() | st.dictionaries(st.sampled_from(["prompt_tokens", "x"]), st.integers()),
    separators=SEPARATORS,
    ascii_only=st.booleans(),
)
def test_no_event_with_a_usage_object_is_copied_without_decoding(
    payload: dict[str, Any], usage: Any, separators: tuple[str, str], ascii_only: bool
) -> None:
    payload = {**payload, "usage": usage}
    raw = json.dumps(payload, separators=separators, ensure_ascii=ascii_only).encode()
    if usage_from(payload) is not None:
        assert find_usage(raw) >= 0
        assert plain_end(b"data: " + raw + b"\n\n") == 0


def openai_stream(*, contents: list[str], usage_null: bool) -> list[bytes]:
    null = {"usage": None} if usage_null else {}
    events = [event(chunk(text, **null)) for text in contents]
    events.append(event({"id": "c", "choices": [], "usage": {"prompt_tokens": 42}}))
    return [*events, b"data: [DONE]\n\n"]


@given(
    contents=st.lists(JSON_TEXT, min_size=1, max_size=6),
    usage_null=st.booleans(),
    drop=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=8),
)
def test_a_stream_read_in_any_pieces_is_relayed_whole_with_its_usage(
    contents: list[str], usage_null: bool, drop: bool, cuts: list[int]
) -> None:
    """Reads that split events anywhere: the copier resumes the plain copy after the event the
    decoder held, and relays the same bytes (without the usage chunk it was told to drop)."""
    events = openai_stream(contents=contents, usage_null=usage_null)
    whole = b"".join(events)
    at = sorted({0, len(whole), *(c for c in cuts if c < len(whole))})
    copier = Copier(web.StreamResponse(), drop_usage_chunk=drop, started=0.0)
    out = b"".join(copier.feed(whole[a:b]) for a, b in itertools.pairwise(at))
    assert out == (b"".join(events[:-2] + events[-1:]) if drop else whole)
    usage = copier.relayed(completed=True).usage
    assert copier.done and usage is not None and usage.prompt_tokens == 42


def test_after_an_event_split_between_reads_the_rest_is_copied_plain() -> None:
    """The decoder gets the end of the event it holds, and no more of the read."""
    events = openai_stream(contents=["a", "b", "c"], usage_null=True)
    copier = Copier(web.StreamResponse(), drop_usage_chunk=False, started=0.0)
    half = len(events[0]) // 2
    assert copier.feed(events[0][:half]) == b""
    rest = events[0][half:] + events[1] + events[2]
    assert copier.plain_span(rest) == (len(rest) - len(events[1] + events[2]), len(rest))
    assert copier.feed(rest) == events[0] + events[1] + events[2]


async def test_a_stream_with_null_usage_in_every_chunk_keeps_its_usage(
    make_proxy: MakeProxy,
) -> None:
    """Null-usage chunks go out untouched (usage None for the SDK), the usage chunk the client
    asked for comes last, and the one the proxy asked for on its own is counted and dropped;
    text that looks like usage stays text."""
    proxy = await make_proxy()
    text = 'the key "usage":{"prompt_tokens": 1} and "usage": null are text'
    proxy.fake.default = Reply(content=text, chunks=6, prompt_tokens=4321, usage_null=True)
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    async with proxy.client() as client:
        for asked in (True, False):
            options = {"stream_options": {"include_usage": True}} if asked else {}
            stream = await client.chat.completions.create(
                **body, **options, extra_headers={"X-Ctx-Session": f"null-{asked}"}
            )
            chunks = [c async for c in stream]
            said = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            assert said == text
            usages = [c.usage for c in chunks]
            if asked:
                assert usages[-1] is not None and usages[-1].prompt_tokens == 4321
                usages.pop()
            assert usages and all(u is None for u in usages)
    await scrape(proxy)  # every after-request task has run
    for asked in (True, False):
        detail = await proxy.app[STORE].session_detail("default", f"null-{asked}")
        assert detail is not None and detail["state"]["last_prompt_tokens"] == "4321"
    assert orjson.loads(proxy.fake.chat[-1].raw)["stream_options"] == {"include_usage": True}
