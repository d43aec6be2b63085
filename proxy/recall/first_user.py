"""The task survives compaction: the first user message kept before the summary. Pure.

Agents put their task and its rules in the first user message; a summary may lose how to finish.
`kept_first_user` gives that message to place verbatim before the summary, or, when its text is
longer than `max_chars`, a user message of its head and tail (half each) around one line naming
the recall ref of the whole message:

    [... 12000 chars cut here; full text: ctx_recall(ref="turns:0-0")]

(with no `tool_name`, recall being off, the line ends after `cut here`). The compactor gives it
the client's own history, so every later compaction of the conversation keeps the very same text;
a kept text that fits `max_chars` is also kept as it is when met again.
"""

from __future__ import annotations

from collections.abc import Sequence

from proxy.recall.index import message_text
from proxy.recall.refs import recall_clause, turns_ref
from proxy.types import Message

__all__ = ["kept_first_user"]

_MIN_CHARS = 200
"""Below this a head and a tail would say nothing: the setting's lower bound."""


def kept_first_user(
    messages: Sequence[Message],
    *,
    max_chars: int,
    tool_name: str,
    carried_prefixes: tuple[str, ...] = (),
) -> Message | None:
    """The first user message of `messages` (the part a compaction summarizes, positions as in
    the client's history after its system messages) as it stays before the summary; the very
    same object when its text fits `max_chars`. None when `messages` has no user message. A
    user message whose string content starts with one of `carried_prefixes` (an earlier
    compaction's summary or preserved output) is not the task and is skipped."""
    if max_chars < _MIN_CHARS:
        raise ValueError(f"keep_first_user_max_chars must be at least {_MIN_CHARS}")
    for position, message in enumerate(messages):
        if message.get("role") != "user" or _carried(message, carried_prefixes):
            continue
        text = message_text(message)
        if len(text) <= max_chars:
            return message
        return {**message, "content": _cut(text, position, max_chars, tool_name)}
    return None


def _carried(message: Message, prefixes: tuple[str, ...]) -> bool:
    content = message.get("content")
    return bool(prefixes) and isinstance(content, str) and content.startswith(prefixes)


def _cut(text: str, position: int, max_chars: int, tool_name: str) -> str:
    """Head, the cut line, tail: `max_chars` characters at most in all."""
    ref = turns_ref(position, position)
    clause = f"; {recall_clause(ref, tool_name=tool_name)}" if tool_name else ""
    # the line's own count is at most len(text) digits long: size the line for that
    line_room = len(f"\n[... {len(text)} chars cut here{clause}]\n")
    keep = max(max_chars - line_room, 0)
    head, tail = keep - keep // 2, keep // 2
    cut = len(text) - head - tail
    line = f"\n[... {cut} chars cut here{clause}]\n"
    return text[:head] + line + (text[len(text) - tail :] if tail else "")
