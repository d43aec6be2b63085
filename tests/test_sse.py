"""The SSE decoder gives the same events, pending bytes and tail however its input is cut: whole
lines (its quick path), arbitrary cuts and single bytes (its buffered path) all agree."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.sse import SSEDecoder, SSEvent, find_set_key, sse_event

FRAGMENTS = [
    b"data:", b"data: ", b"event: x", b"id: 7", b"id: a\x00b", b":c", b"retry: 5", b"x", b" ",
    b"{\"usage\": 1}", b"\xe2\x82", b"\xac", b"\xff", b"\n", b"\n", b"\n\n", b"\r", b"\r\n",
]  # fmt: skip


def decode(chunks: list[bytes]) -> tuple[list[SSEvent], bytes, bytes]:
    """Events, pending and tail. The `\n` of a `\r\n` cut in two after an event's end moves to
    the next event's bytes, the pending ones or the tail (by design: `SSEDecoder.tail`), so one
    `\n` at either end is left out."""
    decoder = SSEDecoder()
    events = [event for chunk in chunks for event in decoder.feed(chunk)]
    trimmed = [e._replace(raw=e.raw.removeprefix(b"\n").removesuffix(b"\n")) for e in events]
    return trimmed, decoder.pending.removeprefix(b"\n"), decoder.tail.removeprefix(b"\n")


@settings(max_examples=1_500, deadline=None)
@given(
    st.lists(st.sampled_from(FRAGMENTS), max_size=30).map(b"".join),
    st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
def test_sse_decoder_agrees_with_itself_however_the_bytes_are_cut(
    wire: bytes, offsets: list[int]
) -> None:
    whole = decode([wire])
    points = sorted({o % (len(wire) + 1) for o in offsets} | {0, len(wire)})
    assert decode([wire[a:b] for a, b in itertools.pairwise(points)]) == whole
    assert decode([wire[i : i + 1] for i in range(len(wire))]) == whole
    lines = wire.split(b"\n")
    assert decode([line + b"\n" for line in lines[:-1]] + [lines[-1]]) == whole


def test_sse_decoder_reads_a_whole_event_chunk_and_holds_an_open_one() -> None:
    decoder = SSEDecoder()
    events = decoder.feed(b'data: {"a": 1}\n\n: ping\n\ndata: one\ndata: tw')
    assert [(e.data, e.is_comment_only) for e in events] == [('{"a": 1}', False), ("", True)]
    assert decoder.feed(b"o\n") == []
    assert decoder.pending == b"data: one\ndata: two\n"
    (last,) = decoder.feed(b"\n")
    assert last.data == "one\ntwo" and last.raw == b"data: one\ndata: two\n\n"


@pytest.mark.parametrize(
    ("data", "found"),
    [
        (b'{"usage":{"prompt_tokens":1}}', 1),
        (b'{"usage" : {"prompt_tokens":1}}', 1),
        (b'{"usage":\ndata: {"prompt_tokens":1}}', 1),
        (b'{"usage":null}', -1),
        (b'{"usage" :\n null}', -1),
        (b'{"usage":null,"x":{"usage" : {}}}', 19),
        (b'{"text":"say \\"usage\\" twice"}', -1),
        (b'{"other":1}', -1),
    ],
)
def test_find_set_key_finds_a_key_set_to_anything_but_null(data: bytes, found: int) -> None:
    assert find_set_key(data, b'"usage"') == found


def test_a_named_event_names_its_type_and_holds_compact_json() -> None:
    event = sse_event("message_stop", {"type": "message_stop", "n": [1, 2]})
    assert event == b'event: message_stop\ndata: {"type":"message_stop","n":[1,2]}\n\n'
    [decoded] = SSEDecoder().feed(event)
    assert (decoded.event, decoded.data) == ("message_stop", '{"type":"message_stop","n":[1,2]}')
