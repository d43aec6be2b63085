"""Is a chat-completions request valid for a strict upstream? Tool pairing, roles, markers."""

from __future__ import annotations

from typing import Any

ROLES = {"system", "developer", "user", "assistant", "tool"}
MAX_BREAKPOINTS = 4


def problem(messages: list[dict[str, Any]]) -> str:
    """The first rule `messages` breaks, or "" when the request is valid."""
    pending: set[str] = set()
    seen_other = False
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in ROLES:
            return f"[{index}] unknown role {role!r}"
        if role in ("system", "developer"):
            if seen_other:
                return f"[{index}] system message after the conversation started"
            continue
        seen_other = True
        if role == "tool":
            if message.get("tool_call_id") not in pending:
                return f"[{index}] tool result without a preceding call"
            pending.discard(message["tool_call_id"])
            continue
        if pending:
            return f"[{index}] {len(pending)} tool call(s) without a result"
        pending = {call["id"] for call in message.get("tool_calls") or []}
    if pending:
        return "the last tool call(s) have no result"
    if count_breakpoints(messages) > MAX_BREAKPOINTS:
        return "more than 4 cache_control breakpoints"
    return ""


def count_breakpoints(value: Any) -> int:
    if isinstance(value, dict):
        own = 1 if "cache_control" in value else 0
        return own + sum(count_breakpoints(v) for v in value.values())
    if isinstance(value, list):
        return sum(count_breakpoints(v) for v in value)
    return 0
