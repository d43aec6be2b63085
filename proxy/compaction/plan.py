"""Which messages a compaction covers and what replaces them (DESIGN §3 Compaction). Pure.

`plan_compaction` picks the cut: `messages[:split]` are summarized, `messages[split:]` kept, and a
tool result is never kept apart from its call. `splice_summary` replaces the summarized part by
the first user message kept as it is (`keep_first_user`), one summary message (`summary_frame`
gives the two: the kept message and the summary's last line), then the tool output
`preserved_tool_content` keeps. User messages starting with `SUMMARY_PREFIX` or
`PRESERVED_PREFIX` are an earlier compaction's output; with `keep_first_user`, the first other
user message is the task, which stays: neither is news for a summary to fold in. Used by
`proxy.compaction.compactor` around the summarizer call, never per request.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import orjson

from proxy.compaction.policy import CompactSettings
from proxy.recall.first_user import kept_first_user
from proxy.recall.refs import summary_line
from proxy.stages.prune import truncation_marker
from proxy.types import Message
from proxy.usage import CHARS_PER_TOKEN

SUMMARY_PREFIX = "[Conversation summary]\n"
PRESERVED_PREFIX = "[Preserved tool output: "


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """`messages[:split]` are summarized, `messages[split:]` kept unchanged."""

    split: int


def plan_compaction(
    messages: Sequence[Message], *, keep_recent: int, keep_first_user: bool = False
) -> CompactionPlan | None:
    """Where to cut: keep the last `keep_recent` messages (at least one, so the request still
    ends with the client's own last message), moving the cut earlier (keeping more) until the
    kept part does not start with a `tool` message and no tool result is kept whose call would
    be summarized. None when nothing would be summarized but an earlier summary (or its
    preserved tool output), system messages and, with `keep_first_user`, the task (the first
    user message, which stays): there is nothing left to summarize."""
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
    if split <= 0 or next(_news(messages[:split], keep_first_user), None) is None:
        return None
    return CompactionPlan(split=split)


def folded_chars(
    messages: Sequence[Message], plan: CompactionPlan, *, keep_first_user: bool = False
) -> int:
    """The size (JSON) of what a compaction at `plan` would summarize for the first time: the
    summarized part without an earlier summary, its preserved tool output, system messages and,
    with `keep_first_user`, the task (it stays)."""
    return len(orjson.dumps(list(_news(messages[: plan.split], keep_first_user))))


def _news(messages: Sequence[Message], keep_first_user: bool) -> Iterator[Message]:
    """The messages no summary has taken in yet (`_is_news`); with `keep_first_user`, not the
    first user message among them either."""
    task_seen = not keep_first_user
    for message in messages:
        if not _is_news(message):
            continue
        if not task_seen and message.get("role") == "user":
            task_seen = True
            continue
        yield message


def _is_tool(message: Message) -> bool:
    return message.get("role") == "tool"


def _is_news(message: Message) -> bool:
    """Something a summary has not taken in yet: not an earlier compaction's output, and not a
    system message (instructions, not history)."""
    return message.get("role") not in ("system", "developer") and not _is_carried(message)


def _is_summary(message: Message) -> bool:
    content = message.get("content")
    return (
        message.get("role") == "user"
        and isinstance(content, str)
        and (content.startswith(SUMMARY_PREFIX))
    )


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


def summary_frame(
    client_history: Sequence[Message], covers: int, *, settings: CompactSettings
) -> tuple[Message | None, str]:
    """What goes around a summary of the client's `client_history[:covers]`: the first user
    message kept before it (`keep_first_user`; taken from the client's own history, so every
    compaction of the conversation keeps the same text), and with recall on its last line,
    naming the ref of the messages it stands for."""
    tool = settings.recall_tool
    first = None
    if settings.keep_first_user:
        first = kept_first_user(
            client_history[:covers], max_chars=settings.keep_first_user_max_chars, tool_name=tool
        )
    return first, summary_line(0, covers - 1, tool_name=tool) if tool else ""


def splice_summary(
    messages: Sequence[Message],
    plan: CompactionPlan,
    summary: str,
    *,
    preserved: Sequence[Message] = (),
    first_user: Message | None = None,
    last_line: str = "",
) -> list[Message]:
    """`first_user` (the task, kept as given) if any, one `user` summary message (`last_line`
    ending it, when given: the recall ref of what it stands for), then the preserved tool
    content, then `messages[plan.split:]`.

    An earlier summary inside the summarized part is not kept: the summarizer saw and folded it.
    """
    text = f"{SUMMARY_PREFIX}{summary}\n{last_line}" if last_line else SUMMARY_PREFIX + summary
    head: Message = {"role": "user", "content": text}
    kept = [first_user] if first_user is not None else []
    return [*kept, head, *preserved, *messages[plan.split :]]
