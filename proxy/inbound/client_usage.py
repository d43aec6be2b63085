"""Usage as the client's own history would have measured it (`report_usage = "client"`; pure).

The upstream saw the prepared request (a stored summary in place of old turns, pruned tool
results, the bootstrap); the client keeps and resends its full history. A client that decides
when to compact by the usage it is told (Claude Code does) sees its real size only if the input
counters are scaled: the whole prompt (input + cache read + cache creation) times
`client size / sent size`, the difference going to `input_tokens` (the cache counters stay as
reported: they are what the provider cached). Sizes are characters of the JSON messages and tools
of the internal form (`prompt_chars`), the same measure on both sides, so a translated request's
own format costs nothing.

    usage_scale(client, sent)        the factor (1.0 when either size is unknown)
    with_client_input(usage, scale)  one Messages `usage` object, scaled
    rescaled_event(event, scale)     one Messages SSE event: `message_start` and
                                     `message_delta` with their usage scaled, any other as it came
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from proxy.sse import SSEvent, sse_event
from proxy.types import JSON

USAGE_EVENTS = ("message_start", "message_delta")
INPUT_COUNTERS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def prompt_chars(chat_body: Mapping[str, Any]) -> int:
    """Characters of the JSON messages and tools of an internal (chat-completions) body."""
    counted = {key: chat_body[key] for key in ("messages", "tools") if key in chat_body}
    return len(orjson.dumps(counted))


def usage_scale(client_chars: int, sent_chars: int) -> float:
    """How much larger the client's history is than what was sent (1.0 when unknown)."""
    if client_chars <= 0 or sent_chars <= 0:
        return 1.0
    return client_chars / sent_chars


def with_client_input(usage: Any, scale: float) -> Any:
    """`usage` with `input_tokens` raised (or lowered) so that the whole prompt is scaled by
    `scale`; the cache counters as they were. Anything without an integer `input_tokens`
    (a `message_delta` counting output only) comes back as it is."""
    if not isinstance(usage, dict) or type(usage.get("input_tokens")) is not int:
        return usage
    counts = [usage.get(key) for key in INPUT_COUNTERS]
    read, created = (n if type(n) is int and n > 0 else 0 for n in counts[1:])
    whole = round((usage["input_tokens"] + read + created) * scale)
    return {**usage, "input_tokens": max(whole - read - created, 0)}


def rescaled_event(event: SSEvent, scale: float) -> bytes:
    """The bytes to send for `event`: its own, unless it is a usage event to rescale."""
    name = event.event
    if name not in USAGE_EVENTS and (name or '"message_' not in event.data[:64]):
        return event.raw
    try:
        payload = orjson.loads(event.data)
    except orjson.JSONDecodeError:
        return event.raw
    kind = payload.get("type") if isinstance(payload, dict) else None
    message = payload.get("message") if kind == "message_start" else None
    if isinstance(message, dict) and isinstance(message.get("usage"), dict):
        usage = with_client_input(message["usage"], scale)
        new: JSON = {**payload, "message": {**message, "usage": usage}}
    elif kind == "message_delta" and isinstance(payload.get("usage"), dict):
        usage = with_client_input(payload["usage"], scale)
        new = {**payload, "usage": usage}
    else:
        return event.raw
    if usage is message_usage(payload):  # nothing to rescale (output tokens only)
        return event.raw
    if name:
        return sse_event(name, new)
    return b"data: " + orjson.dumps(new) + b"\n\n"


def message_usage(payload: JSON) -> Any:
    """The usage object a `message_start` or `message_delta` payload carries."""
    message = payload.get("message")
    return message.get("usage") if isinstance(message, dict) else payload.get("usage")
