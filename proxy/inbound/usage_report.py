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
    if not isinstance(usage, dict) or not _is_count(usage.get("prompt_tokens")):
        return usage
    prompt = round(usage["prompt_tokens"] * scale)
    out = {**usage, "prompt_tokens": prompt}
    if _is_count(usage.get("completion_tokens")):
        out["total_tokens"] = prompt + usage["completion_tokens"]
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and _is_count(details.get("cached_tokens")):
        out["prompt_tokens_details"] = {
            **details,
            "cached_tokens": min(details["cached_tokens"], prompt),
        }
    return out


def scaled_responses_usage(usage: Any, scale: float) -> Any:
    """Responses `usage` with `input_tokens` scaled (and `total_tokens` with it)."""
    if not isinstance(usage, dict) or not _is_count(usage.get("input_tokens")):
        return usage
    inputs = round(usage["input_tokens"] * scale)
    out = {**usage, "input_tokens": inputs}
    if _is_count(usage.get("output_tokens")):
        out["total_tokens"] = inputs + usage["output_tokens"]
    details = usage.get("input_tokens_details")
    if isinstance(details, dict) and _is_count(details.get("cached_tokens")):
        out["input_tokens_details"] = {
            **details,
            "cached_tokens": min(details["cached_tokens"], inputs),
        }
    return out


def _is_count(value: Any) -> bool:
    return type(value) is int and value >= 0
