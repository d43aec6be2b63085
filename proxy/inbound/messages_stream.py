"""An OpenAI upstream's chat-completions SSE → the Messages API event stream, incrementally (pure).

Feed the upstream's bytes as they arrive (`feed`); each call returns the bytes to send, maybe none:

    first chunk            → `message_start` (usage as known so far: zeros, mostly), then `ping`
    delta.content          → a `text` block: `content_block_start`, then `text_delta`s
    delta.tool_calls       → a `tool_use` block per call index (id, name, `input: {}`), then
                             `input_json_delta`s with the argument fragments as they came
    a new block            → closes the open one (`content_block_stop`); blocks are numbered
                             0, 1, 2 in order of appearance
    usage (any chunk)      → remembered: the final `message_delta` carries the whole usage
                             (input, cache read, output), which the SDK takes over
    finish_reason          → remembered (stop_reason as in `proxy.inbound.messages_response`)
    [DONE], or `finish()`  → `content_block_stop`, `message_delta`, `message_stop`
      after a finish_reason
    an in-band error, or   → an `error` event; the stream is over
      `finish()` before any finish_reason (the upstream stopped short), or `fail()`

Argument fragments of a call whose block is already closed (an upstream interleaving parallel
calls) are still sent, with that call's block index: clients accumulate by index. Reasoning
deltas are not passed on (see `proxy.inbound.messages_response`). After the end `done` is true
and further input gives nothing.
"""

from __future__ import annotations

from typing import Any

import orjson

from proxy.inbound.messages_response import message_id, messages_usage, stop_reason
from proxy.inbound.sse_write import sse_event
from proxy.sse import SSEDecoder
from proxy.types import JSON
from proxy.usage import Usage, usage_from

CUT_SHORT = "The upstream stream ended before the answer was complete."


class MessagesStreamTranslator:
    """One streamed answer; one instance per request."""

    def __init__(self, *, model: str) -> None:
        self.model = model
        self.done = False
        self._decoder = SSEDecoder()
        self._id = ""
        self._started = False
        self._blocks = 0
        self._open: int | None = None
        self._text: int | None = None
        """The open text block, if the open block is one."""
        self._tools: dict[int, int] = {}
        """Chat tool call index → its block index."""
        self._finish: Any = None
        self._usage: Any = None

    @property
    def usage(self) -> Usage | None:
        """The upstream's usage as reported (None before a chunk carried one)."""
        return usage_from({"usage": self._usage})

    def feed(self, chunk: bytes) -> bytes:
        out: list[bytes] = []
        for event in self._decoder.feed(chunk):
            if self.done:
                break
            if event.data:
                out.append(self._on_data(event.data))
        return b"".join(out)

    def finish(self) -> bytes:
        """The closing events at the end of the upstream stream (an error if it stopped short)."""
        if self.done:
            return b""
        if self._finish is None:
            return self.fail(CUT_SHORT)
        return self._close()

    def fail(self, message: str, error_type: str = "api_error") -> bytes:
        """An in-band `error` event ending the stream (an idle gap, a lost connection)."""
        if self.done:
            return b""
        self.done = True
        return sse_event(
            "error", {"type": "error", "error": {"type": error_type, "message": message}}
        )

    def _on_data(self, data: str) -> bytes:
        if data.strip() == "[DONE]":
            return self._close()
        try:
            payload = orjson.loads(data)
        except orjson.JSONDecodeError:
            return b""
        if not isinstance(payload, dict):
            return b""
        if isinstance(payload.get("error"), dict) and not payload.get("choices"):
            error = payload["error"]
            return self.fail(str(error.get("message") or "upstream error"), _error_type(error))
        out = b"" if self._started else self._start(payload)
        if isinstance(payload.get("usage"), dict):
            self._usage = payload["usage"]
        choices = payload.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices else None
        if not isinstance(choice, dict):
            return out
        delta = choice.get("delta") or {}
        if isinstance(delta.get("content"), str) and delta["content"]:
            out += self._text_delta(delta["content"])
        for call in delta.get("tool_calls") or ():
            if isinstance(call, dict):
                out += self._tool_delta(call)
        if choice.get("finish_reason"):
            self._finish = choice["finish_reason"]
        return out

    def _start(self, payload: JSON) -> bytes:
        self._started = True
        self._id = message_id(payload.get("id"))
        usage = messages_usage(payload.get("usage"))
        message: JSON = {
            "id": self._id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {**usage, "output_tokens": 0},
        }
        start = sse_event("message_start", {"type": "message_start", "message": message})
        return start + sse_event("ping", {"type": "ping"})

    def _text_delta(self, text: str) -> bytes:
        out = b""
        if self._text is None:
            out = self._open_block({"type": "text", "text": ""})
            self._text = self._open
        delta = {"type": "text_delta", "text": text}
        return out + self._delta(self._text, delta)

    def _tool_delta(self, call: JSON) -> bytes:
        number = call.get("index", 0)
        out = b""
        if number not in self._tools:
            function = call.get("function") or {}
            out = self._open_block(
                {
                    "type": "tool_use",
                    "id": str(call.get("id") or f"toolu_{self._id}_{len(self._tools)}"),
                    "name": str(function.get("name") or ""),
                    "input": {},
                }
            )
            self._tools[number] = self._blocks - 1
        fragment = (call.get("function") or {}).get("arguments")
        if isinstance(fragment, str) and fragment:
            delta = {"type": "input_json_delta", "partial_json": fragment}
            out += self._delta(self._tools[number], delta)
        return out

    def _open_block(self, block: JSON) -> bytes:
        out = self._close_block()
        self._open = self._blocks
        self._blocks += 1
        payload = {"type": "content_block_start", "index": self._open, "content_block": block}
        return out + sse_event("content_block_start", payload)

    def _delta(self, index: int | None, delta: JSON) -> bytes:
        payload = {"type": "content_block_delta", "index": index, "delta": delta}
        return sse_event("content_block_delta", payload)

    def _close_block(self) -> bytes:
        if self._open is None:
            return b""
        index, self._open, self._text = self._open, None, None
        return sse_event("content_block_stop", {"type": "content_block_stop", "index": index})

    def _close(self) -> bytes:
        if self.done:
            return b""
        out = b"" if self._started else self._start({})
        out += self._close_block()
        self.done = True
        delta = {"stop_reason": stop_reason(self._finish), "stop_sequence": None}
        usage = messages_usage(self._usage)
        out += sse_event("message_delta", {"type": "message_delta", "delta": delta, "usage": usage})
        return out + sse_event("message_stop", {"type": "message_stop"})


def _error_type(error: JSON) -> str:
    """An Anthropic error type for an upstream's in-band error (its own if it is one)."""
    kind = str(error.get("type") or "")
    known = ("invalid_request_error", "rate_limit_error", "overloaded_error", "api_error")
    return kind if kind in known else "api_error"
