"""Chat-completions `tools` / `tool_choice` → the Messages API's (pure).

    function tool          → name, description, input_schema (`parameters`, or an empty object
                             schema), strict; `cache_control` on the tool or its function kept
    tool_choice            → auto→auto, none→none, required→any, named function→tool
    parallel_tool_calls    → false: `disable_parallel_tool_use` on the choice (auto if none given)

Without tools neither key is sent.
"""

from __future__ import annotations

from typing import Any

from proxy.exact_json import copy_json
from proxy.types import JSON


def tools_request(body: JSON) -> JSON:
    """`tools` and `tool_choice` of a Messages request; empty when the body has no tools."""
    tools = [_tool(tool) for tool in body.get("tools") or [] if isinstance(tool, dict)]
    if not tools:
        return {}
    out: JSON = {"tools": tools}
    choice = _tool_choice(body.get("tool_choice"))
    if body.get("parallel_tool_calls") is False and (choice or {}).get("type") != "none":
        choice = {**(choice or {"type": "auto"}), "disable_parallel_tool_use": True}
    if choice:
        out["tool_choice"] = choice
    return out


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
