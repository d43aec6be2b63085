"""Compaction: pure decisions around one summarizer call (DESIGN §3 Compaction, §4 Sessions).

`run` is the stage "apply stored compaction". The rest are the decisions `proxy.compactor` takes
around the summarizer call: when to compact (`threshold_tokens`, `soft_threshold`,
`should_compact`, on every request) and the stored compaction made from a cut; the cut and what
replaces it are `proxy.stages.compaction_plan`'s, the summarizer's request and answer
`proxy.stages.summary_request`'s. Stored compactions are keyed on the client's own history
(before budgets and pruning): the chain is always computed over the messages as the client sent
them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import orjson

from proxy.history import prefix_hash
from proxy.history_memo import MatchMemo
from proxy.stages.compaction_plan import (
    SUMMARY_PREFIX,
    CompactionPlan,
    plan_compaction,
)
from proxy.types import Draft, Message, StageReport, StoredCompaction, Turn

# `CompactionPlan`, `plan_compaction` and `SUMMARY_PREFIX` (proxy.stages.compaction_plan) are
# re-exported: proxy.compactor and the tests take them from this module.
__all__ = [
    "BUFFER_TOKENS",
    "OUTPUT_RESERVE_TOKENS",
    "SUMMARY_PREFIX",
    "CompactSettings",
    "CompactionPlan",
    "applied_compaction",
    "json_chars",
    "make_compaction",
    "plan_compaction",
    "run",
    "should_compact",
    "soft_threshold",
    "threshold_tokens",
]

OUTPUT_RESERVE_TOKENS = 20_000
BUFFER_TOKENS = 13_000


@dataclass(frozen=True, slots=True)
class CompactSettings:
    """`threshold_tokens` 25,000 by default: the cheapest threshold from 25,000 up on the
    recorded sessions, in dollars behind either provider's cache (`benchmarks/cost.py`);
    `"auto"` = the model window − 33,000."""

    enabled: bool = True
    threshold_tokens: int | Literal["auto"] = 25_000
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
