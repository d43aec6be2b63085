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
   `...(truncated, original: N chars)`, N being the text's length; with recall on (`recall_tool`
   set) the marker names the call that reads the result back:
   `...(truncated, original: N chars; full text: ctx_recall(ref="<tool_call_id>"))`.
   A `<persisted-output>` block (from the budgets stage) keeps its three header lines, so its id
   and fetch line survive, and only its preview is cut, then the block is closed again. A cut
   that saves nothing is dropped.
4. Batch: candidates are taken all together, and only when their savings reach
   `min_savings_chars` and the cache is cold anyway (`when_cache_cold_s` unset or 0, the last
   request unknown, or at least that long ago). Taken ones go to `report.decisions` for the shell
   to store. The default waits 300 s, the life of Anthropic's default 5-minute cache: cutting
   while the provider still holds the prefix turns the rest of the prompt into cache writes
   (`benchmarks/cost.py`); the config resolves it per upstream (`proxy.settings`).
Text is a string as is, text parts joined by newlines, any other content compact JSON. A changed
message gets a string content (a single text part when a part carried `cache_control`).
A cut's `...(truncated, original: N chars)` marker is written by `truncation_marker` and read back
by `describes` (both forms: decisions stored before recall replay byte for byte): this module owns
that format.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from proxy.content import (
    content_text,
    cut_preview,
    is_framed,
    is_recall_clause,
    recall_clause,
    tool_names,
    with_text,
    without_close,
)
from proxy.errors import InvalidSetting
from proxy.types import Draft, Message, StageReport, Turn

COUNTERS = ("chars_pruned", "pruned", "replayed", "deferred")
_MARKER_OPEN = "...(truncated, original: "
_MARKER_TAIL = 1_200
"""Characters at the end of a text that hold a whole marker (its ref is at most 1,000)."""


@dataclass(frozen=True, slots=True)
class PruneSettings:
    enabled: bool = True
    recent_keep: int = 2
    max_chars: int = 300
    keep_chars: int = 200
    min_savings_chars: int = 0
    when_cache_cold_s: float | None = 300.0
    exclude_tools: tuple[str, ...] = ()
    recall_tool: str = ""
    """The recall tool's name when recall is on (set by the tenant's stack, not a TOML key)."""

    def __post_init__(self) -> None:
        for name in ("recent_keep", "max_chars", "keep_chars", "min_savings_chars"):
            if getattr(self, name) < 0:
                raise InvalidSetting(name, "must be 0 or more")


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


def truncation_marker(original_chars: int, *, ref: str = "", tool_name: str = "") -> str:
    """What follows the kept start of a cut text: `...(truncated, original: N chars)`, with
    `; full text: <tool_name>(ref="<ref>")` before the `)` when both are given."""
    if ref and tool_name:
        clause = recall_clause(ref, tool_name=tool_name)
        return f"...(truncated, original: {original_chars} chars; {clause})"
    return f"...(truncated, original: {original_chars} chars)"


def _marker_at_end(text: str) -> tuple[int, int] | None:
    """(where it starts, the original's length) of the truncation marker ending `text` (or
    ending a block's preview: before its close tag), in either form; None when there is none."""
    text = without_close(text)
    start = text.rfind(_MARKER_OPEN)
    if start < 0:
        return None
    digits, sep, tail = text[start + len(_MARKER_OPEN) :].partition(" chars")
    clause = tail.endswith(")") and is_recall_clause(tail[:-1])
    if not (sep and digits.isdecimal()) or not (tail == ")" or clause):
        return None
    return start, int(digits)


def pruned_text(text: str, *, settings: PruneSettings, ref: str = "") -> str | None:
    """The cut form of an old result's text, or None when it stays whole (rule 3); `ref` (its
    `tool_call_id`) goes in the marker when recall is on."""
    if len(text) <= settings.max_chars or _marker_at_end(text[-_MARKER_TAIL:]):
        return None
    marker = truncation_marker(len(text), ref=ref, tool_name=settings.recall_tool)
    if is_framed(text):
        cut = cut_preview(text, keep=settings.keep_chars, marker=marker)
        if cut is None:
            return None
    else:
        cut = text[: settings.keep_chars] + marker
    return cut if len(cut) < len(text) else None


def has_cache_control(message: Message) -> bool:
    """True when the message, or one of its content parts, carries a `cache_control` key."""
    if "cache_control" in message:
        return True
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(p, dict) and "cache_control" in p for p in content
    )


def _last_marked(messages: Sequence[Message]) -> int:
    """The index of the last message `has_cache_control` holds for, or -1."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        # only a list content can hold a marked part: the others need no call
        if "cache_control" in message or (
            isinstance(message.get("content"), list) and has_cache_control(message)
        ):
            return index
    return -1


def describes(stored: str, text: str) -> bool:
    """True when `stored` is `text` or a cut of it: its kept part starts `text` and its marker
    gives `text`'s length. Guards replay against clients that reuse a tool_call_id."""
    if stored == text:
        return True
    marker = _marker_at_end(stored)
    return marker is not None and marker[1] == len(text) and text.startswith(stored[: marker[0]])


def decision_key(call_id: str, text: str) -> str:
    """The key of a decision for a result whose `tool_call_id` is already taken by another."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{call_id}#{digest}"


def replay_decisions(
    out: list[Message], texts: Mapping[int, str], decisions: Mapping[str, str]
) -> tuple[dict[str, int], set[int]]:
    """Rule 1, in place on the copied list `out`: the counters so far and the decided indices."""
    counts = dict.fromkeys(COUNTERS, 0)
    decided: set[int] = set()
    # Ids with a hashed key (`rsplit` gives the id back; a plain key with a `#` only adds an id
    # that is hashed for nothing): the other results are not hashed, on every request.
    hashed = {key.rsplit("#", 1)[0] for key in decisions if "#" in key}
    for index, text in texts.items():
        call_id = out[index]["tool_call_id"]
        stored = decisions.get(call_id)
        if not (stored and describes(stored, text)):
            stored = decisions.get(decision_key(call_id, text)) if call_id in hashed else None
            if not (stored and describes(stored, text)):
                continue
        decided.add(index)
        if (new := with_text(out[index], stored)) != out[index]:
            out[index] = new
            counts["replayed"] += 1
            counts["chars_pruned"] += len(text) - len(stored)
    return counts, decided


def select_candidates(
    messages: Sequence[Message],
    texts: Mapping[int, str],
    decided: set[int],
    *,
    settings: PruneSettings,
) -> dict[int, str]:
    """Index -> cut text of every undecided result that rules 2 and 3 allow to shrink."""
    names = tool_names(messages) if settings.exclude_tools else {}
    tools = [i for i, m in enumerate(messages) if m.get("role") == "tool"]
    recent = set(tools[len(tools) - settings.recent_keep :]) if settings.recent_keep > 0 else set()
    boundary = _last_marked(messages)
    found: dict[int, str] = {}
    for index, text in texts.items():
        if index in decided or index in recent or index <= boundary:
            continue
        if names.get(messages[index]["tool_call_id"]) in settings.exclude_tools:
            continue
        ref = messages[index]["tool_call_id"]
        if (cut := pruned_text(text, settings=settings, ref=ref)) is not None:
            found[index] = cut
    return found
