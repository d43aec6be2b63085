"""How compaction is configured and when a conversation is due for it (DESIGN §3 Compaction). Pure.

`threshold_tokens` is where a conversation is due: the configured number, or `auto` = the model's
window less a reserve for the summary and a buffer. The engine asks `should_compact` on every
request with the prompt size the upstream reported for the previous one; in async mode the summary
starts in the background past `soft_threshold`, before the conversation is due. A due
compaction still runs only if it is worth its summarizer call (`worth_compacting`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from proxy.errors import InvalidSetting
from proxy.types import SessionState

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
    keep_first_user: bool = True
    """The first user message (the task, its rules) stays verbatim before the summary."""
    keep_first_user_max_chars: int = 8_000
    """Longer, it keeps head and tail around a line naming its recall ref."""
    recall_tool: str = ""
    """The recall tool's name when recall is on (set by the tenant's stack, not a TOML key):
    the summary's last line names the ref of the turns it stands for."""

    def __post_init__(self) -> None:
        if self.keep_recent < 0:
            raise InvalidSetting("keep_recent", "must be 0 or more")
        if not 0 < self.soft_ratio <= 1:
            raise InvalidSetting("soft_ratio", "must be between 0 and 1 (above 0, at most 1)")
        if self.timeout_s <= 0:
            raise InvalidSetting("timeout_s", "must be above 0")
        if self.threshold_tokens != "auto" and self.threshold_tokens <= 0:
            raise InvalidSetting("threshold_tokens", 'must be above 0 or "auto"')
        if self.keep_first_user_max_chars < 200:
            raise InvalidSetting("keep_first_user_max_chars", "must be at least 200")


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


MIN_SAVING = 0.05
"""A compaction is worth its summarizer call only if it can save this share of the request."""
MIN_EFFICIENCY = 0.1
"""The lowest compression assumed, so that a session whose summaries saved nothing compacts
again once what there is to fold in reaches half the request (`worth_compacting`)."""


def worth_compacting(folded: int, request: int, *, efficiency: float) -> bool:
    """True when a compaction can be expected to save at least `MIN_SAVING` of the request:
    `folded` characters no summary holds yet (`proxy.compaction.plan.folded_chars`) times how
    well the session's last compaction compressed (`compaction_efficiency`), out of the
    `request`'s size.

    So a system prompt that alone stays above the threshold does not start a summary on every
    request, and a compaction that saved under 5% is not repeated until there is more to fold."""
    return folded * efficiency >= MIN_SAVING * request


def compaction_efficiency(saved: int, folded: int) -> float:
    """Characters a compaction saved per character it summarized for the first time, in
    [`MIN_EFFICIENCY`, 1]; 1 when nothing was recorded (before a session's first compaction)."""
    if folded <= 0:
        return 1.0
    return min(1.0, max(MIN_EFFICIENCY, saved / folded))


def last_compaction_efficiency(state: SessionState) -> float:
    """How well the session's last compaction compressed (1 before its first): characters it
    saved per character it summarized for the first time."""
    saved = state.int_field("compaction_saved_chars")
    return compaction_efficiency(saved, state.int_field("compaction_folded_chars"))
