"""The recall loop from the pure parts, as the request path will drive it: offer the tool,
relay round 0, answer the recall calls, ask again, and give the client one answer."""

from __future__ import annotations

from collections.abc import Callable

import orjson

from proxy.adapters.memory.store import MemoryStore
from proxy.recall.answer import answer_call
from proxy.recall.index import RecallIndex, build_index, cut_kinds
from proxy.recall.stream import StreamMerger
from proxy.recall.tool import (
    RecallSettings,
    continuation,
    next_round_body,
    offer_recall,
    with_recall_tool,
)
from proxy.types import JSON
from tests.factories import assistant, call, system, tool, user
from tests.recall.test_index import LOG, pruned
from tests.recall.test_stream import client_view, deltas, openai_round

Upstream = Callable[[JSON], bytes]


async def drive(
    body: JSON, prepared: JSON, upstream: Upstream, *, settings: RecallSettings
) -> tuple[bytes, list[JSON]]:
    """The loop: (what the client receives, the bodies sent upstream)."""
    cut = cut_kinds(body["messages"], prepared["messages"], covers=0)
    offered = offer_recall(body, settings=settings, cut=bool(cut)).add
    outgoing = with_recall_tool(prepared, settings=settings) if offered else prepared
    merger = StreamMerger(tool_name=settings.tool_name, client_wants_usage=True)
    index: RecallIndex | None = None
    sent, out = [], bytearray()
    for number in range(settings.max_rounds + 1):
        sent.append(outgoing)
        out += merger.feed_bytes(upstream(outgoing))
        ended = merger.end_round()
        if not ended.recall_calls or number == settings.max_rounds:
            break
        if index is None:
            index = build_index(
                body["messages"], prepared["messages"], covers=0, tool_name=settings.tool_name
            )
        answers = [
            await answer_call(
                c["function"]["arguments"],
                index,
                settings=settings,
                reader=MemoryStore(),
                tenant="t",
            )
            for c in ended.recall_calls
        ]
        added = continuation(
            ended.content, ended.recall_calls, [a.text for a in answers], round_index=number
        )
        last = number + 1 == settings.max_rounds
        outgoing = next_round_body(outgoing, added, last=last, settings=settings)
    return bytes(out + merger.finish()), sent


def request() -> tuple[JSON, JSON]:
    messages = [
        system("rules"),
        user("task"),
        assistant(None, call("call_1")),
        tool("call_1", LOG),
        user("what was line 1234?"),
    ]
    prepared = [*messages[:3], tool("call_1", pruned(LOG, "call_1")), messages[4]]
    body = {"model": "gpt-4o", "messages": messages, "stream": True}
    return body, {**body, "messages": prepared}


def recalls_then_echoes(outgoing: JSON) -> bytes:
    """A model that recalls `call_1` when it has no recall result yet, else echoes it."""
    last = outgoing["messages"][-1]
    if last["role"] != "tool":
        arguments = orjson.dumps({"ref": "call_1"}).decode()
        return openai_round(
            "chatcmpl-1",
            content=["Checking. "],
            calls=[("ctx_recall", "call_r", [arguments[:5], arguments[5:]])],
        )
    return openai_round("chatcmpl-2", content=[last["content"]])


async def test_a_recall_by_ref_reaches_the_client_byte_for_byte_and_the_tool_never() -> None:
    body, prepared = request()
    settings = RecallSettings(max_result_chars=40_000)  # the whole log in one page
    out, sent = await drive(body, prepared, recalls_then_echoes, settings=settings)
    chunks, done = client_view(out)
    assert "".join(d.get("content") or "" for d in deltas(chunks)) == "Checking. " + LOG
    assert b"ctx_recall" not in out and done == 1
    assert len(sent) == 2
    assert sent[0]["tools"][-1]["function"]["name"] == "ctx_recall"
    assert sent[1]["messages"][: len(prepared["messages"])] == prepared["messages"]
    assert sent[1]["messages"][-1] == {"role": "tool", "tool_call_id": "call_r", "content": LOG}
    assert sent[1]["tools"] == sent[0]["tools"]  # the cached prefix stays


async def test_max_rounds_ends_with_a_round_that_may_not_call_the_tool() -> None:
    def always_recalls(outgoing: JSON) -> bytes:
        return openai_round("chatcmpl-x", calls=[("ctx_recall", "c", ['{"query": "log"}'])])

    body, prepared = request()
    out, sent = await drive(body, prepared, always_recalls, settings=RecallSettings(max_rounds=2))
    assert len(sent) == 3
    assert sent[2]["tools"] == sent[1]["tools"] == sent[0]["tools"]
    assert [s.get("tool_choice") for s in sent] == [None, None, "none"]
    chunks, done = client_view(out)
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "stop"
    assert done == 1 and b"ctx_recall" not in out


async def test_nothing_cut_offers_nothing_and_relays_as_is() -> None:
    body, _ = request()
    upstream = openai_round("chatcmpl-1", content=["plain"])
    out, sent = await drive(body, body, lambda _: upstream, settings=RecallSettings())
    assert out == upstream and "tools" not in sent[0]
