"""Anthropic Messages stream events → chat-completions chunk SSE bytes, incrementally (pure).

Feed each decoded event (`feed(name, data)`); each call returns the bytes to send, maybe none:

    message_start        → the role chunk (`delta: {"role": "assistant", "content": ""}`); its
                           message's `diagnostics` are kept for the usage chunk
    text_delta           → `delta.content`;  thinking_delta → `delta.reasoning_content`
    tool_use block start → a tool call chunk with the next `index` (0, 1, 2 in order of
                           appearance), its id and name, and `arguments: ""`
    input_json_delta     → argument deltas; their concatenation is the tool input JSON (a tool
                           whose input came without any delta gets `{}` when its block stops)
    message_delta        → remembered (stop_reason, cumulative usage)
    message_stop         → the finish_reason chunk, the usage chunk (`choices: []`) when
                           `include_usage`, then `data: [DONE]`
    error                → an in-band `data: {"error": {...}}` event; the stream is over
    ping, anything else  → nothing

After message_stop or an error `done` is true and further events give nothing.
"""

from __future__ import annotations

from typing import Any

import orjson

from proxy.sse import DONE, data_event, error_event, stream_error
from proxy.translate.anthropic_response import chat_usage, finish_reason, to_openai_error
from proxy.types import JSON


class AnthropicStreamTranslator:
    """Incremental translator for one streamed answer; one instance per request."""

    def __init__(self, *, model: str, include_usage: bool = False, created: int = 0) -> None:
        self.model = model
        self.include_usage = include_usage
        self.created = created
        self.done = False
        self._id = ""
        self._usage: JSON = {}
        self._diagnostics: object = None
        self._stop_reason: Any = None
        self._tools: dict[int, int] = {}
        """Anthropic block index → tool call index."""
        self._tool_has_args: dict[int, bool] = {}

    def feed(self, name: str, data: JSON) -> bytes:
        """Bytes for one event (`name` is the SSE event name, else `data["type"]`)."""
        if self.done:
            return b""
        kind = name or str(data.get("type", ""))
        handler = getattr(self, f"_on_{kind}", None)
        return handler(data) if handler is not None else b""

    def fail(self, message: str, error_type: str = "api_error", code: str | None = None) -> bytes:
        """An in-band error event ending the stream (for the adapter: idle gap, cut-off)."""
        if self.done:
            return b""
        self.done = True
        return stream_error(message, error_type, code=code)

    def _chunk(self, delta: JSON, finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return data_event(self._envelope(choices=[choice]))

    def _envelope(self, **fields: Any) -> JSON:
        return {
            "id": self._id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            **fields,
        }

    def _on_message_start(self, data: JSON) -> bytes:
        message = data.get("message") or {}
        self._id = str(message.get("id", ""))
        self._usage = dict(message.get("usage") or {})
        self._diagnostics = message.get("diagnostics")  # the cache-miss reason, when asked
        return self._chunk({"role": "assistant", "content": ""})

    def _on_content_block_start(self, data: JSON) -> bytes:
        block = data.get("content_block") or {}
        if block.get("type") == "text" and block.get("text"):
            return self._chunk({"content": block["text"]})
        if block.get("type") != "tool_use":
            return b""
        index = len(self._tools)
        self._tools[int(data.get("index", 0))] = index
        function = {"name": block.get("name", ""), "arguments": ""}
        call = {"index": index, "id": block.get("id", ""), "type": "function", "function": function}
        return self._chunk({"tool_calls": [call]})

    def _on_content_block_delta(self, data: JSON) -> bytes:
        delta = data.get("delta") or {}
        kind = delta.get("type")
        if kind == "text_delta" and delta.get("text"):
            return self._chunk({"content": delta["text"]})
        if kind == "thinking_delta" and delta.get("thinking"):
            return self._chunk({"reasoning_content": delta["thinking"]})
        block = int(data.get("index", 0))
        if kind == "input_json_delta" and delta.get("partial_json") and block in self._tools:
            self._tool_has_args[block] = True
            return self._arguments(block, delta["partial_json"])
        return b""

    def _on_content_block_stop(self, data: JSON) -> bytes:
        block = int(data.get("index", 0))
        if block in self._tools and not self._tool_has_args.get(block):
            self._tool_has_args[block] = True
            return self._arguments(block, "{}")
        return b""

    def _arguments(self, block: int, text: str) -> bytes:
        call = {"index": self._tools[block], "function": {"arguments": text}}
        return self._chunk({"tool_calls": [call]})

    def _on_message_delta(self, data: JSON) -> bytes:
        delta = data.get("delta") or {}
        if delta.get("stop_reason"):
            self._stop_reason = delta["stop_reason"]
        usage = data.get("usage") or {}
        # message_delta usage is cumulative: its counters replace those of message_start.
        self._usage.update({k: v for k, v in usage.items() if v is not None})
        return b""

    def _on_message_stop(self, data: JSON) -> bytes:
        self.done = True
        out = self._chunk({}, finish_reason(self._stop_reason))
        if self.include_usage:
            out += data_event(
                self._envelope(choices=[], usage=chat_usage(self._usage, self._diagnostics))
            )
        return out + DONE

    def _on_error(self, data: JSON) -> bytes:
        self.done = True
        _, body = to_openai_error(500, orjson.dumps(data))
        return error_event(body)
