"""Several upstream rounds merged into one client stream, on SSE shaped as upstreams send it."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionChunk

from proxy.recall.rounds import Round
from proxy.recall.stream import StreamMerger
from proxy.sse import SSEDecoder
from proxy.translate.anthropic_stream import AnthropicStreamTranslator
from proxy.types import JSON

Call = tuple[str, str, list[str]]
"""(name, id, argument pieces)"""


def sse(payload: JSON | str) -> bytes:
    data = payload if isinstance(payload, str) else orjson.dumps(payload).decode()
    return f"data: {data}\n\n".encode()


def openai_round(
    chat_id: str,
    *,
    content: list[str] = (),  # type: ignore[assignment]
    calls: list[Call] = (),  # type: ignore[assignment]
    usage: tuple[int, int] = (100, 10),
    include_usage: bool = True,
    created: int = 1_700_000_000,
) -> bytes:
    """One streamed answer as OpenAI sends it: a role delta, content, tool-call deltas (the
    first with id and name), the finish chunk, the usage chunk (`usage: null` on the others
    when usage was asked for), `[DONE]`."""
    base: JSON = {
        "id": chat_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": "gpt-4o-2024-08-06",
        "system_fingerprint": "fp_1",
    }

    def chunk(delta: JSON, finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        extra = {"usage": None} if include_usage else {}
        return sse({**base, "choices": [choice], **extra})

    out = chunk({"role": "assistant", "content": "", "refusal": None})
    out += b"".join(chunk({"content": piece}) for piece in content)
    for index, (name, call_id, pieces) in enumerate(calls):
        function = {"name": name, "arguments": ""}
        first = {"index": index, "id": call_id, "type": "function", "function": function}
        out += chunk({"tool_calls": [first]})
        for piece in pieces:
            out += chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    out += chunk({}, "tool_calls" if calls else "stop")
    if include_usage:
        prompt, completion = usage
        counts = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": prompt // 2},
        }
        out += sse({**base, "choices": [], "usage": counts})
    return out + sse("[DONE]")


RECALL: Call = ("ctx_recall", "call_r1", ['{"ref":', ' "call_1"}'])
BASH: Call = ("bash", "call_b1", ['{"cmd": "ls"}'])


def merge(
    rounds: list[bytes], *, wants_usage: bool, piece: int = 0, events: bool = False
) -> tuple[bytes, list[Round], StreamMerger]:
    """Feed the rounds as the wiring will (`piece` > 0: in pieces of that many bytes; `events`:
    decoded here and fed event by event), a round after each that called the tool; then the
    stream's end."""
    merger = StreamMerger(tool_name="ctx_recall", client_wants_usage=wants_usage)
    out, ended = bytearray(), []
    for data in rounds:
        decoder = SSEDecoder()
        size = piece or len(data)
        for start in range(0, len(data), size):
            if not events:
                out += merger.feed_bytes(data[start : start + size])
                continue
            for event in decoder.feed(data[start : start + size]):
                out += merger.feed(event)
        assert not merger.pending
        ended.append(merger.end_round())
        if not ended[-1].recall_calls:
            break
    return bytes(out + merger.finish()), ended, merger


def client_view(stream: bytes) -> tuple[list[JSON], int]:
    """The client's chunks (each valid for the OpenAI SDK) and how many `[DONE]` it got."""
    chunks, done = [], 0
    for event in SSEDecoder().feed(stream):
        if event.data == "[DONE]":
            done += 1
            continue
        assert done == 0, "nothing after [DONE]"
        ChatCompletionChunk.model_validate_json(event.data)
        chunks.append(orjson.loads(event.data))
    return chunks, done


def deltas(chunks: list[JSON]) -> list[JSON]:
    return [c["choices"][0]["delta"] for c in chunks if c["choices"]]


def test_no_recall_call_relays_the_stream_byte_for_byte() -> None:
    upstream = openai_round("chatcmpl-1", content=["Hel", "lo"], calls=[BASH])
    out, ended, merger = merge([upstream], wants_usage=True)
    assert out == upstream
    assert ended[0].client_calls == (
        {
            "id": "call_b1",
            "type": "function",
            "function": {"name": "bash", "arguments": '{"cmd": "ls"}'},
        },
    )
    assert merger.usage is not None and merger.usage["prompt_tokens"] == 100


def test_usage_the_proxy_asked_for_is_not_shown_but_still_counted() -> None:
    upstream = openai_round("chatcmpl-1", content=["Hi"])
    out, _, merger = merge([upstream], wants_usage=False)
    chunks, done = client_view(out)
    assert done == 1
    assert all(c["choices"] for c in chunks)  # no usage chunk
    assert merger.usage is not None and merger.usage["completion_tokens"] == 10


