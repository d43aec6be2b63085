"""Token usage as upstreams report it (OpenAI format; the Anthropic translation maps into it), and
the proxy's own estimate where no upstream counted: `CHARS_PER_TOKEN` characters per token."""

from __future__ import annotations

from typing import Any, NamedTuple

import orjson

CHARS_PER_TOKEN = 4
"""Characters of text (or bytes of JSON) per token, where the proxy estimates: no stage has the
upstream's tokenizer. The one place this ratio is written."""


class Usage(NamedTuple):
    """A named tuple: one or two are built per request.

    `prompt_tokens` counts every input token (cached and written ones included);
    `cache_creation_tokens` those written to the cache (Anthropic's `cache_creation_input_tokens`,
    OpenAI's `prompt_tokens_details.cache_write_tokens`), of which `cache_write_1h_tokens` at
    Anthropic's 1-hour lifetime (`cache_creation.ephemeral_1h_input_tokens`, where reported).
    `answer_id` is the answer's own id (`msg_…` from Anthropic), `provider_miss` the provider's
    cache-miss reason (`usage.cache_miss_reason.type`, where the upstream asked for it)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cache_creation_tokens: int = 0
    cache_write_1h_tokens: int = 0
    answer_id: str = ""
    provider_miss: str = ""


def usage_from(payload: Any) -> Usage | None:
    """The `usage` object of a completion or chunk, or None when absent or malformed."""
    if not isinstance(payload, dict):
        return None
    usage = payload.get("usage")
    if not isinstance(usage, dict):
        return None
    details = _mapping(usage.get("prompt_tokens_details"))
    cached = details.get("cached_tokens")
    written = usage.get("cache_creation_input_tokens", details.get("cache_write_tokens"))
    creation = _int(written)
    hour = _int(_mapping(usage.get("cache_creation")).get("ephemeral_1h_input_tokens"))
    return Usage(
        prompt_tokens=_int(usage.get("prompt_tokens")),
        completion_tokens=_int(usage.get("completion_tokens")),
        cached_tokens=_int(cached if cached is not None else usage.get("cache_read_input_tokens")),
        cache_creation_tokens=creation,
        cache_write_1h_tokens=min(hour, creation),
        answer_id=_text(payload.get("id")),
        provider_miss=_text(_mapping(usage.get("cache_miss_reason")).get("type")),
    )


def _text(value: Any) -> str:
    """A short identifier as reported, or "" for anything else."""
    return value[:200] if isinstance(value, str) else ""


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def usage_from_body(body: bytes) -> Usage | None:
    try:
        return usage_from(orjson.loads(body))
    except orjson.JSONDecodeError:
        return None


def is_usage_only_chunk(payload: Any) -> bool:
    """The extra chunk that `stream_options.include_usage` adds: no choices, a usage object.

    Both forms seen in the wild count: `"choices": []` and `"choices": null`.
    """
    return (
        isinstance(payload, dict)
        and not payload.get("choices")
        and isinstance(payload.get("usage"), dict)
    )


def _int(value: Any) -> int:
    """A count as reported, or 0 for anything but a non-negative integer (a bool is not one)."""
    return value if type(value) is int and value >= 0 else 0


def estimated_tokens(chars: int) -> int:
    """Tokens of `chars` characters, by `CHARS_PER_TOKEN` (rounded down)."""
    return chars // CHARS_PER_TOKEN
