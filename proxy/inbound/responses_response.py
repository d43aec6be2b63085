"""A chat upstream's completion → the Responses API answer a Responses client expects (pure).

    message.content (string or text parts)  → one `message` output item, one `output_text` part
    message.refusal                         → … a `refusal` part
    message.tool_calls                      → `function_call` items (`call_id` = the call's id,
                                              arguments as sent); a call of a custom tool's
                                              function → a `custom_tool_call` with its input
    finish_reason                           → status: length → incomplete (max_output_tokens),
                                              content_filter → incomplete (content_filter),
                                              anything else → completed
    usage                                   → input_tokens (= prompt_tokens, cached included),
                                              input_tokens_details.cached_tokens and
                                              cache_write_tokens, output_tokens,
                                              output_tokens_details.reasoning_tokens,
                                              total_tokens

The Response echoes the client's request (`response_shell`: instructions, tools, tool_choice,
metadata, previous_response_id, …) as the API does. Ids are the caller's (`response_id`, made
once per request, e.g. by `response_id_for`); item ids are derived from it, so the JSON answer
and the stream of one completion name the same items. Reasoning text some servers add
(`reasoning_content`) is not passed on.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from proxy.inbound.responses_items import custom_input
from proxy.types import JSON

INCOMPLETE = MappingProxyType({"length": "max_output_tokens", "content_filter": "content_filter"})


def response_id_for(seed: str) -> str:
    """A `resp_` id made from `seed` (a request id): the same seed, the same id."""
    return "resp_" + hashlib.sha256(seed.encode()).hexdigest()[:48]


def item_id(response_id: str, prefix: str, index: int) -> str:
    """The id of output item `index` of a response (`msg`, `fc`, `ctc` prefixes)."""
    return f"{prefix}_{response_id.removeprefix('resp_')}_{index}"


def custom_names(request: Mapping[str, Any]) -> frozenset[str]:
    """Names of the request's custom tools (their calls come back as `custom_tool_call`s)."""
    tools = request.get("tools")
    return frozenset(
        str(t.get("name"))
        for t in (tools if isinstance(tools, list) else ())
        if isinstance(t, dict) and t.get("type") == "custom"
    )


def response_shell(
    request: Mapping[str, Any], *, response_id: str, created_at: int, model: str | None = None
) -> JSON:
    """The Response for `request` before any output: in progress, the request echoed."""
    text = request.get("text")
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": "in_progress",
        "error": None,
        "incomplete_details": None,
        "instructions": request.get("instructions"),
        "max_output_tokens": request.get("max_output_tokens"),
        "metadata": request.get("metadata") or {},
        "model": model or str(request.get("model") or ""),
        "output": [],
        "parallel_tool_calls": request.get("parallel_tool_calls", True),
        "previous_response_id": request.get("previous_response_id"),
        "prompt_cache_key": request.get("prompt_cache_key"),
        "reasoning": request.get("reasoning"),
        "store": request.get("store", True),
        "temperature": request.get("temperature"),
        "text": text if isinstance(text, dict) else {"format": {"type": "text"}},
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": request.get("tools") or [],
        "top_p": request.get("top_p"),
        "truncation": request.get("truncation", "disabled"),
        "usage": None,
        "user": request.get("user"),
    }


def finished(shell: JSON, output: list[JSON], *, finish_reason: Any, usage: Any) -> JSON:
    """`shell` completed (or incomplete) with `output` and the chat `usage`."""
    reason = INCOMPLETE.get(str(finish_reason))
    return {
        **shell,
        "status": "incomplete" if reason else "completed",
        "incomplete_details": {"reason": reason} if reason else None,
        "output": output,
        "usage": responses_usage(usage),
    }


def responses_usage(usage: Any) -> JSON:
    """Chat-completions usage → Responses usage (every counter, zero when unknown)."""
    usage = usage if isinstance(usage, dict) else {}
    prompt = _details(usage, "prompt_tokens_details")
    completion = _details(usage, "completion_tokens_details")
    cached = prompt.get("cached_tokens")
    read = _count(cached if cached is not None else usage.get("cache_read_input_tokens"))
    inputs, outputs = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    return {
        "input_tokens": inputs,
        "input_tokens_details": {
            "cached_tokens": read,
            "cache_write_tokens": _count(usage.get("cache_creation_input_tokens")),
        },
        "output_tokens": outputs,
        "output_tokens_details": {"reasoning_tokens": _count(completion.get("reasoning_tokens"))},
        "total_tokens": _count(usage.get("total_tokens")) or inputs + outputs,
    }


def _details(usage: JSON, key: str) -> JSON:
    details = usage.get(key)
    return details if isinstance(details, dict) else {}


def _count(value: Any) -> int:
    return value if type(value) is int and value >= 0 else 0


def chat_response_to_response(
    completion: JSON, *, request: Mapping[str, Any], response_id: str, created_at: int
) -> JSON:
    """A `chat.completion` → a Responses `response` object answering `request`."""
    choices = completion.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    reply = choice.get("message") or {}
    incomplete = str(choice.get("finish_reason")) in INCOMPLETE
    output: list[JSON] = []
    content: list[JSON] = []
    text = _text_of(reply.get("content"))
    if text:
        content.append(output_text(text))
    refusal = _text_of(reply.get("refusal"))
    if refusal:
        content.append({"type": "refusal", "refusal": refusal})
    if content:
        status = "incomplete" if incomplete else "completed"
        output.append(message_item(item_id(response_id, "msg", 0), content, status))
    custom = custom_names(request)
    for call in reply.get("tool_calls") or ():
        if isinstance(call, dict):
            output.append(call_item(call, response_id, len(output), custom))
    model = str(completion.get("model") or "") or None
    shell = response_shell(request, response_id=response_id, created_at=created_at, model=model)
    return finished(
        shell, output, finish_reason=choice.get("finish_reason"), usage=completion.get("usage")
    )


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
    return ""


def output_text(text: str) -> JSON:
    return {"type": "output_text", "text": text, "annotations": []}


def message_item(ident: str, content: list[JSON], status: str) -> JSON:
    return {
        "id": ident,
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": content,
    }


def call_item(call: JSON, response_id: str, index: int, custom: frozenset[str]) -> JSON:
    """A chat tool call → a `function_call` (or `custom_tool_call`) output item."""
    function = call.get("function") or {}
    name = str(function.get("name") or "")
    arguments = function.get("arguments")
    arguments = arguments if isinstance(arguments, str) else ""
    call_id = str(call.get("id") or f"call_{response_id.removeprefix('resp_')}_{index}")
    if name in custom:
        ident = item_id(response_id, "ctc", index)
        return {
            "id": ident,
            "type": "custom_tool_call",
            "call_id": call_id,
            "name": name,
            "input": custom_input(arguments),
        }
    ident = item_id(response_id, "fc", index)
    return {
        "id": ident,
        "type": "function_call",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }
