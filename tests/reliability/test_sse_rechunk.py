"""SSE re-chunked anywhere: the decoder and the relay see and pass the same event sequence."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.server.appkeys import STORE
from proxy.sse import SSEDecoder
from tests.reliability.conftest import MakeRig
from tests.reliability.support import Rig, auth, chat

TEXT = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n\x00"),
    max_size=12,
)
ENDINGS = st.sampled_from(["\n", "\r\n", "\r"])


@dataclass(frozen=True)
class Spec:
    data: tuple[str, ...]
    comments: tuple[str, ...] = ()
    event: str = ""
    id: str | None = None


specs = st.builds(
    Spec,
    data=st.lists(TEXT, min_size=0, max_size=3).map(tuple),
    comments=st.lists(TEXT, max_size=2).map(tuple),
    event=st.one_of(st.just(""), st.text(alphabet="abcxyz_", min_size=1, max_size=6)),
    id=st.one_of(st.none(), st.text(alphabet="0123456789ab", max_size=4)),
)


def encode(events: list[Spec], endings: list[str]) -> tuple[bytes, list[bytes]]:
    """The wire bytes and each event's own bytes. A `\\r` never precedes a `\\n` ending, which
    would make the two one line end."""
    cycle = itertools.cycle(endings)
    out: list[bytes] = []
    last = ""
    for spec in events:
        lines = [f":{c}" for c in spec.comments]
        lines += [f"event: {spec.event}"] if spec.event else []
        lines += [f"id: {spec.id}"] if spec.id is not None else []
        lines += [f"data: {d}" for d in spec.data]
        lines = lines or [":"]
        text = ""
        for line in [*lines, ""]:
            ending = next(cycle)
            if last == "\r" and ending == "\n":
                ending = "\r\n"
            text += line + ending
            last = ending
        out.append(text.encode())
    return b"".join(out), out


def cut(wire: bytes, offsets: list[int], *, bytewise: bool) -> list[bytes]:
    if bytewise:
        return [wire[i : i + 1] for i in range(len(wire))]
    points = sorted({o % (len(wire) + 1) for o in offsets} | {0, len(wire)})
    return [wire[a:b] for a, b in itertools.pairwise(points) if b > a]


@settings(max_examples=600, deadline=None)
@given(
    events=st.lists(specs, min_size=1, max_size=8),
    endings=st.lists(ENDINGS, min_size=1, max_size=4),
    offsets=st.lists(st.integers(min_value=0, max_value=10_000), max_size=20),
    bytewise=st.booleans(),
)
def test_decoder_returns_every_event_with_its_bytes_however_the_stream_is_cut(
    events: list[Spec], endings: list[str], offsets: list[int], bytewise: bool
) -> None:
    wire, raws = encode(events, endings)
    decoder = SSEDecoder()
    got = [e for chunk in cut(wire, offsets, bytewise=bytewise) for e in decoder.feed(chunk)]
    assert b"".join(e.raw for e in got) + decoder.tail == wire
    # the `\n` of a `\r\n` split after an event's blank line moves to the next event's bytes
    assert [_trim(e.raw) for e in got] == [_trim(r) for r in raws]
    assert [e.data for e in got] == ["\n".join(s.data) for s in events]
    assert [e.event for e in got] == [s.event for s in events]
    assert [e.id for e in got] == [s.id for s in events]
    assert decoder.pending == b""


def _trim(raw: bytes) -> bytes:
    return raw.removeprefix(b"\n").removesuffix(b"\n")


def test_a_one_mebibyte_event_fed_byte_by_byte_comes_out_whole() -> None:
    payload = "é" * (512 * 1024)  # 1 MiB of two-byte characters, split inside each one
    wire = f"data: {payload}\r\n\r\n".encode()
    decoder = SSEDecoder()
    got = [e for i in range(len(wire)) for e in decoder.feed(wire[i : i + 1])]
    assert [e.data for e in got] == [payload]
    assert got[0].raw + decoder.tail == wire


@dataclass
class Scripted:
    """An upstream that writes the current example's chunks one by one."""

    chunks: list[bytes] = field(default_factory=list)
    served: int = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        self.served += 1
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for chunk in self.chunks:
            await response.write(chunk)
        await response.write_eof()
        return response


def chunk_event(text: str, *, ending: str) -> bytes:
    body = {"id": "c", "object": "chat.completion.chunk", "choices": [
        {"index": 0, "delta": {"content": text}, "finish_reason": None}]}  # fmt: skip
    return b"data: " + orjson.dumps(body) + ending.encode() * 2


def usage_event(tokens: int, *, ending: str = "\r\n") -> bytes:
    usage = {"prompt_tokens": tokens, "completion_tokens": 1, "total_tokens": tokens + 1}
    body = orjson.dumps({"id": "c", "choices": [], "usage": usage})
    return b"data: " + body + ending.encode() * 2


@pytest.fixture
async def scripted(make_rig: MakeRig) -> tuple[Rig, Scripted]:
    upstream = Scripted()
    return await make_rig(upstream_app=upstream.app()), upstream


@settings(
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    texts=st.lists(TEXT, min_size=1, max_size=5),
    endings=st.lists(st.sampled_from(["\n", "\r\n"]), min_size=1, max_size=3),
    comments=st.booleans(),
    offsets=st.lists(st.integers(min_value=0, max_value=5_000), max_size=12),
    client_asked_usage=st.booleans(),
    tokens=st.integers(min_value=1, max_value=10**6),
)
async def test_relay_passes_the_same_events_and_captures_usage_once(
    scripted: tuple[Rig, Scripted],
    texts: list[str],
    endings: list[str],
    comments: bool,
    offsets: list[int],
    client_asked_usage: bool,
    tokens: int,
) -> None:
    rig, upstream = scripted
    cycle = itertools.cycle(endings)
    events = [b": keep-alive\n\n"] if comments else []
    events += [chunk_event(t, ending=next(cycle)) for t in texts]
    usage = usage_event(tokens, ending=next(cycle))
    wire = b"".join([*events, usage, b"data: [DONE]\n\n"])
    upstream.chunks = cut(wire, offsets, bytewise=len(wire) < 200 and tokens % 2 == 0)
    session = f"s-{upstream.served}"
    body: dict[str, Any] = chat(stream=True)
    if client_asked_usage:
        body["stream_options"] = {"include_usage": True}
    headers = {**auth(), "X-Ctx-Session": session}
    async with (
        aiohttp.ClientSession() as http,
        http.post(rig.url("/v1/chat/completions"), json=body, headers=headers) as r,
    ):
        got = await r.read()
    expected = wire if client_asked_usage else wire.replace(usage, b"")
    assert got == expected
    await rig.settled()
    detail = await rig.app[STORE].session_detail("default", session)
    assert detail is not None
    assert detail["state"]["last_prompt_tokens"] == str(tokens)
    assert detail["state"]["requests"] == "1"
