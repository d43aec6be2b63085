"""Pruning: shorten old tool results, with sticky decisions (DESIGN §3, Pruning).

Only `role: "tool"` messages are touched, in this order:
1. Replay: a decision stored for a result replaces its content byte-for-byte, wherever the
   message is and whatever the settings: the provider has seen it that way, so replaying keeps
   its cached prefix (and the client's) intact. Decisions are keyed by `tool_call_id`; since some
   clients reuse ids, a stored cut is replayed only onto the result it describes (its kept text
   starts the result, its marker gives the result's length), and a new decision whose id is
   already taken is keyed `<tool_call_id>#<sha256 of the text, 16 hex>` instead.
2. Kept whole: the newest `recent_keep` tool results, results of `exclude_tools`, everything at or
   before the client's last `cache_control` marker (on a message or on one of its content parts),
   results without a `tool_call_id` (no decision could be stored) and already pruned text.
3. Candidates: text longer than `max_chars` keeps its first `keep_chars` characters plus
   `...(truncated, original: N chars)`, N being the text's length. A `<persisted-output>` block
   (from the budgets stage) keeps its three header lines, so its id and fetch line survive, and
   only its preview is cut, then the block is closed again. A cut that saves nothing is dropped.
4. Batch: candidates are taken all together, and only when their savings reach
   `min_savings_chars` and the cache is cold anyway (`when_cache_cold_s` unset or 0, the last
   request unknown, or at least that long ago). Taken ones go to `report.decisions` for the shell
   to store. The default waits 300 s, the life of Anthropic's default 5-minute cache: cutting
   while the provider still holds the prefix turns the rest of the prompt into cache writes
   (`benchmarks/cost.py`); the config resolves it per upstream (`proxy.settings`).
Text is a string as is, text parts joined by newlines, any other content compact JSON. A changed
message gets a string content (a single text part when a part carried `cache_control`).
Rules 1 to 3 are in `proxy.stages.prune_decision`; this module batches and reports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from proxy.content import content_text, with_text
from proxy.stages.prune_decision import (
    COUNTERS,
    decision_key,
    replay_decisions,
    select_candidates,
)
from proxy.types import Draft, Message, StageReport, Turn

__all__ = ["PruneSettings", "prune_tool_results", "run"]


@dataclass(frozen=True, slots=True)
class PruneSettings:
    enabled: bool = True
    recent_keep: int = 2
    max_chars: int = 300
    keep_chars: int = 200
    min_savings_chars: int = 0
    when_cache_cold_s: float | None = 300.0
    exclude_tools: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if min(self.recent_keep, self.max_chars, self.keep_chars, self.min_savings_chars) < 0:
            raise ValueError("prune settings must not be negative")


def _cache_cold(settings: PruneSettings, now: float, last_request_at: float | None) -> bool:
    if settings.when_cache_cold_s is None or last_request_at is None:
        return True
    return now - last_request_at >= settings.when_cache_cold_s


def prune_tool_results(
    messages: Sequence[Message],
    *,
    settings: PruneSettings,
    decisions: Mapping[str, str],
    now: float,
    last_request_at: float | None,
) -> tuple[list[Message], StageReport]:
    """Replay stored decisions and take a batch of new ones (rules above); never mutates input.

    `decisions` maps keys (see module doc) -> stored content; `last_request_at` None means
    unknown. Counters: chars_pruned (replays and new cuts), pruned (new), replayed, deferred
    (held back by batching). Returns the messages as they are when `enabled` is false.
    """
    if not settings.enabled:
        return list(messages), StageReport(stage="prune")
    texts = _tool_texts(messages)
    if not texts:
        return list(messages), _IDLE
    cold = _cache_cold(settings, now, last_request_at)
    return _prune(messages, texts, settings=settings, decisions=decisions, cold=cold)


_IDLE = StageReport(stage="prune", counters=MappingProxyType(dict.fromkeys(COUNTERS, 0)))
"""The report of a history without tool results: one read-only object serves every request."""


def _tool_texts(messages: Sequence[Message]) -> dict[int, str]:
    """Index -> text of every tool result that has a `tool_call_id` (a decision can be stored)."""
    return {
        index: content_text(message.get("content"))
        for index, message in enumerate(messages)
        if message.get("role") == "tool" and isinstance(message.get("tool_call_id"), str)
    }


def _prune(
    messages: Sequence[Message],
    texts: dict[int, str],
    *,
    settings: PruneSettings,
    decisions: Mapping[str, str],
    cold: bool,
) -> tuple[list[Message], StageReport]:
    """Rules 1 to 4 over the tool results `texts` (at least one)."""
    out = list(messages)
    counts, decided = replay_decisions(out, texts, decisions)
    found = select_candidates(messages, texts, decided, settings=settings)
    savings = sum(len(texts[index]) - len(cut) for index, cut in found.items())
    if not found or savings < settings.min_savings_chars or not cold:
        counts["deferred"] = len(found)
        return out, StageReport(stage="prune", counters=counts)
    taken: dict[str, str] = {}
    for index, cut in found.items():
        call_id = messages[index]["tool_call_id"]
        taken_id = call_id in decisions or call_id in taken
        taken[decision_key(call_id, texts[index]) if taken_id else call_id] = cut
        out[index] = with_text(messages[index], cut)
    counts["pruned"] = len(found)
    counts["chars_pruned"] += savings
    return out, StageReport(stage="prune", counters=counts, decisions=taken)


def run(draft: Draft, turn: Turn, *, settings: PruneSettings) -> tuple[Draft, StageReport]:
    """The pipeline entry: decisions from the session state; `updated_at` 0 means unknown.
    A history without tool results comes back as the very same draft."""
    if not settings.enabled:
        return draft, StageReport(stage="prune")
    texts = _tool_texts(draft.messages)
    if not texts:
        return draft, _IDLE
    last = turn.state.float_field("updated_at")
    cold = _cache_cold(settings, turn.now, last if last > 0 else None)
    messages, report = _prune(
        draft.messages, texts, settings=settings, decisions=turn.state.decisions, cold=cold
    )
    return draft.with_messages(messages), report
