"""Head-and-tail truncation of one tool result's text (budgets rules 3 and 4). Pure.

`cut_result_text` cuts error output to `error_head_tail_chars` of head and of tail, and the output
of a command tool to `command_max_chars`, with a `[N lines truncated]` line between; the result
fits its limit again, so cutting it a second time changes nothing. `cut_lines` makes each cut.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from proxy.stages.error_pattern import ErrorMemo, is_error_output

if TYPE_CHECKING:
    from proxy.stages.budgets import BudgetSettings

_MARKER_RESERVE = 64
"""Room left for the `[N lines truncated]` line, so cut text stays within its limit."""


def cut_lines(text: str, *, head: int, tail: int) -> str:
    """`head` chars + `[N lines truncated]` + `tail` chars, on line ends where that costs < half."""
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
    return f"{first}{sep}[{lines} lines truncated]" + (f"\n{last}" if last else "")


def _cut_once(text: str, *, command: bool, settings: BudgetSettings, memo: ErrorMemo | None) -> str:
    keep, pattern = settings.error_head_tail_chars, settings.error_pattern
    search = memo.is_error_output if memo is not None else is_error_output
    if len(text) > 2 * keep + _MARKER_RESERVE and search(text, pattern=pattern):
        text = cut_lines(text, head=keep, tail=keep)
    room = max(settings.command_max_chars - _MARKER_RESERVE, 0)
    if command and len(text) > settings.command_max_chars:
        if settings.command_keep == "head":
            return cut_lines(text, head=room, tail=0)
        text = cut_lines(text, head=room - room // 2, tail=room // 2)
    return text


def cut_result_text(
    text: str, *, command: bool, settings: BudgetSettings, memo: ErrorMemo | None = None
) -> str:
    """Rules 3 and 4, repeated until nothing changes (so a second run cannot cut again).

    With a `memo`, a text searched before for the error pattern is not searched again."""
    if len(text) <= 2 * settings.error_head_tail_chars + _MARKER_RESERVE and (
        not command or len(text) <= settings.command_max_chars
    ):
        return text  # too short for either rule: most results, spared the calls below
    while (cut := _cut_once(text, command=command, settings=settings, memo=memo)) != text:
        text = cut
    return text
