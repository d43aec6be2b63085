"""One message's content as parts, and the `cache_control` marker on it or on one of its parts:
whether ours may go there, and a copy carrying ours. Shared by the cache stage's system assembly
and its breakpoint placement. Pure.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

from proxy.types import JSON, Message

Ttl: TypeAlias = Literal["5m", "1h"]


def text_parts(text: str) -> list[JSON]:
    """`text` as one text part; no part for an empty text."""
    return [{"type": "text", "text": text}] if text else []


def as_parts(message: Message) -> list[JSON]:
    """A message's content as parts (client parts kept as sent; no part for no content); a
    message-level marker moves onto the last part unless that part carries its own."""
    content = message.get("content")
    if isinstance(content, list):
        parts: list[JSON] = list(content)
    else:
        parts = text_parts("" if content is None else str(content))
    marker = message.get("cache_control")
    if marker is not None and parts and isinstance(parts[-1], dict):
        parts[-1] = {**parts[-1], "cache_control": parts[-1].get("cache_control") or marker}
    return parts


def can_take_marker(message: Message) -> bool:
    """Whether a marker can go on `message`: it has content, and parts end with an object."""
    content = message.get("content")
    return bool(content) and (not isinstance(content, list) or isinstance(content[-1], dict))


def already_marked(message: Message, part: int) -> bool:
    """Whether `message` needs no marker of ours at `part`: it carries one already (at message
    level, on that part, or on any part of a `tool` message), or cannot take one."""
    content = message.get("content")
    if message.get("cache_control") is not None or not can_take_marker(message):
        return True
    if not isinstance(content, list):
        return False
    marked = content if message.get("role") == "tool" else [content[part]]
    return any(isinstance(p, dict) and p.get("cache_control") is not None for p in marked)


def with_marker(message: Message, part: int, ttl: Ttl) -> Message:
    """A copy of `message` with our marker: on a `tool` message at message level (it becomes the
    `tool_result` block's own marker: Anthropic rejects one nested in a tool result's content),
    elsewhere on the part, a string content turned into one text part."""
    marker: JSON = {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": "1h"}
    if message.get("role") == "tool":
        return {**message, "cache_control": marker}
    content = message["content"]
    parts: list[Any] = list(content) if isinstance(content, list) else text_parts(content)
    parts[part] = {**parts[part], "cache_control": marker}
    return {**message, "content": parts}


def resolve_part_index(message: Message, part: int) -> int:
    """`part` (negative counts from the end) as an index into `message`'s parts; 0 for a string
    content."""
    content = message.get("content")
    return part % len(content) if isinstance(content, list) and content else 0
