"""Head-and-tail cuts of one tool result: the line-aware cut and budgets rules 3 and 4."""

from __future__ import annotations

import re

import pytest

from proxy.stages.budgets import BudgetSettings
from proxy.stages.truncation import cut_lines, cut_result_text

DEFAULTS = BudgetSettings()
SMALL = BudgetSettings(error_head_tail_chars=50, command_max_chars=200)
TEN_LINES = "".join(f"l{i}\n" for i in range(10))  # 3 chars a line


@pytest.mark.parametrize(
    ("text", "head", "tail", "expected"),
    [
        (TEN_LINES, 7, 7, "l0\nl1\n[6 lines truncated]\nl8\nl9\n"),
        (TEN_LINES, 7, 0, "l0\nl1\n[8 lines truncated]"),
        ("a" * 30, 10, 10, "a" * 10 + "\n[1 lines truncated]\n" + "a" * 10),
        # the line end at index 2 would cost more than half of the head: cut mid-line instead
        ("aa\n" + "b" * 27, 10, 0, "aa\nbbbbbbb\n[1 lines truncated]"),
    ],
)
def test_cut_lines_keeps_head_and_tail_on_line_ends_that_cost_under_half(
    text: str, head: int, tail: int, expected: str
) -> None:
    assert cut_lines(text, head=head, tail=tail) == expected


@pytest.mark.parametrize("command", [False, True])
@pytest.mark.parametrize("size", [100, 10_063, 10_064, 10_065, 29_999, 30_000, 30_001, 40_000])
def test_cut_result_text_leaves_text_too_short_for_either_rule_as_the_same_object(
    command: bool, size: int
) -> None:
    text = ("error: x\n" + "y" * size)[:size]  # an error: any text long enough is cut
    cut = cut_result_text(text, command=command, settings=DEFAULTS)
    short = size <= 2 * DEFAULTS.error_head_tail_chars + 64 and (
        not command or size <= DEFAULTS.command_max_chars
    )
    assert (cut is text) is short
    assert cut == cut_result_text(cut, command=command, settings=DEFAULTS)


def numbered(count: int) -> str:
    return "".join(f"line {n:04d}\n" for n in range(count))  # 10 chars a line


@pytest.mark.parametrize(
    ("text", "command", "settings", "limit"),
    [
        ("error: boom\n" + numbered(100), False, SMALL, 2 * 50 + 64),
        ("error: boom\n" + numbered(100), True, SMALL, 2 * 50 + 64),
        (numbered(100), True, SMALL, 200),
        (numbered(100), True, BudgetSettings(command_max_chars=200, command_keep="head"), 200),
    ],
    ids=["error", "error-command", "command", "command-head"],
)
def test_cut_result_text_fits_its_limit_and_cutting_again_changes_nothing(
    text: str, command: bool, settings: BudgetSettings, limit: int
) -> None:
    cut = cut_result_text(text, command=command, settings=settings)
    assert len(cut) <= limit < len(text)
    head = re.split(r"\n?\[\d+ lines truncated\]", cut)[0]
    assert text.startswith(head) and head
    assert cut_result_text(cut, command=command, settings=settings) == cut


def test_cut_result_text_keeps_the_tail_of_error_output_and_only_the_head_when_asked() -> None:
    text = "error: boom\n" + numbered(100) + "the cause\n"
    assert cut_result_text(text, command=False, settings=SMALL).endswith("\nthe cause\n")
    head_only = BudgetSettings(command_max_chars=200, command_keep="head")
    assert cut_result_text(numbered(100), command=True, settings=head_only).endswith(
        " lines truncated]"
    )


def test_cut_result_text_leaves_long_output_whole_when_neither_error_nor_command() -> None:
    text = numbered(1_000)
    assert cut_result_text(text, command=False, settings=SMALL) == text
