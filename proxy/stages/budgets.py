"""Tool-result budgets: cap every tool result, the recent ones too (DESIGN §3).

Rules, in order, for each `role: "tool"` message (its text: a string as is, text parts joined by
newlines, any other content as JSON):
1. A `<persisted-output>` block (this stage's own output) is left alone.
2. Text over `persist_over_chars` is persisted first, since that loses nothing: the content
   becomes a `<persisted-output>` block (original size, output id, fetch line, the first
   `preview_bytes` bytes cut on a UTF-8 boundary) and the full text goes to `report.outputs[id]`
   for the shell to store. The id is the sha256 of the text (32 hex), so one history always
   renders byte-identically.
3. Error output (matches `error_pattern`) over twice `error_head_tail_chars` keeps that many
   characters of head and of tail, with a `[N lines truncated]` line between.
4. Output of a `command_tools` tool (named by the assistant call with that id) still over
   `command_max_chars` keeps head and tail (or head only) within `command_max_chars`.
5. All results answering one assistant message together stay within `per_turn_max_chars`: the
   largest (first on ties) are persisted, from their full original text, until the rest fit.
Cut text always fits its limit again, so the stage is idempotent. A changed message becomes a string
(or a single text part, when a part carried the client's `cache_control`); other keys are kept.
The block format is in `proxy.stages.persisted_output`, rules 3 and 4 in `proxy.stages.truncation`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from proxy.content import PERSISTED_OPEN, content_text, tool_names, with_text
from proxy.errors import InvalidSetting
from proxy.stages.error_pattern import DEFAULT_ERROR_PATTERN, ErrorMemo
from proxy.stages.persisted_output import is_persisted, persisted_block
from proxy.stages.truncation import cut_result_text
from proxy.types import Draft, Message, StageReport, Turn

__all__ = ["BudgetSettings", "apply_budgets", "run"]


@dataclass(frozen=True, slots=True)
class BudgetSettings:
    enabled: bool = True
    persist_over_chars: int = 50_000
    preview_bytes: int = 2_000
    command_tools: tuple[str, ...] = ("bash", "shell")
    command_max_chars: int = 30_000
    command_keep: Literal["head_tail", "head"] = "head_tail"
    error_pattern: str = DEFAULT_ERROR_PATTERN
    error_head_tail_chars: int = 5_000
    per_turn_max_chars: int = 200_000

    def __post_init__(self) -> None:
        try:
            re.compile(self.error_pattern)  # a bad pattern fails at start-up, not per request
        except re.error as exc:
            raise InvalidSetting(
                "error_pattern", f"is not a valid regular expression: {exc}"
            ) from exc
        if self.command_keep not in ("head_tail", "head"):
            raise InvalidSetting(
                "command_keep", f'must be "head_tail" or "head", not {self.command_keep!r}'
            )
        for name in ("persist_over_chars", "command_max_chars", "per_turn_max_chars"):
            if getattr(self, name) <= 0:
                raise InvalidSetting(name, "must be above 0")


def _result_groups(messages: Sequence[Message]) -> list[list[int]]:
    """Indices of consecutive tool messages: the results answering one assistant message."""
    groups: list[list[int]] = []
    current: list[int] = []
    for index, message in enumerate(messages):
        if message.get("role") == "tool":
            current.append(index)
        elif current:
            groups.append(current)
            current = []
    return [*groups, current] if current else groups


def apply_budgets(
    messages: Sequence[Message], *, settings: BudgetSettings, memo: ErrorMemo | None = None
) -> tuple[list[Message], StageReport]:
    """Apply the rules above to every tool message; the input is never mutated.

    Returns the new list (unchanged messages are the same objects) and a report whose `outputs`
    holds every persisted text by id. Returns the messages as they are when `enabled` is false.
    """
    out = list(messages)
    if not settings.enabled:
        return out, StageReport(stage="budgets")
    groups = _result_groups(messages)
    if not groups:
        return out, _IDLE
    names: dict[str, str] = {}  # filled on first need: few results are long enough for rule 4
    commands = set(settings.command_tools)
    texts: dict[int, str] = {}
    outputs: dict[str, str] = {}
    for group in groups:
        for index in group:
            text = content_text(messages[index].get("content"))
            if is_persisted(text):
                continue
            texts[index] = text
            if len(text) > settings.persist_over_chars:
                oid, new = persisted_block(text, preview_bytes=settings.preview_bytes)
                outputs[oid] = text
            else:
                command = (
                    len(text) > settings.command_max_chars
                    and _called(messages, index, names) in commands
                )
                new = cut_result_text(text, command=command, settings=settings, memo=memo)
            if new != text:
                out[index] = with_text(messages[index], new)
        _fit_turn(out, group, texts, outputs, settings=settings)
    return out, StageReport(stage="budgets", counters=_count(out, texts), outputs=outputs)


def _called(messages: Sequence[Message], index: int, names: dict[str, str]) -> str | None:
    """The tool name the result at `index` answers; `names` is filled from `messages` first."""
    if not names:
        names.update(tool_names(messages))
    return names.get(str(messages[index].get("tool_call_id")))


_IDLE = StageReport(
    stage="budgets",
    counters=MappingProxyType({"persisted": 0, "truncated": 0, "chars_saved": 0}),
)
"""The report of a history without tool results: one read-only object serves every request."""


def _fit_turn(
    out: list[Message],
    group: list[int],
    texts: dict[int, str],
    outputs: dict[str, str],
    *,
    settings: BudgetSettings,
) -> None:
    """Rule 5: persist the group's largest results (full original text) until the rest fit."""
    sizes = {i: len(content_text(out[i].get("content"))) for i in group}
    if sum(sizes.values()) <= settings.per_turn_max_chars:
        return  # the common case: nothing to sort
    for index in sorted((i for i in group if i in texts), key=lambda i: (-sizes[i], i)):
        if sum(sizes.values()) <= settings.per_turn_max_chars:
            return
        oid, block = persisted_block(texts[index], preview_bytes=settings.preview_bytes)
        if len(block) < sizes[index]:  # never when rule 2 already persisted this text
            outputs[oid] = texts[index]
            out[index] = with_text(out[index], block)
            sizes[index] = len(block)


def _count(out: list[Message], texts: dict[int, str]) -> dict[str, int]:
    counts = {"persisted": 0, "truncated": 0, "chars_saved": 0}
    for index, text in texts.items():
        new = content_text(out[index].get("content"))
        if new != text:
            counts["persisted" if new.startswith(PERSISTED_OPEN) else "truncated"] += 1
            counts["chars_saved"] += len(text) - len(new)
    return counts


def run(
    draft: Draft, turn: Turn, *, settings: BudgetSettings, memo: ErrorMemo | None = None
) -> tuple[Draft, StageReport]:
    """The pipeline entry: `apply_budgets` over the draft's history. `turn` is not needed.
    A history without tool results comes back as the very same draft."""
    if settings.enabled and not any(m.get("role") == "tool" for m in draft.messages):
        return draft, _IDLE
    messages, report = apply_budgets(draft.messages, settings=settings, memo=memo)
    return draft.with_messages(messages), report
