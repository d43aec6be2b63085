"""Server-Sent Events on the wire (WHATWG HTML §9.2.6), both ways: the one module that writes and
reads them.

Reading: a pure, incremental decoder that keeps raw bytes. Feed it bytes as they arrive; it returns
each complete event with the exact bytes it came in, so a relay can forward events untouched (or
drop one) without ever re-encoding. Handles `\\n`, `\\r\\n` and `\\r` line ends split anywhere,
comments, multi-line `data:` and UTF-8 split across chunks. A partial event is never returned.

Writing: `sse_event` (one named event of JSON: the Messages and Responses streams), `data_event`
(one `data:` event of JSON), `error_event` (the in-band error event that ends a stream which has
already started: an OpenAI-shaped error body as its data) and `DONE`.

Watching: `find_set_key`, where an event's bytes may set a JSON key (`"usage"`, `"finish_reason"`)
to something other than null: what a relay must decode, the rest it copies as it came.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NamedTuple

import orjson

from proxy.errors import error_body

DONE = b"data: [DONE]\n\n"
"""The last event of a chat-completions stream."""


_NULL_VALUE = re.compile(rb"[ \t\r\n]*:[ \t\r\n]*null")
"""What follows a key whose value is null (JSON whitespace allowed around the colon)."""


def find_set_key(data: bytes, key: bytes, start: int = 0, stop: int | None = None) -> int:
    """Where the first `key` (quoted: `b'"usage"'`) in `data[start:stop]` whose value is not
    `null` starts, or -1.

    Byte matching, no JSON decoding. A key is never missed however the JSON is spaced or split
    over `data:` lines: anything after it but `: null` counts as set. A key inside a JSON string
    is escaped (`\\"usage\\"`) and not found; one that ends a string (`"say \\"usage"`) is found
    and costs only a decode."""
    end = len(data) if stop is None else stop
    at = data.find(key, start, end)
    while at >= 0 and _NULL_VALUE.match(data, at + len(key)):
        at = data.find(key, at + len(key), end)
    return at


def sse_event(name: str, payload: object) -> bytes:
    """One named event (`event: NAME`) carrying `payload` as compact JSON: the Messages and
    Responses APIs' streams name every event."""
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


def data_event(payload: object) -> bytes:
    """One `data:` event carrying `payload` as compact JSON."""
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def error_event(body: Mapping[str, object]) -> bytes:
    """The in-band error event: `body` is an OpenAI-shaped error (`proxy.errors.error_body`)."""
    return data_event(body)


def stream_error(message: str, error_type: str, *, code: str | None = None) -> bytes:
    """`error_event` of a new error body."""
    return error_event(error_body(message, error_type, code=code))


class SSEvent(NamedTuple):
    """One dispatched event: its fields and the raw bytes it occupied on the wire.

    A named tuple rather than a frozen dataclass: one is built per event of every stream."""

    raw: bytes
    data: str = ""
    event: str = ""
    id: str | None = None
    is_comment_only: bool = False


class SSEDecoder:
    """Incremental decoder. `feed(chunk)` -> complete events; `pending` -> bytes held back."""

    __slots__ = (
        "_buf", "_cr", "_data", "_event", "_event_start", "_id", "_pos", "_saw_field", "_scan",
    )  # fmt: skip

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0
        self._scan = 0  # bytes before this hold no line end: a long line is scanned once
        self._event_start = 0
        self._data: list[bytes] = []
        self._event = ""
        self._id: str | None = None
        self._saw_field = False
        self._cr = False

    @property
    def idle(self) -> bool:
        """Nothing held back: the next byte starts a line of a new event."""
        return not self._buf and not self._cr and not self._saw_field and not self._data

    @property
    def pending(self) -> bytes:
        """Bytes of an event not yet complete (a cut-off stream leaves these behind)."""
        rest = bytes(self._buf[self._event_start :])
        return rest if rest.strip(b"\r\n") else b""

    @property
    def tail(self) -> bytes:
        """Line-end bytes after the last event that belong to no event yet.

        A `\r\n` split across chunks right after an event's blank line: the event is
        dispatched at the `\r` (no waiting for the next chunk), and its `\n` is counted in the
        next event's `raw`, or left here when the stream ends. A relay writes it last, so the
        stream it forwards is byte for byte the one it read."""
        rest = bytes(self._buf[self._event_start :])
        return b"" if rest.strip(b"\r\n") else rest

    def feed(self, chunk: bytes) -> list[SSEvent]:
        if not self._buf and not self._cr and chunk.endswith(b"\n") and b"\r" not in chunk:
            return self._feed_lines(chunk)
        self._buf += chunk
        events: list[SSEvent] = []
        buf = self._buf
        while True:
            line_end, next_pos = self._next_line(buf)
            if line_end < 0:
                break
            line = bytes(buf[self._pos : line_end])
            self._pos = next_pos
            if line:
                self._take_line(line)
            elif self._saw_field or self._data:
                events.append(self._dispatch(bytes(buf[self._event_start : next_pos])))
            else:
                self._event_start = next_pos  # blank line with nothing pending
        if self._event_start > 0 and self._event_start == self._pos:
            del buf[: self._event_start]
            self._scan = max(0, self._scan - self._event_start)
            self._pos = self._event_start = 0
        return events

    def _feed_lines(self, chunk: bytes) -> list[SSEvent]:
        """`feed` when nothing is held back and `chunk` is whole `\n`-ended lines (the usual
        case: an upstream writes whole events), without copying through the buffer."""
        events: list[SSEvent] = []
        start = end = 0
        for line in chunk.split(b"\n")[:-1]:
            end += len(line) + 1
            if line:
                self._take_line(line)
                continue
            if self._saw_field or self._data:
                events.append(self._event_of(chunk[start:end]))
            start = end
        if start < end:  # an event still open: hold its lines back, as `feed` would
            self._buf += chunk[start:]
            self._pos = len(self._buf)
        return events

    def _next_line(self, buf: bytearray) -> tuple[int, int]:
        """(end of line content, start of next line), or (-1, -1) when no full line yet."""
        pos = self._pos
        if self._cr:
            if pos >= len(buf):
                return -1, -1
            if buf[pos] == 0x0A:
                # the "\n" of a "\r\n" pair split across chunks: skip it, keep its byte in `raw`
                pos += 1
                self._pos = pos
            self._cr = False
        start = max(pos, self._scan)
        lf = buf.find(b"\n", start)
        cr = buf.find(b"\r", start, lf if lf >= 0 else len(buf))  # a "\r" after lf can wait
        if cr >= 0 and (lf < 0 or cr < lf):
            if cr + 1 < len(buf):
                return cr, cr + 2 if buf[cr + 1] == 0x0A else cr + 1
            self._cr = True  # a lone "\r" at the end: it ends the line, a "\n" may follow
            return cr, cr + 1
        if lf >= 0:
            return lf, lf + 1
        self._scan = len(buf)
        return -1, -1

    def _take_line(self, line: bytes) -> None:
        self._saw_field = True
        if line.startswith(b":"):
            return
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            self._data.append(value)  # decoded once per event: "\n" never splits a character
            return
        text = value.decode("utf-8", errors="replace")
        if name == b"event":
            self._event = text
        elif name == b"id" and "\x00" not in text:
            self._id = text

    def _dispatch(self, raw: bytes) -> SSEvent:
        event = self._event_of(raw)
        self._event_start = self._pos
        return event

    def _event_of(self, raw: bytes) -> SSEvent:
        """The event of the fields taken so far, which are then cleared."""
        comment_only = not self._data and not self._event and self._id is None
        event = SSEvent(
            raw=raw,
            data=b"\n".join(self._data).decode("utf-8", errors="replace"),
            event=self._event,
            id=self._id,
            is_comment_only=comment_only,
        )
        self._data = []
        self._event = ""
        self._id = None
        self._saw_field = False
        return event
