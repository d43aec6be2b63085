"""An OpenAI upstream's chat-completions SSE → the Messages API event stream, incrementally (pure).

Feed the upstream's bytes as they arrive (`feed`, read by `proxy.inbound.chat_stream`); each call
returns the bytes to send, maybe none:

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
and further input gives nothing; `failed` tells an end by an error event from a whole answer.
"""

from __future__ import annotations

from proxy.inbound.chat_stream import ChatStreamReader
from proxy.inbound.messages_response import message_id, messages_usage, stop_reason
from proxy.sse import sse_event
from proxy.types import JSON


class MessagesStreamTranslator(ChatStreamReader):
    """One streamed answer; one instance per request."""

    BARE_DONE_ENDS = True

    def __init__(self, *, model: str) -> None:
        super().__init__()
        self.model = model
        self.failed = False
        self._id = ""
        self._blocks = 0
        self._open: int | None = None
        self._text: int | None = None
        """The open text block, if the open block is one."""
        self._tools: dict[int, int] = {}
        """Chat tool call index → its block index."""

    def fail(self, message: str, error_type: str = "api_error") -> bytes:
        """An in-band `error` event ending the stream (an idle gap, a lost connection)."""
        if self.done:
            return b""
        self.done = self.failed = True
        return sse_event(
            "error", {"type": "error", "error": {"type": error_type, "message": message}}
        )

    def _error_code(self, error: JSON) -> str:
        """An Anthropic error type for an upstream's in-band error (its own if it is one)."""
        kind = str(error.get("type") or "")
        known = ("invalid_request_error", "rate_limit_error", "overloaded_error", "api_error")
        return kind if kind in known else "api_error"

    def _start(self, payload: JSON) -> bytes:
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

    def _text_delta(self, key: str, text: str) -> bytes:
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
        out = self._start_once({}) + self._close_block()
        self.done = True
        delta = {"stop_reason": stop_reason(self._finish), "stop_sequence": None}
        usage = messages_usage(self._usage)
        out += sse_event("message_delta", {"type": "message_delta", "delta": delta, "usage": usage})
        return out + sse_event("message_stop", {"type": "message_stop"})
