"""Compaction: pure decisions around one summarizer call (DESIGN §3 Compaction, §4 Sessions).

`run` is the stage "apply stored compaction". The rest are the decisions `proxy.compactor` takes
around the summarizer call, whose request and answer are `proxy.stages.summary_request`'s. Stored
compactions are keyed on the client's own history (before budgets and pruning): the chain is
always computed over the messages as the client sent them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import orjson

from proxy.history import prefix_hash
from proxy.history_memo import MatchMemo
from proxy.types import Draft, Message, StageReport, StoredCompaction, Turn

SUMMARY_PREFIX = "[Conversation summary]\n"
PRESERVED_PREFIX = "[Preserved tool output: "
OUTPUT_RESERVE_TOKENS = 20_000
BUFFER_TOKENS = 13_000


@dataclass(frozen=True, slots=True)
class CompactSettings:
    enabled: bool = True
    threshold_tokens: int | Literal["auto"] = "auto"
    keep_recent: int = 4
    mode: Literal["sync", "async"] = "sync"
    soft_ratio: float = 0.8
    summarizer_upstream: str | None = None
    summarizer_model: str | None = None
    max_summary_words: int = 500
    preserve_tools: tuple[str, ...] = ()
    preserve_max_tokens: int = 5_000
    preserve_total_tokens: int = 25_000
    timeout_s: float = 120.0

    def __post_init__(self) -> None:
        if self.keep_recent < 0 or not 0 < self.soft_ratio <= 1 or self.timeout_s <= 0:
            raise ValueError("compact: keep_recent >= 0, 0 < soft_ratio <= 1, timeout_s > 0")
        if self.threshold_tokens != "auto" and self.threshold_tokens <= 0:
            raise ValueError("compact: threshold_tokens must be positive or 'auto'")


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """`messages[:split]` are summarized, `messages[split:]` kept unchanged."""

    split: int


def threshold_tokens(settings: CompactSettings, *, model_window: int) -> int:
    """The configured threshold, or `auto` = window − 20,000 (summary reserve) − 13,000 (buffer)."""
    if settings.threshold_tokens == "auto":
        return max(model_window - OUTPUT_RESERVE_TOKENS - BUFFER_TOKENS, 1)
    return settings.threshold_tokens


def should_compact(last_prompt_tokens: int, *, threshold: int) -> bool:
    """True when the upstream-reported prompt size of the previous request exceeds `threshold`."""
    return last_prompt_tokens > threshold


def soft_threshold(threshold: int, *, settings: CompactSettings) -> int:
    """Where async mode starts the summary in the background (`soft_ratio` × threshold)."""
    return int(threshold * settings.soft_ratio)


def plan_compaction(messages: Sequence[Message], *, keep_recent: int) -> CompactionPlan | None:
    """Where to cut: keep the last `keep_recent` messages, moving the cut earlier (keeping more)
    until the kept part does not start with a `tool` message and no tool result is kept whose
    call would be summarized. None when nothing but an earlier summary would be summarized."""
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
    split = len(messages) - max(keep_recent, 0)
    while split > 0 and earliest_call[split] < split:
        split -= 1
    if split <= 0 or all(_is_carried(m) for m in messages[:split]):
        return None
    return CompactionPlan(split=split)


def _is_tool(message: Message) -> bool:
    return message.get("role") == "tool"


def _is_carried(message: Message) -> bool:
    """An earlier compaction's own output (summary or preserved tool content)."""
    content = message.get("content")
    carried = isinstance(content, str) and content.startswith((SUMMARY_PREFIX, PRESERVED_PREFIX))
    return carried and message.get("role") == "user"


def content_text(content: object) -> str:
    """The text of a message content: a string, text parts joined, anything else as JSON."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        return "\n".join(
            content_text(p.get("text", p) if isinstance(p, dict) else p) for p in content
        )
    return orjson.dumps(content, default=str).decode()


def preserved_tool_content(
    messages: Sequence[Message], *, settings: CompactSettings
) -> tuple[Message, ...]:
    """Results of `preserve_tools` among `messages` (and content an earlier compaction
    preserved), as `user` messages to re-attach after the summary. Each is capped at
    `preserve_max_tokens`, all together at `preserve_total_tokens` (tokens ≈ chars / 4), the
    oldest dropped first; a repeated text is kept once, at its newest place."""
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
            text = _cap(content_text(m.get("content")), settings)
            texts.append(f"{PRESERVED_PREFIX}{name}]\n{text}")
        elif _is_carried(m) and m["content"].startswith(PRESERVED_PREFIX):
            texts.append(m["content"])
    unique = list(dict.fromkeys(reversed(texts)))  # newest first, duplicates dropped
    kept, budget = [], settings.preserve_total_tokens * 4
    for text in unique:
        if len(text) > budget:
            break
        kept.append(text)
        budget -= len(text)
    return tuple({"role": "user", "content": text} for text in reversed(kept))


def _cap(text: str, settings: CompactSettings) -> str:
    limit = settings.preserve_max_tokens * 4
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n...(truncated, original: {len(text)} chars)"


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


def make_compaction(
    history: Sequence[Message],
    plan: CompactionPlan,
    replacement: Sequence[Message],
    *,
    salt: str,
    created_at: float = 0.0,
    archive_id: str = "",
) -> StoredCompaction:
    """A stored compaction replacing the client's `history[:plan.split]` by `replacement`.

    `plan.split` must be in client-history coordinates (see `proxy.compactor`)."""
    return StoredCompaction(
        prefix_hash=prefix_hash(history, plan.split, salt=salt),
        covers=plan.split,
        replacement=tuple(replacement),
        created_at=created_at,
        archive_id=archive_id,
        saved_chars=json_chars(history[: plan.split]) - json_chars(replacement),
    )


def json_chars(messages: Sequence[Message]) -> int:
    """The size of `messages` as JSON (bytes: characters for ASCII text)."""
    return len(orjson.dumps(list(messages)))


def applied_compaction(
    draft: Draft, turn: Turn, *, settings: CompactSettings, memo: MatchMemo | None = None
) -> StoredCompaction | None:
    """The stored compaction that `run` applies to `draft` (what `proxy.compactor` calls
    `applied`), or None when disabled or when none matches (an edited history never matches).
    A `memo` spares hashing again a history seen before."""
    if not settings.enabled or not turn.state.compactions:
        return None
    memo = memo if memo is not None else MatchMemo(max_bytes=1)  # one that keeps nothing
    return memo.applied(turn.tenant, draft.system.client, draft.messages, turn.state.compactions)


def run(
    draft: Draft, turn: Turn, *, settings: CompactSettings, memo: MatchMemo | None = None
) -> tuple[Draft, StageReport]:
    """Apply stored compaction: replace the longest stored prefix of the client's history by its
    summary (see `applied_compaction`); otherwise the draft is returned unchanged."""
    before = len(draft.messages)
    found = applied_compaction(draft, turn, settings=settings, memo=memo)
    if found is not None:
        messages = (*found.replacement, *draft.messages[found.covers :])
        draft = Draft(body=draft.body, system=draft.system, messages=messages)
    after, applied = len(draft.messages), int(found is not None)
    counters = {"messages_before": before, "messages_after": after, "applied": applied}
    if found is not None:
        counters["chars_removed"] = found.saved_chars
    return draft, StageReport(stage="compact", counters=counters)
