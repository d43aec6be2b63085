"""What usage an answer reports to the client (`[tenants.NAME] report_usage`) (pure).

The client keeps its full history; the upstream sees the prepared one (bootstrapped, pruned,
compacted). `"upstream"` reports what the upstream said (what is billed). `"client"` reports the
input tokens scaled to the client's full history — the upstream's input tokens times the size of
the client's conversation over the size of what was sent — so a client that compacts by its own
usage figures still does when its history outgrows its window. Cached tokens stay the
upstream's (never more than the input reported); output tokens are never scaled. The proxy itself
always records and triggers on the upstream's own figures.
"""

from __future__ import annotations

from typing import Any

import orjson

from proxy.types import JSON


def history_scale(client: JSON, sent: JSON) -> float:
    """Characters of the client's messages (and tools) over those sent upstream (1.0 when
    nothing was sent)."""
    sent_chars = _chars(sent)
    return _chars(client) / sent_chars if sent_chars else 1.0


def _chars(body: JSON) -> int:
    return len(orjson.dumps([body.get("messages"), body.get("tools")]))


def scaled_chat_usage(usage: Any, scale: float) -> Any:
    """Chat-completions `usage` with `prompt_tokens` scaled (and `total_tokens` with it)."""
    return _scaled(usage, scale, inputs="prompt_tokens", outputs="completion_tokens")


def scaled_responses_usage(usage: Any, scale: float) -> Any:
    """Responses `usage` with `input_tokens` scaled (and `total_tokens` with it)."""
    return _scaled(usage, scale, inputs="input_tokens", outputs="output_tokens")


def _scaled(usage: Any, scale: float, *, inputs: str, outputs: str) -> Any:
    """`usage` with its count of `inputs` scaled, `total_tokens` their sum with `outputs`, and
    the cached tokens in `{inputs}_details` capped at the scaled count; as it is when it has no
    such count."""
    if not isinstance(usage, dict) or not _is_count(usage.get(inputs)):
        return usage
    scaled = round(usage[inputs] * scale)
    out = {**usage, inputs: scaled}
    if _is_count(usage.get(outputs)):
        out["total_tokens"] = scaled + usage[outputs]
    details = usage.get(f"{inputs}_details")
    if isinstance(details, dict) and _is_count(details.get("cached_tokens")):
        out[f"{inputs}_details"] = {
            **details,
            "cached_tokens": min(details["cached_tokens"], scaled),
        }
    return out


def _is_count(value: Any) -> bool:
    return type(value) is int and value >= 0
