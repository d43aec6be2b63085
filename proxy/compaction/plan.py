"""Which messages a compaction covers and what replaces them (DESIGN §3 Compaction). Pure.

`plan_compaction` picks the cut: `messages[:split]` are summarized, `messages[split:]` kept, and a
tool result is never kept apart from its call. `splice_summary` replaces the summarized part by
one summary message followed by the tool output `preserved_tool_content` keeps. User messages
starting with `SUMMARY_PREFIX` or `PRESERVED_PREFIX` are an earlier compaction's output. Used by
`proxy.compaction.compactor` around the summarizer call, never per request.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from proxy.compaction.policy import CompactSettings
from proxy.stages.prune import truncation_marker
from proxy.types import Message
from proxy.usage import CHARS_PER_TOKEN

SUMMARY_PREFIX = "[Conversation summary]\n"
PRESERVED_PREFIX = "[Preserved tool output: "


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """`messages[:split]` are summarized, `messages[split:]` kept unchanged."""

    split: int


def plan_compaction(messages: Sequence[Message], *, keep_recent: int) -> CompactionPlan | None:
    """Where to cut: keep the last `keep_recent` messages (at least one, so the request still
    ends with the client's own last message), moving the cut earlier (keeping more) until the
    kept part does not start with a `tool` message and no tool result is kept whose call would
    be summarized. None when nothing would be summarized but an earlier summary (or its
    preserved tool output) and system messages: there is nothing left to summarize."""
    calls = {
        c.get("id"): i
        for i, m in enumerate(messages)
        if m.get("role") == "assistant"
        for c in m.get("tool_calls") or ()
        if isinstance(c, dict)
    }
    # earliest_call[j]: where the earliest call answered at or after j was made; a tool result
    # counts as made at least one message before it, so the kept part never starts with one.
    earliest_call = [len(messages)] * (len(messages) + 1)
    for j in range(len(messages) - 1, -1, -1):
        call_at = j
        if _is_tool(messages[j]):
            call_at = min(calls.get(messages[j].get("tool_call_id"), j), j - 1)
        earliest_call[j] = min(earliest_call[j + 1], call_at)
    split = len(messages) - max(keep_recent, 1)
    while split > 0 and earliest_call[split] < split:
        split -= 1
    if split <= 0 or not any(map(_is_news, messages[:split])):
        return None
    return CompactionPlan(split=split)


def folded_chars(messages: Sequence[Message], plan: CompactionPlan) -> int:
    """The size (JSON) of what a compaction at `plan` would summarize for the first time: the
    summarized part without an earlier summary, its preserved tool output and system messages."""
    return len(orjson.dumps([m for m in messages[: plan.split] if _is_news(m)]))


def _is_tool(message: Message) -> bool:
    return message.get("role") == "tool"


def _is_news(message: Message) -> bool:
    """Something a summary has not taken in yet: not an earlier compaction's output, and not a
    system message (instructions, not history)."""
    return message.get("role") not in ("system", "developer") and not _is_carried(message)


def _is_carried(message: Message) -> bool:
    """An earlier compaction's own output (summary or preserved tool content)."""
    content = message.get("content")
    carried = isinstance(content, str) and content.startswith((SUMMARY_PREFIX, PRESERVED_PREFIX))
    return carried and message.get("role") == "user"


def flatten_to_text(content: object) -> str:
    """A message content as plain text for a reader (the summarizer's transcript, a preserved
    tool result): a string as is, None as "", a list part by part (a part's `text`, else the
    part as JSON) joined by newlines, anything else as JSON. Unlike `proxy.content.content_text`
    (what budgets and pruning measure and cut), a list mixing text with other parts keeps its
    text readable rather than becoming one JSON string."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        return "\n".join(
            flatten_to_text(p.get("text", p) if isinstance(p, dict) else p) for p in content
        )
    return orjson.dumps(content, default=str).decode()


def preserved_tool_content(
    messages: Sequence[Message], *, settings: CompactSettings
) -> tuple[Message, ...]:
    """Results of `preserve_tools` among `messages` (and content an earlier compaction
    preserved), as `user` messages to re-attach after the summary. Each is capped at
    `preserve_max_tokens`, all together at `preserve_total_tokens` (`CHARS_PER_TOKEN` characters
    a token), the oldest dropped first; a repeated text is kept once, at its newest place."""
    if not settings.preserve_tools:
        return ()
    names = {
        c.get("id"): (c.get("function") or {}).get("name")
        for m in messages
        for c in m.get("tool_calls") or ()
        if isinstance(c, dict)
    }
    texts: list[str] = []
    for m in messages:
        name = names.get(m.get("tool_call_id")) if _is_tool(m) else None
        if name in settings.preserve_tools:
            text = _cap(flatten_to_text(m.get("content")), settings)
            texts.append(f"{PRESERVED_PREFIX}{name}]\n{text}")
        elif _is_carried(m) and m["content"].startswith(PRESERVED_PREFIX):
            texts.append(m["content"])
    unique = list(dict.fromkeys(reversed(texts)))  # newest first, duplicates dropped
    kept, budget = [], settings.preserve_total_tokens * CHARS_PER_TOKEN
    for text in unique:
        if len(text) > budget:
            break
        kept.append(text)
        budget -= len(text)
    return tuple({"role": "user", "content": text} for text in reversed(kept))


def _cap(text: str, settings: CompactSettings) -> str:
    limit = settings.preserve_max_tokens * CHARS_PER_TOKEN
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n{truncation_marker(len(text))}"


def splice_summary(
    messages: Sequence[Message],
    plan: CompactionPlan,
    summary: str,
    *,
    preserved: Sequence[Message] = (),
) -> list[Message]:
    """One `user` summary message, then the preserved tool content, then `messages[plan.split:]`.

    An earlier summary inside the summarized part is not kept: the summarizer saw and folded it.
    """
    head: Message = {"role": "user", "content": SUMMARY_PREFIX + summary}
    return [head, *preserved, *messages[plan.split :]]