@pytest.mark.parametrize("wants_usage", [True, False])
def test_recall_rounds_make_one_ordinary_answer(wants_usage: bool) -> None:
    rounds = [
        openai_round("chatcmpl-1", content=["Let me ", "check. "], calls=[RECALL], usage=(100, 5)),
        openai_round(
            "chatcmpl-2", content=["It is ", "42."], usage=(180, 7), created=1_700_000_009
        ),
    ]
    out, ended, merger = merge(rounds, wants_usage=wants_usage)
    assert b"ctx_recall" not in out and b"call_r1" not in out
    chunks, done = client_view(out)
    assert done == 1
    assert {(c["id"], c["created"], c["model"]) for c in chunks} == {
        ("chatcmpl-1", 1_700_000_000, "gpt-4o-2024-08-06")
    }
    said = deltas(chunks)
    assert [d for d in said if "role" in d] == [
        {"role": "assistant", "content": "", "refusal": None}
    ]
    assert "".join(d.get("content") or "" for d in said) == "Let me check. It is 42."
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert [f for f in finishes if f] == ["stop"] and finishes[-1] == "stop"
    usage = [c["usage"] for c in chunks if not c["choices"]]
    total = {
        "prompt_tokens": 280,
        "completion_tokens": 12,
        "total_tokens": 292,
        "prompt_tokens_details": {"cached_tokens": 140},
    }
    assert usage == ([total] if wants_usage else [])
    assert merger.usage == total and merger.usages[-1]["prompt_tokens"] == 180
    assert ended[0].recall_calls == (
        {
            "id": "call_r1",
            "type": "function",
            "function": {"name": "ctx_recall", "arguments": '{"ref": "call_1"}'},
        },
    )
    assert ended[0].content == "Let me check. "


def test_a_mixed_answer_drops_every_call_and_the_next_rounds_are_indexed_from_zero() -> None:
    rounds = [
        openai_round("chatcmpl-1", calls=[BASH, RECALL]),
        openai_round("chatcmpl-2", calls=[RECALL]),
        openai_round("chatcmpl-3", content=["ok"], calls=[("read", "call_x", ["{}"]), BASH]),
    ]
    out, ended, _ = merge(rounds, wants_usage=True)
    assert len(ended) == 3 and ended[0].client_calls[0]["id"] == "call_b1"
    chunks, _ = client_view(out)
    calls = [call for d in deltas(chunks) for call in d.get("tool_calls") or ()]
    assert [(c["index"], c.get("id")) for c in calls] == [
        (0, "call_x"),
        (0, None),
        (1, "call_b1"),
        (1, None),
    ]
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "tool_calls"
    assert {c["id"] for c in chunks} == {"chatcmpl-1"}
    assert b"ctx_recall" not in out


def test_rounds_that_stop_while_the_model_still_calls_end_the_stream_cleanly() -> None:
    """`max_rounds` reached (or a recall call in the last round): the held round is finished
    with the client's calls of it, re-indexed from 0."""
    merger = StreamMerger(tool_name="ctx_recall", client_wants_usage=True)
    decoder = SSEDecoder()
    out = bytearray()
    for event in decoder.feed(openai_round("chatcmpl-1", calls=[RECALL, BASH])):
        out += merger.feed(event)
    assert merger.end_round().recall_calls
    out += merger.finish()
    chunks, done = client_view(bytes(out))
    calls = [call for d in deltas(chunks) for call in d.get("tool_calls") or ()]
    assert [c["index"] for c in calls] == [0, 0] and calls[0]["id"] == "call_b1"
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "tool_calls"
    assert done == 1 and len([c for c in chunks if not c["choices"]]) == 1


def test_content_goes_out_as_it_arrives_and_calls_wait_for_the_finish() -> None:
    merger = StreamMerger(tool_name="ctx_recall", client_wants_usage=False)
    events = SSEDecoder().feed(
        openai_round("c", content=["a", "b"], calls=[BASH], include_usage=False)
    )
    sent = [merger.feed(event) for event in events]
    assert sent[0] == events[0].raw and sent[1] == events[1].raw and sent[2] == events[2].raw
    assert sent[3] == sent[4] == b""  # the call's deltas
    assert sent[5] == events[3].raw + events[4].raw + events[5].raw  # calls, then the finish
    assert sent[6] == b""  # [DONE] comes with finish()
    merger.end_round()
    assert merger.finish() == b"data: [DONE]\n\n"


def test_an_error_event_is_relayed_and_a_cut_round_has_no_finish() -> None:
    merger = StreamMerger(tool_name="ctx_recall", client_wants_usage=False)
    first = openai_round("c", content=["partial"]).split(b"\n\n")[:2]
    out = b"".join(merger.feed(e) for e in SSEDecoder().feed(b"\n\n".join(first) + b"\n\n"))
    error = sse({"error": {"message": "overloaded", "type": "upstream_error"}})
    out += merger.feed(SSEDecoder().feed(error)[0])
    assert out.endswith(error) and merger.failed
    assert merger.end_round().finish_reason is None


