"""The recall loop's stream handling, byte by byte: a first round relayed as it came until a tool
call shows (however the upstream's reads split it), then the rounds merged into one answer."""

from __future__ import annotations

import functools
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any

import orjson
import pytest

from proxy.adapters.memory.store import MemoryStore
from proxy.engine.prepared import Prepared, tally
from proxy.ports import UpstreamReply
from proxy.recall.tool import RecallSettings
from proxy.server.recall_dialects import ChatDialect, MessagesDialect
from proxy.server.recall_loop import RecallLoop, _FirstRound
from proxy.types import JSON, Turn
from tests.factories import assistant, call, tool, user
from tests.recall.test_messages_rounds import SAID, message
from tests.recall.test_messages_stream import ANSWER, final_message, streamed
from tests.recall.test_stream import client_view, deltas, openai_round

FINISHED = re.compile(rb'"finish_reason": ?"')
LOG = "".join(f"line {i}\n" for i in range(500))


class ScriptedUpstream:
    """The `Upstream` port answering each send with the next stream, read in `piece`-byte
    reads (a read may split an event, or a key, anywhere)."""

    def __init__(self, *streams: bytes, piece: int) -> None:
        self.streams = list(streams)
        self.piece = piece
        self.bodies: list[JSON] = []

    async def send_chat(
        self, body: JSON, *, headers: Mapping[str, str], api_key: str | None
    ) -> UpstreamReply:
        self.bodies.append(body)
        data = self.streams.pop(0)

        async def reads() -> AsyncIterator[bytes]:
            for at in range(0, len(data), self.piece):
                yield data[at : at + self.piece]

        async def release() -> None:
            return None

        return UpstreamReply(200, {}, None, reads(), release)


def loop_for(upstream: ScriptedUpstream, *, messages_api: bool = False) -> RecallLoop[Any]:
    """The loop of a request whose `call_1` result (LOG) was cut; in chat completions, or in
    the Messages API's form (its first round's body the same, as the scripted upstream ignores
    it)."""
    client = [user("go"), assistant(None, call("call_1")), tool("call_1", LOG), user("line 7?")]
    prepared = [*client[:2], tool("call_1", LOG[:100] + "...(cut)"), client[3]]
    body = {"model": "m", "messages": client, "stream": True}
    outgoing = {**body, "messages": prepared, "tools": [{"type": "function"}]}
    made = Prepared(Turn("t", "s", "m", now=0.0), outgoing, (), "", 0, 0, tally(()))
    dialect: Any = ChatDialect(upstream, outgoing, RecallSettings(), {}, None)
    if messages_api:
        send = functools.partial(upstream.send_chat, headers={}, api_key=None)
        dialect = MessagesDialect(send, outgoing, "ctx_recall")
    return RecallLoop(
        dialect=dialect, body=body, prepared=made, settings=RecallSettings(), reader=MemoryStore()
    )


async def client_bytes(loop: RecallLoop[Any], upstream: ScriptedUpstream) -> bytes:
    first = await upstream.send_chat(loop._prepared.body, headers={}, api_key=None)
    reply = await loop.rounds(first)
    assert reply.stream is not None
    out = b"".join([chunk async for chunk in reply.stream])
    await reply.release()
    return out


@pytest.mark.parametrize("piece", [1, 7, 64, 100_000])
async def test_a_recall_split_across_any_reads_is_answered_and_never_shown(piece: int) -> None:
    arguments = orjson.dumps({"ref": "call_1"}).decode()
    first = openai_round("c-1", content=["Checking. "], calls=[("ctx_recall", "rc_1", [arguments])])
    second = openai_round("c-2", content=["line 7 is ", "line 7"])
    upstream = ScriptedUpstream(first, second, piece=piece)
    loop = loop_for(upstream)
    out = await client_bytes(loop, upstream)
    chunks, done = client_view(out)
    assert "".join(d.get("content") or "" for d in deltas(chunks)) == "Checking. line 7 is line 7"
    assert b"ctx_recall" not in out and done == 1
    assert upstream.bodies[1]["messages"][-1] == {
        "role": "tool", "tool_call_id": "rc_1", "content": LOG}  # fmt: skip
    assert {c["id"] for c in chunks} == {"c-1"}
    tally = loop.tally
    assert (tally.recalls, tally.rounds, tally.counts) == (1, 2, {("ref", "hit"): 1})
    assert tally.last_usage is not None and tally.last_usage.prompt_tokens == 100


@pytest.mark.parametrize("piece", [1, 13, 100_000])
async def test_a_round_without_a_tool_call_goes_out_as_it_came(piece: int) -> None:
    stream = openai_round("c-1", content=["plain ", "answer"])
    upstream = ScriptedUpstream(stream, piece=piece)
    assert await client_bytes(loop_for(upstream), upstream) == stream
    assert len(upstream.bodies) == 1


def test_the_first_round_sends_whole_events_and_holds_a_part_until_a_tool_call_shows() -> None:
    first = _FirstRound(trigger=b'"tool_calls"', finished=FINISHED)
    assert first.take(b'data: {"a":1}\n\ndata: {"choices":[{"delta":{"tool_') == (
        b'data: {"a":1}\n\n'
    )
    assert not first.engaged and first.held.endswith(b'"tool_')
    assert first.take(b'calls":[]}}]}\n\n') == b""
    assert first.engaged and first.rest == b'data: {"choices":[{"delta":{"tool_calls":[]}}]}\n\n'
    assert first.sent == [b'data: {"a":1}\n\n'] and first.held == b""
    done = _FirstRound(trigger=b'"tool_calls"', finished=FINISHED)
    assert done.take(b'data: {"choices":[{"finish_reason":"stop"}]}\n\ndata: [DO') != b""
    assert done.finished and done.held == b"data: [DO"


@pytest.mark.parametrize("piece", [1, 7, 64, 100_000])
async def test_a_messages_api_recall_split_across_any_reads_is_one_message(piece: int) -> None:
    recall = {"type": "tool_use", "id": "toolu_r", "name": "ctx_recall", "input": {"ref": "call_1"}}
    first = streamed(message("m1", SAID, recall, usage=(100, 10)))
    second = streamed(message("m2", ANSWER, usage=(300, 20)))
    upstream = ScriptedUpstream(first, second, piece=piece)
    loop = loop_for(upstream, messages_api=True)
    out = await client_bytes(loop, upstream)
    done = final_message(out)
    assert b"ctx_recall" not in out and done.id == "m1"
    assert [b.text for b in done.content] == ["Checking. ", "Line 7 is x."]
    assert (done.usage.input_tokens, done.usage.output_tokens) == (400, 30)
    continued = upstream.bodies[1]["messages"][-2:]
    assert continued == [
        {"role": "assistant", "content": [SAID, recall]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_r",
                                      "content": LOG}]},
    ]  # fmt: skip
    tally = loop.tally
    assert (tally.recalls, tally.rounds, tally.counts) == (1, 2, {("ref", "hit"): 1})
    assert tally.last_usage is not None and tally.last_usage.prompt_tokens == 300 + 150
    assert tally.first_usage is not None and tally.first_usage.prompt_tokens == 100 + 50


@pytest.mark.parametrize("piece", [1, 13, 100_000])
async def test_a_messages_api_round_without_a_tool_call_goes_out_as_it_came(piece: int) -> None:
    stream = streamed(message("m1", SAID, ANSWER))
    upstream = ScriptedUpstream(stream, piece=piece)
    assert await client_bytes(loop_for(upstream, messages_api=True), upstream) == stream
    assert len(upstream.bodies) == 1
