"""Token usage (and the finished response) of a Responses upstream's answer, as
`proxy.usage.Usage` (pure).

`prompt_tokens` is `input_tokens` (cached tokens included, as the trigger wants: the whole
prompt); `cached_tokens` is `input_tokens_details.cached_tokens`, `cache_creation_tokens` its
`cache_write_tokens`; `completion_tokens` is `output_tokens`.

    usage_of_response(response)  a JSON answer's `usage`
    ResponsesUsageWatcher        a relayed event stream: fed the bytes as they pass (the relay
                                 forwards them untouched), it parses only the terminal events
                                 (`response.completed`, `response.incomplete`,
                                 `response.failed`) and `response.output_item.done`, never a
                                 delta; `response` is the finished Response (its output filled
                                 in from the item events when the terminal event leaves it
                                 out), for the response store
"""

from __future__ import annotations

from typing import Any

import orjson

from proxy.sse import SSEDecoder
from proxy.types import JSON
from proxy.usage import Usage, usage_from

TERMINAL = ("response.completed", "response.incomplete", "response.failed")
WATCHED = (*TERMINAL, "response.output_item.done")


def chat_usage(usage: Any) -> JSON:
    """Responses usage → the chat-completions usage `proxy.usage.usage_from` reads."""
    usage = usage if isinstance(usage, dict) else {}
    details = usage.get("input_tokens_details")
    details = details if isinstance(details, dict) else {}
    out: JSON = {
        "prompt_tokens": usage.get("input_tokens"),
        "completion_tokens": usage.get("output_tokens"),
        "prompt_tokens_details": {"cached_tokens": details.get("cached_tokens")},
    }
    if details.get("cache_write_tokens") is not None:
        out["cache_creation_input_tokens"] = details["cache_write_tokens"]
    return out


def usage_of_response(response: Any) -> Usage | None:
    """The usage of a Responses answer, or None when it has none."""
    usage = response.get("usage") if isinstance(response, dict) else None
    return usage_from({"usage": chat_usage(usage)}) if isinstance(usage, dict) else None


class ResponsesUsageWatcher:
    """Reads usage and the finished response from a Responses event stream; one per request."""

    def __init__(self) -> None:
        self._decoder = SSEDecoder()
        self._items: dict[int, Any] = {}
        self.response: JSON | None = None

    @property
    def usage(self) -> Usage | None:
        """The usage of the finished response; None before its terminal event."""
        return usage_of_response(self.response)

    def feed(self, chunk: bytes) -> None:
        for event in self._decoder.feed(chunk):
            if event.event and event.event not in WATCHED:
                continue  # deltas: most of a stream, never parsed
            if not event.event and not any(kind in event.data[:80] for kind in WATCHED):
                continue
            self._take(event.data)

    def _take(self, data: str) -> None:
        try:
            payload = orjson.loads(data)
        except orjson.JSONDecodeError:
            return
        if not isinstance(payload, dict):
            return
        kind = payload.get("type")
        if kind == "response.output_item.done" and isinstance(payload.get("output_index"), int):
            self._items[payload["output_index"]] = payload.get("item")
        elif kind in TERMINAL and isinstance(payload.get("response"), dict):
            response = dict(payload["response"])
            if not response.get("output") and self._items:
                response["output"] = [self._items[n] for n in sorted(self._items)]
            self.response = response
