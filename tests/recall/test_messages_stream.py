"""Several upstream rounds of the Messages API's events merged into one client stream, on events
as the fake Anthropic API streams them, read back by the SDK's own accumulator."""

from __future__ import annotations

from typing import Any

import orjson
import pydantic
import pytest
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import RawMessageStreamEvent

from proxy.recall.messages_rounds import MessagesRound
from proxy.recall.messages_stream import MessagesStreamMerger
from proxy.sse import SSEDecoder
from proxy.types import JSON
from tests.fakes.anthropic_upstream import Reply, stream_events
from tests.recall.test_messages_rounds import READ, RECALL, SAID, THOUGHT, message

EVENT = pydantic.TypeAdapter(RawMessageStreamEvent)
ANSWER = {"type": "text", "text": "Line 7 is x."}


def streamed(msg: JSON, *, error_after: int | None = None) -> bytes:
    """`msg` as the fake API streams it (small deltas; `message_delta` with output tokens)."""
    reply = Reply(content=tuple(msg["content"]), stop_reason=msg["stop_reason"],
                  usage=msg["usage"], error_after=error_after)  # fmt: skip
    return b"".join(
        f"event: {name}\ndata: {orjson.dumps(data).decode()}\n\n".encode()
        for name, data in stream_events(msg, reply)
    )


def merge(rounds: list[bytes], *, piece: int = 0) -> tuple[bytes, list[MessagesRound]]:
    """Feed each round (in `piece`-byte reads when set) and end it, then finish; the client's
    bytes and the rounds as they ended. Stops, as the loop does, at a round without a call."""
    merger = MessagesStreamMerger(tool_name="ctx_recall")
    out = bytearray()
    ended: list[MessagesRound] = []
    for data in rounds:
        size = piece or len(data)
        for at in range(0, len(data), size):
            out += merger.feed_bytes(data[at : at + size])
        ended.append(merger.end_round())
        if not ended[-1].recall_calls:
            break
    return bytes(out + merger.finish()), ended


def client_events(data: bytes) -> list[JSON]:
    """Each event the client got, checked against the SDK's event types (name = type)."""
    out = []
    for event in SSEDecoder().feed(data):
        payload = orjson.loads(event.data)
        assert event.event == payload["type"]
        if payload["type"] not in ("ping", "error"):  # the SDK's union has neither
            EVENT.validate_python(payload)
        out.append(payload)
    return out


def final_message(data: bytes) -> Any:
    """The message the SDK's stream helper builds of the client's events."""
    snapshot = None
    buffers: dict[int, bytes] = {}
    for payload in client_events(data):
        if payload["type"] == "ping":
            continue
        snapshot = accumulate_event(event=payload, current_snapshot=snapshot, json_bufs=buffers)  # type: ignore[arg-type]
    return snapshot


def test_a_lone_round_goes_out_byte_for_byte() -> None:
    for blocks in ((THOUGHT, SAID), (SAID, READ)):
        data = streamed(message("m1", *blocks))
        out, [ended] = merge([data])
        assert out == data and ended.recall_calls == ()


@pytest.mark.parametrize("piece", [0, 1, 17])
def test_a_recall_round_is_followed_by_the_next_as_one_message(piece: int) -> None:
    first = streamed(message("m1", THOUGHT, SAID, RECALL, READ, usage=(100, 10)))
    second = streamed(message("m2", ANSWER, usage=(300, 20)))
    out, ended = merge([first, second], piece=piece)
    assert b"ctx_recall" not in out and b"toolu_c" not in out and b"m2" not in out
    kinds = [e["type"] for e in client_events(out)]
    assert kinds.count("message_start") == kinds.count("message_delta") == 1
    assert kinds.count("message_stop") == 1 and kinds[-1] == "message_stop"
    done = final_message(out)
    assert done.id == "m1" and done.stop_reason == "end_turn"
    assert [b.type for b in done.content] == ["thinking", "text", "text"]
    assert done.content[0].signature == "c2ln" and done.content[2].text == "Line 7 is x."
    usage = done.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_input_tokens) == (
        400, 30, 200)  # fmt: skip
    recall = ended[0]
    assert recall.recall_calls == (RECALL,) and recall.client_calls == (READ,)
    assert recall.content == (THOUGHT, SAID, RECALL, READ)  # whole, as the deltas built them
    assert recall.finish_reason == "tool_use" and ended[1].recall_calls == ()


