"""Whether a body is a Responses request the edge can take: the message of a 400 if not (pure).

Checks the shape `proxy.inbound.responses_request` relies on — an object with a `model`; `input`
a string or a list of items; each message item with a known role and a string or a list of
objects for content; each call and output with its `call_id` (and a call with its `name`, an
output with a string or a list for output); `instructions` and `previous_response_id` strings;
`tools` a list of objects. The upstream checks the rest.
"""

from __future__ import annotations

from typing import Any

from proxy.inbound.responses_items import OUTPUT_KINDS
from proxy.inbound.responses_request import ROLES


def request_problem(body: Any) -> str | None:
    """Why `body` is not a Responses request this edge can take (the message of a 400), or
    None. Checks the shape the conversion relies on; the upstream checks the rest."""
    if not isinstance(body, dict):
        return "body: Input should be an object"
    if not isinstance(body.get("model"), str):
        return "model: Field required"
    given = body.get("input")
    if given is not None and not isinstance(given, (str, list)):
        return "input: Input should be a string or a list of items"
    for i, item in enumerate(given if isinstance(given, list) else ()):
        problem = _item_problem(item, f"input.{i}")
        if problem:
            return problem
    for key in ("instructions", "previous_response_id"):
        if body.get(key) is not None and not isinstance(body[key], str):
            return f"{key}: Input should be a string"
    tools = body.get("tools")
    if tools is not None and not (
        isinstance(tools, list) and all(isinstance(t, dict) for t in tools)
    ):
        return "tools: Input should be a list of objects"
    return None


def _item_problem(item: Any, where: str) -> str | None:
    if not isinstance(item, dict):
        return f"{where}: Input should be an object"
    kind = item.get("type")
    if kind in (None, "message"):
        if item.get("role") not in ROLES:
            return f"{where}.role: Input should be 'user', 'assistant', 'system' or 'developer'"
        content = item.get("content")
        if not isinstance(content, str) and not (
            isinstance(content, list) and all(isinstance(p, dict) for p in content)
        ):
            return f"{where}.content: Input should be a string or a list of objects"
    calls = ("function_call", "custom_tool_call", *OUTPUT_KINDS)
    if kind in calls and not isinstance(item.get("call_id"), str):
        return f"{where}.call_id: Field required"
    if kind in OUTPUT_KINDS and not isinstance(item.get("output"), (str, list)):
        return f"{where}.output: Input should be a string or a list of objects"
    if kind in ("function_call", "custom_tool_call") and not isinstance(item.get("name"), str):
        return f"{where}.name: Field required"
    return None
