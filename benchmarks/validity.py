"""Is a chat-completions request valid for a strict upstream? Roles, tool pairing, markers.

The one checker of upstream requests: the benchmarks count invalid requests with it and the
end-to-end tests assert there are none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

ROLES = {"system", "developer", "user", "assistant", "tool"}
SYSTEM_ROLES = {"system", "developer"}
MAX_BREAKPOINTS = 4


def problems(body: dict[str, Any]) -> list[str]:
    """Every rule the body breaks; [] when it is valid."""
    messages: Sequence[dict[str, Any]] = body.get("messages") or []
    found = _role_problems(messages) + _pairing_problems(messages)
    markers = count_breakpoints(body)
    if markers > MAX_BREAKPOINTS:
        found.append(f"{markers} cache_control breakpoints (at most {MAX_BREAKPOINTS})")
    return found


def problem(body: dict[str, Any]) -> str:
    """The first rule the body breaks, or "" when it is valid."""
    found = problems(body)
    return found[0] if found else ""


def _role_problems(messages: Sequence[dict[str, Any]]) -> list[str]:
    found: list[str] = []
    seen_other = False
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in ROLES:
            found.append(f"[{index}] unknown role {role!r}")
        elif role in SYSTEM_ROLES and seen_other:
            found.append(f"[{index}] system message after the conversation started")
        seen_other = seen_other or role not in SYSTEM_ROLES
    return found


def _pairing_problems(messages: Sequence[dict[str, Any]]) -> list[str]:
    found: list[str] = []
    open_calls: set[str] = set()
    for index, message in enumerate(messages):
        if message.get("role") in SYSTEM_ROLES:
            continue
        if message.get("role") == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in open_calls:
                found.append(f"[{index}] tool result {call_id} without a preceding call")
            open_calls.discard(call_id)
            continue
        found += [f"[{index}] call {c} without a result" for c in sorted(open_calls)]
        open_calls = {call["id"] for call in message.get("tool_calls") or ()}
    found += [f"call {c} without a result at the end" for c in sorted(open_calls)]
    return found


def count_breakpoints(value: Any) -> int:
    if isinstance(value, dict):
        own = 1 if "cache_control" in value else 0
        return own + sum(count_breakpoints(v) for v in value.values())
    if isinstance(value, list):
        return sum(count_breakpoints(v) for v in value)
    return 0