def anthropic_round(translator: AnthropicStreamTranslator, *, tool: str | None) -> bytes:
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"message": {"id": "msg_1", "usage": {"input_tokens": 50}}}),
        ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "Hm. "}}),
    ]
    if tool:
        use = {"type": "tool_use", "id": "toolu_1", "name": tool}
        arguments = {"type": "input_json_delta", "partial_json": '{"query": "disk"}'}
        events += [
            ("content_block_start", {"index": 1, "content_block": use}),
            ("content_block_delta", {"index": 1, "delta": arguments}),
        ]
    reason = "tool_use" if tool else "end_turn"
    events += [
        ("message_delta", {"delta": {"stop_reason": reason}, "usage": {"output_tokens": 9}}),
        ("message_stop", {}),
    ]
    return b"".join(translator.feed(name, data) for name, data in events)


def test_a_translated_anthropic_stream_merges_the_same_way() -> None:
    rounds = [
        anthropic_round(
            AnthropicStreamTranslator(model="claude", include_usage=True), tool="ctx_recall"
        ),
        anthropic_round(AnthropicStreamTranslator(model="claude", include_usage=True), tool=None),
    ]
    out, ended, merger = merge(rounds, wants_usage=True)
    assert ended[0].recall_calls[0]["function"]["arguments"] == '{"query": "disk"}'
    chunks, done = client_view(out)
    assert "".join(d.get("content") or "" for d in deltas(chunks)) == "Hm. Hm. "
    assert [c["usage"] for c in chunks if not c["choices"]] == [merger.usage]
    assert merger.usage is not None and merger.usage["prompt_tokens"] == 100
    assert done == 1 and b"toolu_1" not in out


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=1, max_value=400), st.booleans(), st.booleans())
def test_any_split_of_the_upstream_bytes_gives_the_same_client_stream(
    piece: int, events: bool, wants_usage: bool
) -> None:
    rounds = [
        openai_round("chatcmpl-1", content=["é ", "ü"], calls=[BASH, RECALL]),
        openai_round("chatcmpl-2", content=["done"], calls=[BASH]),
    ]
    whole, ended, _ = merge(rounds, wants_usage=wants_usage)
    assert merge(rounds, wants_usage=wants_usage, piece=piece, events=events)[0] == whole
    assert ended[0].content == "é ü"


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=1, max_value=300))
def test_a_stream_without_recall_is_relayed_unchanged_however_it_is_split(piece: int) -> None:
    upstream = openai_round("chatcmpl-1", content=["a", "b", "c"] * 5, calls=[BASH])
    assert merge([upstream], wants_usage=True, piece=piece)[0] == upstream


def test_a_stream_cut_mid_event_leaves_bytes_pending() -> None:
    merger = StreamMerger(tool_name="ctx_recall", client_wants_usage=False)
    merger.feed_bytes(openai_round("c", content=["x"])[:150])
    assert merger.pending


def reshaped(stream: bytes, *, multiline: bool) -> bytes:
    """`stream` with each JSON event written as a JSON encoder may: spaces around `:` and after
    `,`, or (`multiline`) an object over several `data:` lines, a line end after each `:`."""
    out = bytearray()
    for event in SSEDecoder().feed(stream):
        if event.data == "[DONE]":
            out += event.raw
            continue
        text = json.dumps(json.loads(event.data), separators=(", ", " : "))
        if multiline:
            text = json.dumps(json.loads(event.data), separators=(",", ":\n"))
        out += b"".join(b"data: " + line.encode() + b"\n" for line in text.split("\n")) + b"\n"
    return bytes(out)


@pytest.mark.parametrize("multiline", [False, True], ids=["spaced", "multiline"])
@pytest.mark.parametrize("reads", ["events", "rest"])
def test_usage_and_finish_are_found_however_the_json_is_spaced(multiline: bool, reads: str) -> None:
    """Reads of whole events (each alone, or all after the first): the undecoded path."""
    upstream = reshaped(openai_round("chatcmpl-1", content=["Hi"]), multiline=multiline)
    assert b'"usage":{' not in upstream and b'"usage": {' not in upstream
    events = [e.raw for e in SSEDecoder().feed(upstream)]
    merger = StreamMerger(tool_name="ctx_recall", client_wants_usage=True)
    split = events if reads == "events" else [events[0], b"".join(events[1:])]
    out = b"".join(merger.feed_bytes(read) for read in split)
    ended = merger.end_round()
    assert ended.finish_reason == "stop"
    assert merger.usage is not None and merger.usage["prompt_tokens"] == 100
    chunks, done = client_view(out + merger.finish())
    assert [c["usage"]["prompt_tokens"] for c in chunks if c.get("usage")] == [100]
    assert done == 1
