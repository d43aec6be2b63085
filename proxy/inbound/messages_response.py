"""An OpenAI upstream's chat completion → the Messages API answer a Messages client expects (pure).

    message.content (string or text parts), refusal  → one `text` block (none when empty)
    message.tool_calls                              → `tool_use` blocks, arguments parsed
                                                      (`proxy.translate.anthropic_blocks`)
    finish_reason                                   → stop_reason: stop → end_turn,
                                                      length → max_tokens, tool_calls and
                                                      function_call → tool_use,
                                                      content_filter → refusal
    usage                                           → input_tokens = prompt − cached −
                                                      cache creation, cache_read_input_tokens
                                                      = prompt_tokens_details.cached_tokens,
                                                      output_tokens = completion_tokens
Reasoning text some servers add (`reasoning_content`) is not passed on: a `thinking` block needs
a signature only Anthropic can make. The id gets a `msg_` prefix when it has none, a tool call
without an id gets one.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from proxy.translate.anthropic_blocks import parse_arguments
from proxy.types import JSON

STOP_REASONS = MappingProxyType(
    {
        "stop": "end_turn",
        "length": "max_tokens",
        "tool_calls": "tool_use",
        "function_call": "tool_use",
        "content_filter": "refusal",
    }
)


def stop_reason(finish_reason: Any) -> str:
    """The Messages stop_reason for a chat finish_reason (unknown or missing → end_turn)."""
    return STOP_REASONS.get(str(finish_reason), "end_turn")


def messages_usage(usage: Any) -> JSON:
    """Chat-completions usage → Messages usage (all four counters, zero when unknown)."""
    usage = usage if isinstance(usage, dict) else {}
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    read = _count(cached if cached is not None else usage.get("cache_read_input_tokens"))
    created = _count(usage.get("cache_creation_input_tokens"))
    prompt = _count(usage.get("prompt_tokens"))
    return {
        "input_tokens": max(prompt - read - created, 0),
        "cache_creation_input_tokens": created,
        "cache_read_input_tokens": read,
        "output_tokens": _count(usage.get("completion_tokens")),
    }


def _count(value: Any) -> int:
    return value if type(value) is int and value >= 0 else 0


def message_id(chat_id: Any) -> str:
    text = str(chat_id or "")
    return text if text.startswith("msg_") else f"msg_{text or 'ctxproxy'}"


def chat_response_to_messages(completion: JSON, *, model: str | None = None) -> JSON:
    """A `chat.completion` object → a Messages `message` object (reporting `model` if given)."""
    choices = completion.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    reply = choice.get("message") or {}
    content: list[JSON] = []
    text = _text_of(reply.get("content")) or _text_of(reply.get("refusal"))
    if text:
        content.append({"type": "text", "text": text})
    ident = message_id(completion.get("id"))
    for n, call in enumerate(reply.get("tool_calls") or ()):
        if isinstance(call, dict):
            content.append(tool_use_block(call, fallback_id=f"toolu_{ident}_{n}"))
    return {
        "id": ident,
        "type": "message",
        "role": "assistant",
        "model": model if model is not None else str(completion.get("model") or ""),
        "content": content,
        "stop_reason": stop_reason(choice.get("finish_reason")),
        "stop_sequence": None,
        "usage": messages_usage(completion.get("usage")),
    }


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text") or p.get("refusal") or "") for p in content if isinstance(p, dict)
        )
    return ""


def tool_use_block(call: JSON, *, fallback_id: str) -> JSON:
    """A chat tool call → a `tool_use` block (arguments parsed to an object); a call without
    an id gets `fallback_id`, so that its result can name it."""
    function = call.get("function") or {}
    return {
        "type": "tool_use",
        "id": str(call.get("id") or fallback_id),
        "name": str(function.get("name") or ""),
        "input": parse_arguments(function.get("arguments")),
    }