def test_the_last_rounds_client_call_is_indexed_after_the_earlier_rounds_blocks() -> None:
    first = streamed(message("m1", SAID, RECALL))
    second = streamed(message("m2", {"type": "text", "text": "Now read."}, READ))
    out, _ = merge([first, second])
    indexes = [e["index"] for e in client_events(out) if e["type"] == "content_block_start"]
    assert indexes == [0, 1, 2]
    done = final_message(out)
    assert [b.type for b in done.content] == ["text", "text", "tool_use"]
    assert done.content[2].input == READ["input"] and done.stop_reason == "tool_use"


def test_rounds_that_stop_while_the_model_still_recalls_end_the_message() -> None:
    merger = MessagesStreamMerger(tool_name="ctx_recall")
    out = merger.feed_bytes(streamed(message("m1", SAID, RECALL, READ)))
    assert merger.end_round().recall_calls == (RECALL,)
    out += merger.finish()
    done = final_message(out)
    assert [b.type for b in done.content] == ["text", "tool_use"]
    assert done.content[1].name == "Read" and done.stop_reason == "tool_use"
    assert [e["type"] for e in client_events(out)][-2:] == ["message_delta", "message_stop"]


def test_an_error_event_is_relayed_and_fails_the_rounds() -> None:
    merger = MessagesStreamMerger(tool_name="ctx_recall")
    merger.feed_bytes(streamed(message("m1", SAID, RECALL)))
    merger.end_round()
    out = merger.feed_bytes(streamed(message("m2", SAID, ANSWER), error_after=1))
    assert merger.failed and client_events(out)[-1]["type"] == "error"
    assert merger.end_round().finish_reason is None


def test_a_round_cut_mid_event_leaves_it_pending() -> None:
    merger = MessagesStreamMerger(tool_name="ctx_recall")
    data = streamed(message("m1", SAID, ANSWER))
    merger.feed_bytes(data[: len(data) // 2])
    assert merger.pending


LATER = {"type": "text", "text": "Reading it now."}


def test_a_lone_round_keeps_its_blocks_order_after_a_client_call() -> None:
    data = streamed(message("m1", SAID, READ, LATER))
    out, [ended] = merge([data])
    assert out == data and ended.recall_calls == ()
    done = final_message(out)
    assert [b.type for b in done.content] == ["text", "tool_use", "text"]


@pytest.mark.parametrize("piece", [0, 9])
def test_blocks_after_a_client_call_keep_the_models_order_across_rounds(piece: int) -> None:
    first = streamed(message("m1", SAID, READ, LATER, RECALL))
    second = streamed(message("m2", ANSWER, READ, LATER))
    out, _ = merge([first, second], piece=piece)
    starts = [e for e in client_events(out) if e["type"] == "content_block_start"]
    assert [e["index"] for e in starts] == [0, 1, 2, 3, 4]
    done = final_message(out)
    texts = [b.text if b.type == "text" else b.name for b in done.content]
    assert texts == [SAID["text"], LATER["text"], ANSWER["text"], READ["name"], LATER["text"]]


def test_rounds_stopped_while_recalling_keep_the_order_of_the_last_ones_blocks() -> None:
    rounds = [streamed(message(f"m{i}", READ, LATER, RECALL)) for i in range(2)]
    merger = MessagesStreamMerger(tool_name="ctx_recall")
    out = bytearray()
    for data in rounds:
        out += merger.feed_bytes(data)
        assert merger.end_round().recall_calls
    done = final_message(bytes(out + merger.finish()))
    assert [b.type for b in done.content] == ["text", "tool_use", "text"]
