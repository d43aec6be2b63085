"""An Anthropic Messages answer or error → its chat-completions equivalent (pure).

text blocks       → message.content (joined; None when there is none)
tool_use blocks   → message.tool_calls, arguments as a JSON string
thinking blocks   → message.reasoning_content (the de-facto extension field)
stop_reason       → finish_reason: end_turn, stop_sequence, pause_turn → stop;
                    max_tokens, model_context_window_exceeded → length;
                    tool_use → tool_calls; refusal → content_filter
usage             → prompt_tokens = input + cache_creation + cache_read, completion_tokens =
                    output, prompt_tokens_details.cached_tokens = cache_read; the two Anthropic
                    cache counters, and the writes' 5-minute / 1-hour split (`cache_creation`),
                    are passed through as they came; so is the message's
                    `diagnostics.cache_miss_reason`, as `usage.cache_miss_reason`
error body        → `{"error": {message, type, param, code}}` with the status kept
                    (529 overloaded_error stays 529); `code` from `ERROR_CODES`, and
                    `context_length_exceeded` for a prompt that is too long
"""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any

from proxy.errors import error_body
from proxy.types import JSON

FINISH_REASONS = MappingProxyType(
    {
        "end_turn": "stop",
        "stop_sequence": "stop",
        "pause_turn": "stop",
        "max_tokens": "length",
        "model_context_window_exceeded": "length",
        "tool_use": "tool_calls",
        "refusal": "content_filter",
    }
)
ERROR_CODES = MappingProxyType(
    {
        "rate_limit_error": "rate_limit_exceeded",
        "authentication_error": "invalid_api_key",
        "overloaded_error": "overloaded",
        "request_too_large": "request_too_large",
    }
)
STATUS_ERROR_TYPES = MappingProxyType(
    {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        413: "request_too_large",
        429: "rate_limit_error",
        529: "overloaded_error",
    }
)
TOO_LONG_MARKERS = ("prompt is too long", "context window", "context length")


def finish_reason(stop_reason: Any) -> str:
    """The chat-completions finish_reason for an Anthropic stop_reason (unknown → stop)."""
    return FINISH_REASONS.get(str(stop_reason), "stop")


def chat_usage(usage: JSON, diagnostics: Any = None) -> JSON:
    """Anthropic usage → chat-completions usage (see the module docstring); the message's
    `diagnostics.cache_miss_reason`, when it gave one, as `cache_miss_reason`."""
    fresh = int(usage.get("input_tokens") or 0)
    created = int(usage.get("cache_creation_input_tokens") or 0)
    read = int(usage.get("cache_read_input_tokens") or 0)
    prompt = fresh + created + read
    completion = int(usage.get("output_tokens") or 0)
    chat: JSON = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": read},
        "cache_creation_input_tokens": created,
        "cache_read_input_tokens": read,
    }
    if isinstance(usage.get("cache_creation"), dict):  # the 5-minute / 1-hour split of the writes
        chat["cache_creation"] = usage["cache_creation"]
    reason = diagnostics.get("cache_miss_reason") if isinstance(diagnostics, dict) else None
    if isinstance(reason, dict):
        chat["cache_miss_reason"] = reason
    return chat


def to_chat_completion(message: JSON, *, model: str, created: int = 0) -> JSON:
    """A Messages API `message` object → a `chat.completion` object reporting `model`."""
    blocks = [b for b in message.get("content") or [] if isinstance(b, dict)]
    texts = [str(b.get("text", "")) for b in blocks if b.get("type") == "text"]
    thinking = [str(b.get("thinking", "")) for b in blocks if b.get("type") == "thinking"]
    calls = [_tool_call(b) for b in blocks if b.get("type") == "tool_use"]
    reply: JSON = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        reply["tool_calls"] = calls
    if thinking:
        reply["reasoning_content"] = "".join(thinking)
    reply["refusal"] = None
    return {
        "id": message.get("id", ""),
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": reply,
                "finish_reason": finish_reason(message.get("stop_reason")),
                "logprobs": None,
            }
        ],
        "usage": chat_usage(message.get("usage") or {}, message.get("diagnostics")),
    }


def _tool_call(block: JSON) -> JSON:
    arguments = json.dumps(block.get("input") or {}, ensure_ascii=False, separators=(",", ":"))
    return {
        "id": block.get("id", ""),
        "type": "function",
        "function": {"name": block.get("name", ""), "arguments": arguments},
    }


def to_openai_error(status: int, body: bytes) -> tuple[int, JSON]:
    """An Anthropic error response → (the same status, an OpenAI-shaped error body).

    A body that is not Anthropic's error JSON (a gateway's HTML page) keeps its first 500
    characters as the message, with a type guessed from the status.
    """
    error_type, message = _parse_error(body)
    error_type = error_type or STATUS_ERROR_TYPES.get(status, "api_error")
    code = ERROR_CODES.get(error_type)
    if error_type == "invalid_request_error" and any(m in message for m in TOO_LONG_MARKERS):
        code = "context_length_exceeded"
    return status, error_body(message, error_type, param=None, code=code)


def _parse_error(body: bytes) -> tuple[str | None, str]:
    text = body.decode("utf-8", errors="replace")
    try:
        parsed = json.loads(text)
    except ValueError:
        return None, text[:500]
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if not isinstance(error, dict):
        return None, text[:500]
    return str(error.get("type") or "") or None, str(error.get("message") or "")
