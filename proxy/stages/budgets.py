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
With recall on (`recall_tool` set) every cut names the call that reads the original back: a block's
fetch line ends with `; full text: ctx_recall(ref="<output id>")`, a `[N lines truncated]` line
becomes `[N lines truncated; full text: ctx_recall(ref="<tool_call_id>")]` (a result without a
`tool_call_id` keeps the plain line). Cut text always fits its limit again, so the stage is
idempotent. A changed message becomes a string
(or a single text part, when a part carried the client's `cache_control`); other keys are kept.
The block format is `proxy.content`'s; rules 3 and 4 are `cut_result_text`, each cut
made by `cut_lines`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from proxy.content import (
    content_text,
    is_persisted,
    persisted_block,
    recall_clause,
    tool_names,
    with_text,
)
from proxy.errors import InvalidSetting
from proxy.stages.error_pattern import DEFAULT_ERROR_PATTERN, ErrorMemo, is_error_output
from proxy.types import Draft, Message, StageReport, Turn


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
    recall_tool: str = ""
    """The recall tool's name when recall is on (set by the tenant's stack, not a TOML key)."""

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
                oid, new = _persisted(text, settings)
                outputs[oid] = text
            else:
                command = (
                    len(text) > settings.command_max_chars
                    and _called(messages, index, names) in commands
                )
                ref = messages[index].get("tool_call_id")
                new = cut_result_text(
                    text,
                    command=command,
                    settings=settings,
                    memo=memo,
                    ref=ref if isinstance(ref, str) else "",
                )
            if new != text:
                out[index] = with_text(messages[index], new)
        _fit_turn(out, group, texts, outputs, settings=settings)
    return out, StageReport(stage="budgets", counters=_count(out, texts), outputs=outputs)


def _persisted(text: str, settings: BudgetSettings) -> tuple[str, str]:
    return persisted_block(
        text, preview_bytes=settings.preview_bytes, tool_name=settings.recall_tool
    )


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
        oid, block = _persisted(texts[index], settings)
        if len(block) < sizes[index]:  # never when rule 2 already persisted this text
            outputs[oid] = texts[index]
            out[index] = with_text(out[index], block)
            sizes[index] = len(block)


def _count(out: list[Message], texts: dict[int, str]) -> dict[str, int]:
    counts = {"persisted": 0, "truncated": 0, "chars_saved": 0}
    for index, text in texts.items():
        new = content_text(out[index].get("content"))
        if new != text:
            counts["persisted" if is_persisted(new) else "truncated"] += 1
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


_MARKER_RESERVE = 64
"""Room left for the `[N lines truncated]` line (without its recall clause), so cut text stays
within its limit."""


def cut_lines(text: str, *, head: int, tail: int, clause: str = "") -> str:
    """`head` chars + `[N lines truncated]` + `tail` chars, on line ends where that costs < half;
    a recall `clause` goes inside the brackets after `; `."""
    first, last = text[:head], text[len(text) - tail :] if tail else ""
    newline = first.rfind("\n")
    if newline >= head // 2:
        first = first[: newline + 1]
    newline = last.find("\n")
    if 0 <= newline < tail // 2:
        last = last[newline + 1 :]
    middle = text[len(first) : len(text) - len(last)]
    lines = middle.count("\n") + (0 if middle.endswith("\n") else 1)
    sep = "" if first.endswith("\n") or not first else "\n"
    note = f"; {clause}" if clause else ""
    return f"{first}{sep}[{lines} lines truncated{note}]" + (f"\n{last}" if last else "")


def _cut_once(
    text: str, *, command: bool, settings: BudgetSettings, memo: ErrorMemo | None, clause: str
) -> str:
    keep, pattern = settings.error_head_tail_chars, settings.error_pattern
    search = memo.is_error_output if memo is not None else is_error_output
    reserve = _MARKER_RESERVE + len(clause)
    if len(text) > 2 * keep + reserve and search(text, pattern=pattern):
        text = cut_lines(text, head=keep, tail=keep, clause=clause)
    room = max(settings.command_max_chars - reserve, 0)
    if command and len(text) > settings.command_max_chars:
        if settings.command_keep == "head":
            return cut_lines(text, head=room, tail=0, clause=clause)
        text = cut_lines(text, head=room - room // 2, tail=room // 2, clause=clause)
    return text


def cut_result_text(
    text: str,
    *,
    command: bool,
    settings: BudgetSettings,
    memo: ErrorMemo | None = None,
    ref: str = "",
) -> str:
    """Rules 3 and 4, repeated until nothing changes (so a second run cannot cut again); `ref`
    (the result's `tool_call_id`) goes in the marker when recall is on.

    With a `memo`, a text searched before for the error pattern is not searched again."""
    if len(text) <= 2 * settings.error_head_tail_chars + _MARKER_RESERVE and (
        not command or len(text) <= settings.command_max_chars
    ):
        return text  # too short for either rule: most results, spared the calls below
    tool = settings.recall_tool
    clause = recall_clause(ref, tool_name=tool) if ref and tool else ""
    while (
        cut := _cut_once(text, command=command, settings=settings, memo=memo, clause=clause)
    ) != text:
        text = cut
    return text
