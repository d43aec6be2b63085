"""The Anthropic Messages API's request checks, with its own 400 messages (for the fake API).

`request_problem(body)` is None for a request the API accepts, else the error message: the SDK's
`MessageCreateParams` types (unknown keys rejected), `max_tokens` present, first message `user`,
roles alternating, non-empty content, every `tool_use` answered by `tool_result` blocks at the
start of the next user message (and no stray `tool_result`), at most 4 `cache_control` blocks,
the thinking budget and its sampling limits. With `beta` (a request carrying `anthropic-beta`):
the SDK's beta request types (`context_management`, `mcp_servers`, …), sampling parameters
accepted (the installed SDK no longer lists them; the API takes them for older models) and tool
schemas free-form. With `tools_required` (the default, as the API does): `tools` defined when the
messages hold `tool_use` or `tool_result` blocks (the API refuses such a request without them).
"""

from __future__ import annotations

from typing import Any

import pydantic
from anthropic.types.beta.message_create_params import (
    MessageCreateParamsNonStreaming as BetaMessageCreateParamsNonStreaming,
)
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming

JSON = dict[str, Any]
_PARAMS = pydantic.TypeAdapter(MessageCreateParamsNonStreaming)
_BETA_PARAMS = pydantic.TypeAdapter(BetaMessageCreateParamsNonStreaming)
SAMPLING = ("temperature", "top_p", "top_k")


def sdk_problem(body: JSON, *, beta: bool = False) -> str | None:
    """What the SDK's request types reject in `body` (unknown keys included), or None."""
    if beta:
        body = {k: v for k, v in body.items() if k not in SAMPLING}
        if isinstance(body.get("tools"), list):
            body["tools"] = [_schema_free(tool) for tool in body["tools"]]
    params = _BETA_PARAMS if beta else _PARAMS
    try:
        validated = _force(params.validate_python({**body, "stream": False}))
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
    if validated != {**body, "stream": False}:
        unknown = sorted(set(body) - set(validated) - {"stream"})
        return f"{unknown[0] if unknown else 'body'}: Extra inputs are not permitted"
    return None


def _schema_free(tool: Any) -> Any:
    if isinstance(tool, dict) and isinstance(tool.get("input_schema"), dict):
        return {**tool, "input_schema": {"type": "object"}}
    return tool


def _force(value: Any) -> Any:
    """Consume pydantic's lazily validated iterables, so that every nested item is checked."""
    if isinstance(value, dict):
        return {k: _force(v) for k, v in value.items()}
    if value is None or isinstance(value, str | bytes | int | float | bool):
        return value
    return [_force(v) for v in value]


def request_problem(body: JSON, *, beta: bool = False, tools_required: bool = True) -> str | None:
    """The API's 400 message for `body`, or None when the request is acceptable."""
    if "max_tokens" not in body:
        return "max_tokens: Field required"
    return (
        sdk_problem(body, beta=beta)
        or _turn_problem(body.get("messages") or [])
        or _tool_pairing_problem(body.get("messages") or [])
        or (_undefined_tools_problem(body) if tools_required else None)
        or _cache_control_problem(body)
        or _thinking_problem(body)
    )


ALTERNATE = (
    'messages: roles must alternate between "user" and "assistant", '
    'but found multiple "{role}" roles in a row'
)
EMPTY = (
    "messages.{i}: all messages must have non-empty content "
    "except for the optional final assistant message"
)
UNANSWERED = (
    "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
    "{ids}. Each `tool_use` block must have a corresponding `tool_result` block "
    "in the next message."
)
STRAY = (
    "messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. "
    "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
)


def _turn_problem(messages: list[JSON]) -> str | None:
    if not messages or messages[0].get("role") != "user":
        return 'messages: first message must use the "user" role'
    for i, message in enumerate(messages):
        if i and message["role"] == messages[i - 1]["role"]:
            return ALTERNATE.format(role=message["role"])
        content = message.get("content")
        if not content and i != len(messages) - 1:
            return EMPTY.format(i=i)
        for block in _blocks(content):
            if block.get("type") == "text" and not block.get("text"):
                return "messages: text content blocks must be non-empty"
    return None


def _tool_pairing_problem(messages: list[JSON]) -> str | None:
    for i, message in enumerate(messages):
        asked = _tool_use_ids(messages[i - 1]) if i else []
        for j, block in enumerate(_blocks(message.get("content"))):
            if block.get("type") == "tool_result" and block.get("tool_use_id") not in asked:
                return STRAY.format(i=i, j=j, id=block.get("tool_use_id"))
        following = messages[i + 1].get("content") if i + 1 < len(messages) else None
        answered = _leading_tool_results(following)
        missing = [tid for tid in _tool_use_ids(message) if tid not in answered]
        if missing:
            return UNANSWERED.format(i=i, ids=", ".join(missing))
    return None


UNDEFINED_TOOLS = (
    "messages.{i}.content.{j}: Requests which include `tool_use` or `tool_result` blocks "
    "must define tools."
)


def _undefined_tools_problem(body: JSON) -> str | None:
    """The API refuses a history of tool blocks in a request that defines no tools."""
    if body.get("tools"):
        return None
    for i, message in enumerate(body.get("messages") or []):
        for j, block in enumerate(_blocks(message.get("content"))):
            if block.get("type") in ("tool_use", "tool_result"):
                return UNDEFINED_TOOLS.format(i=i, j=j)
    return None


def _tool_use_ids(message: JSON) -> list[str]:
    return [b["id"] for b in _blocks(message.get("content")) if b.get("type") == "tool_use"]


def _leading_tool_results(content: Any) -> set[str]:
    ids: set[str] = set()
    for block in _blocks(content):
        if block.get("type") != "tool_result":
            break
        ids.add(str(block.get("tool_use_id", "")))
    return ids


def _cache_control_problem(body: JSON) -> str | None:
    found = count_cache_controls(body)
    if found > 4:
        return f"A maximum of 4 blocks with cache_control may be provided. Found {found}."
    return None


def count_cache_controls(body: JSON) -> int:
    """Blocks carrying `cache_control` in tools, system and messages (tool_result content too)."""
    blocks = list(body.get("tools") or []) + _blocks(body.get("system"))
    for message in body.get("messages") or []:
        for block in _blocks(message.get("content")):
            blocks.append(block)
            if block.get("type") == "tool_result":
                blocks += _blocks(block.get("content"))
    return sum(1 for block in blocks if block.get("cache_control"))


def _thinking_problem(body: JSON) -> str | None:
    thinking = body.get("thinking") or {}
    if thinking.get("type") != "enabled":
        return None
    if thinking.get("budget_tokens", 0) < 1024:
        return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
    if body["max_tokens"] <= thinking["budget_tokens"]:
        return "`max_tokens` must be greater than `thinking.budget_tokens`."
    if "temperature" in body or "top_k" in body:
        return "`temperature` may only be set to 1 when thinking is enabled."
    return None


def _blocks(content: Any) -> list[JSON]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [b for b in content or [] if isinstance(b, dict)]
