"""Reading a chat upstream's SSE, incrementally (pure): what the translated streams share.

`ChatStreamReader` decodes the upstream's bytes as they arrive (`feed`) and hands what each
chunk says to its subclass, which writes its own API's events
(`proxy.inbound.messages_stream`, `proxy.inbound.responses_stream`):

    [DONE]                 → `_close()`; unless `BARE_DONE_ENDS`, only after a finish_reason
    an in-band error       → `fail(message, _error_code(error))`; the stream is over
    first chunk            → `_start(payload)`, once (`_start_once`, which an end may call too)
    usage (any chunk)      → remembered (`usage`; the last one reported wins)
    delta.<TEXT_KEYS>      → `_text_delta(key, text)` for each non-empty one, in that order
    delta.tool_calls       → `_tool_delta(call)` for each call
    finish_reason          → remembered (`_finish`) after the chunk's deltas; an empty one is none
    `finish()`             → `_close()` after a finish_reason, else `fail(CUT_SHORT)`

Data that is not a JSON object is skipped. Once `done` is true further input gives nothing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import orjson

from proxy.sse import SSEDecoder
from proxy.types import JSON
from proxy.usage import Usage, usage_from

CUT_SHORT = "The upstream stream ended before the answer was complete."


class ChatStreamReader(ABC):
    """One streamed answer; one instance per request."""

    TEXT_KEYS: ClassVar[tuple[str, ...]] = ("content",)
    """The delta's text fields passed on, in this order."""
    BARE_DONE_ENDS: ClassVar[bool] = False
    """Whether `[DONE]` before any finish_reason ends the answer (else only `finish()` does)."""

    def __init__(self) -> None:
        self.done = False
        self._decoder = SSEDecoder()
        self._started = False
        self._finish: Any = None
        self._usage: Any = None

    @property
    def usage(self) -> Usage | None:
        """The upstream's usage as reported (None before a chunk carried one)."""
        return usage_from({"usage": self._usage})

    def feed(self, chunk: bytes) -> bytes:
        """The bytes to send for `chunk` of the upstream's stream, maybe none."""
        out: list[bytes] = []
        for event in self._decoder.feed(chunk):
            if self.done:
                break
            if event.data:
                out.append(self._on_data(event.data))
        return b"".join(out)

    def finish(self) -> bytes:
        """The closing events at the end of the upstream stream (a failure if it stopped short)."""
        if self.done:
            return b""
        if self._finish is None:
            return self.fail(CUT_SHORT)
        return self._close()

    @abstractmethod
    def fail(self, message: str, code: str = ...) -> bytes:
        """The event ending the stream with an error (nothing once done); `code` is the API's
        error type, with a default of its own."""

    @abstractmethod
    def _error_code(self, error: JSON) -> str:
        """The API's error type for an upstream's in-band `error` object."""

    @abstractmethod
    def _start(self, payload: JSON) -> bytes:
        """The opening events, from the first chunk (`{}` when the stream ends before one)."""

    @abstractmethod
    def _text_delta(self, key: str, text: str) -> bytes:
        """The events for `text` of the delta's field `key` (one of `TEXT_KEYS`)."""

    @abstractmethod
    def _tool_delta(self, call: JSON) -> bytes:
        """The events for one entry of the delta's `tool_calls`."""

    @abstractmethod
    def _close(self) -> bytes:
        """The closing events of a whole answer; sets `done` (nothing once done)."""

    def _start_once(self, payload: JSON) -> bytes:
        if self._started:
            return b""
        self._started = True
        return self._start(payload)

    def _on_data(self, data: str) -> bytes:
        if data.strip() == "[DONE]":
            ends = self.BARE_DONE_ENDS or self._finish is not None
            return self._close() if ends else b""
        try:
            payload = orjson.loads(data)
        except orjson.JSONDecodeError:
            return b""
        if not isinstance(payload, dict):
            return b""
        if isinstance(payload.get("error"), dict) and not payload.get("choices"):
            error = payload["error"]
            return self.fail(str(error.get("message") or "upstream error"), self._error_code(error))
        out = self._start_once(payload)
        if isinstance(payload.get("usage"), dict):
            self._usage = payload["usage"]
        choices = payload.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices else None
        if not isinstance(choice, dict):
            return out
        delta = choice.get("delta") or {}
        for key in self.TEXT_KEYS:
            if isinstance(delta.get(key), str) and delta[key]:
                out += self._text_delta(key, delta[key])
        for call in delta.get("tool_calls") or ():
            if isinstance(call, dict):
                out += self._tool_delta(call)
        if choice.get("finish_reason"):
            self._finish = choice["finish_reason"]
        return out
