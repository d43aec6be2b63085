"""Chat-completions `tools` / `tool_choice` → the Messages API's (pure).

    function tool          → name, description, input_schema (`parameters`, or an empty object
                             schema), strict; `cache_control` on the tool or its function kept
    tool_choice            → auto→auto, none→none, required→any, named function→tool
    parallel_tool_calls    → false: `disable_parallel_tool_use` on the choice (auto if none given)

Without tools neither key is sent, unless the history holds tool calls: a chat client may send
its past tool calls and results without `tools` (the chat API allows it; a compaction summary
request may too), but the Messages API refuses `tool_use` / `tool_result` blocks in a request that
defines no tools. Then each tool called in the history is declared by name with an empty object
schema, in order of first call, and `tool_choice` is `none`: the model reads the history as it
was and, as the client asked, calls nothing.
"""

from __future__ import annotations

from typing import Any

from proxy.exact_json import copy_json
from proxy.types import JSON


def tools_request(body: JSON) -> JSON:
    """`tools` and `tool_choice` of a Messages request; empty when the body has no tools."""
    tools = [_tool(tool) for tool in body.get("tools") or [] if isinstance(tool, dict)]
    if not tools:
        return history_tools(body.get("messages") or [])
    out: JSON = {"tools": tools}
    choice = _tool_choice(body.get("tool_choice"))
    if body.get("parallel_tool_calls") is False and (choice or {}).get("type") != "none":
        choice = {**(choice or {"type": "auto"}), "disable_parallel_tool_use": True}
    if choice:
        out["tool_choice"] = choice
    return out


HISTORY_TOOL_DESCRIPTION = "Called earlier in this conversation; not available now."


def history_tools(messages: list[JSON]) -> JSON:
    """For a request without tools: the tools its history calls, declared by name (empty
    schema), with `tool_choice` none; empty when no assistant message calls a tool."""
    names: dict[str, None] = {}
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "assistant":
            for call in message.get("tool_calls") or []:
                name = (call.get("function") or {}).get("name") if isinstance(call, dict) else None
                if isinstance(name, str) and name:
                    names.setdefault(name)
    if not names:
        return {}
    declared = [
        {"name": name, "description": HISTORY_TOOL_DESCRIPTION, "input_schema": {"type": "object"}}
        for name in names
    ]
    return {"tools": declared, "tool_choice": {"type": "none"}}


def _tool(tool: JSON) -> JSON:
    function = tool.get("function") or {}
    schema = function.get("parameters") or {"type": "object", "properties": {}}
    out: JSON = {"name": function.get("name", ""), "input_schema": copy_json(schema)}
    if function.get("description"):
        out["description"] = function["description"]
    if isinstance(function.get("strict"), bool):
        out["strict"] = function["strict"]
    cache_control = tool.get("cache_control") or function.get("cache_control")
    if cache_control:
        out["cache_control"] = copy_json(cache_control)
    return out


def _tool_choice(choice: Any) -> JSON | None:
    if choice in ("auto", "none"):
        return {"type": choice}
    if choice == "required":
        return {"type": "any"}
    if isinstance(choice, dict) and choice.get("type") == "function":
        return {"type": "tool", "name": (choice.get("function") or {}).get("name", "")}
    return None
