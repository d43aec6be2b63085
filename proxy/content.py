"""Reading and rewriting message contents: shared by the stages that edit tool results and by
the ones that place cache markers. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeAlias

import orjson

from proxy.types import JSON, Message

MarkerPath: TypeAlias = tuple[str | int, ...]
SYSTEM_ROLES = frozenset({"system", "developer"})
"""The roles of system content (`developer` is the newer OpenAI name)."""
MAX_BREAKPOINTS = 4
"""Anthropic accepts at most four `cache_control` breakpoints in one request."""
_CONTAINERS = (dict, list)
_MARKER_KEY = b'"cache_control"'


def body_with_messages(body: JSON | Any, messages: Sequence[Message]) -> JSON:
    """A shallow copy of `body` with `messages` replaced."""
    out = dict(body)
    out["messages"] = list(messages)
    return out


def content_text(content: Any) -> str:
    """The text of a tool result: a string, text parts joined by newlines, else compact JSON."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content and all(is_text_part(p) for p in content):
        return "\n".join(part["text"] for part in content)
    return orjson.dumps(content).decode()


def is_text_part(part: Any) -> bool:
    return (
        isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
    )


def with_text(message: Message, text: str) -> Message:
    """A copy of `message` whose content is `text`; a part's `cache_control` is carried over."""
    content = message.get("content")
    out = dict(message)
    out["content"] = text
    if isinstance(content, list):  # parts: the common string content skips this
        marks = [
            p["cache_control"] for p in content if isinstance(p, dict) and "cache_control" in p
        ]
        if marks:
            out["content"] = [{"type": "text", "text": text, "cache_control": marks[-1]}]
    return out


def tool_names(messages: Sequence[Message]) -> dict[str, str]:
    """tool_call_id -> the function name the assistant called it with."""
    names: dict[str, str] = {}
    for message in messages:
        for call in message.get("tool_calls") or ():
            if isinstance(call, dict) and isinstance(call.get("function"), dict):
                names[str(call.get("id"))] = str(call["function"].get("name"))
    return names


def find_cache_markers(value: Any, path: MarkerPath = ()) -> list[MarkerPath]:
    """Paths of every dict holding a `cache_control`, in document order."""
    found: list[MarkerPath] = []
    if isinstance(value, _CONTAINERS):
        _collect_markers(value, path, found)
    return found


def find_body_markers(body: JSON) -> list[MarkerPath]:
    """`find_cache_markers(body)` for a request body, quicker on tool definitions.

    A top-level value other than `messages` (tools with their JSON schemas, a response format:
    many small containers, few characters) is walked only when its JSON holds a
    `"cache_control"` key at all; serializing it costs a tenth of walking it. The messages (long
    texts, few containers) are always walked. Same paths, same order.
    """
    found: list[MarkerPath] = []
    if body.get("cache_control") is not None:
        found.append(())
    for key, value in body.items():
        if not isinstance(value, _CONTAINERS):
            continue
        if key == "messages" or _may_hold_marker(value):
            _collect_markers(value, (key,), found)
    return found


def _may_hold_marker(value: Any) -> bool:
    """False only when no dict inside `value` has a `cache_control` key: its JSON would show it
    (the key needs no escaping). True when `value` is not plain JSON (walked as before)."""
    try:
        return _MARKER_KEY in orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError: non-string keys, too deep, other types
        return True


def _collect_markers(
    value: dict[Any, Any] | list[Any], path: MarkerPath, found: list[MarkerPath]
) -> None:
    """Appends to `found`; called only on containers, so the many string leaves cost no call."""
    items: Any
    if isinstance(value, dict):
        if value.get("cache_control") is not None:
            found.append(path)
        items = value.items()
    else:
        items = enumerate(value)
    for key, item in items:
        if type(item) is not str and isinstance(item, _CONTAINERS):  # strings: most leaves
            _collect_markers(item, (*path, key), found)
