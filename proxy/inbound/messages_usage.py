"""Token usage of an Anthropic upstream's answer, as `proxy.usage.Usage` (pure).

`prompt_tokens` is what the compaction trigger compares with its threshold: input + cache
creation + cache read (the whole prompt, `proxy.translate.anthropic_response.chat_usage`).

    usage_of_message(message)   a JSON answer's `usage`
    MessagesUsageWatcher        a relayed event stream: fed the bytes as they pass (the relay
                                forwards them untouched), it reads `message_start`'s usage and
                                lets each `message_delta`'s counters replace it (they are
                                cumulative); no other event is parsed. `see(event)` takes
                                one event decoded by the caller
"""

from __future__ import annotations

from typing import Any

import orjson

from proxy.sse import SSEDecoder, SSEvent
from proxy.translate.anthropic_response import chat_usage
from proxy.types import JSON
from proxy.usage import Usage, usage_from

USAGE_EVENTS = ("message_start", "message_delta")


def usage_of_message(message: Any) -> Usage | None:
    """The usage of a Messages answer, or None when it has none."""
    usage = message.get("usage") if isinstance(message, dict) else None
    return usage_from({"usage": chat_usage(usage)}) if isinstance(usage, dict) else None


class MessagesUsageWatcher:
    """Reads usage (and the stop reason) from an Anthropic event stream; one per request."""

    def __init__(self) -> None:
        self._decoder = SSEDecoder()
        self._usage: JSON | None = None
        self.stop_reason: str | None = None

    @property
    def usage(self) -> Usage | None:
        """The usage seen so far; None before `message_start`."""
        if self._usage is None:
            return None
        return usage_from({"usage": chat_usage(self._usage)})

    def feed(self, chunk: bytes) -> None:
        for event in self._decoder.feed(chunk):
            self.see(event)

    def see(self, event: SSEvent) -> None:
        """Take one decoded event (a caller decoding the stream itself)."""
        if event.event and event.event not in USAGE_EVENTS:
            return  # content deltas: most of a stream, never parsed
        if not event.event and '"message_' not in event.data[:64]:
            return
        self._take(event.data)

    def _take(self, data: str) -> None:
        try:
            payload = orjson.loads(data)
        except orjson.JSONDecodeError:
            return
        if not isinstance(payload, dict):
            return
        if payload.get("type") == "message_start":
            message = payload.get("message")
            usage = message.get("usage") if isinstance(message, dict) else None
            self._usage = dict(usage) if isinstance(usage, dict) else {}
        elif payload.get("type") == "message_delta":
            usage = payload.get("usage")
            if isinstance(usage, dict):
                known = {k: v for k, v in usage.items() if v is not None}
                self._usage = {**(self._usage or {}), **known}
            delta = payload.get("delta")
            if isinstance(delta, dict) and isinstance(delta.get("stop_reason"), str):
                self.stop_reason = delta["stop_reason"]
