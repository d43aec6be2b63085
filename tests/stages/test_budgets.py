"""Tool-result budgets: persisted outputs, command and error cuts, the per-turn cap."""

from __future__ import annotations

import copy
import hashlib
import re
from dataclasses import replace
from typing import Any

import orjson
import pytest

from proxy.stages.budgets import BudgetSettings, apply_budgets, cut_lines, cut_result_text, run
from proxy.stages.error_pattern import ErrorMemo
from proxy.types import Message
from tests.factories import assistant, call, draft, exchange, tool, turn, user

DEFAULTS = BudgetSettings()


def numbered(count: int, *, width: int = 20) -> str:
    return "".join(f"line {n:06d} ".ljust(width - 1, "x") + "\n" for n in range(count))


def budget(messages: list[Message], **settings: Any) -> tuple[list[Message], Any]:
    return apply_budgets(messages, settings=replace(DEFAULTS, **settings))


def text_of(message: Message) -> str:
    content = message["content"]
    return content if isinstance(content, str) else content[0]["text"]


def test_budgets_leave_small_results_as_the_same_objects() -> None:
    messages = [user("hi"), *exchange("c1", "ok" * 100)]
    out, report = budget(messages)
    assert all(a is b for a, b in zip(out, messages, strict=True))
    assert report.outputs == {}
    assert report.counters == {"persisted": 0, "truncated": 0, "chars_saved": 0}


def test_budgets_persist_a_result_over_50000_chars_with_id_size_and_preview() -> None:
    text = numbered(3_000)  # 60,000 chars
    out, report = budget([user("go"), *exchange("c1", text, name="read")])
    oid = hashlib.sha256(text.encode()).hexdigest()[:32]
    block = out[2]["content"]
    assert report.outputs == {oid: text}
    assert block.startswith(f'<persisted-output id="{oid}" chars="60000">\n')
    assert f"GET /v1/ctx/outputs/{oid}\n" in block
    assert f"\n{text[:2_000]}\n</persisted-output>" in block
    assert block.endswith("</persisted-output>")
    assert report.counters["persisted"] == 1
    assert report.counters["chars_saved"] == 60_000 - len(block)


def test_budgets_persisted_block_is_byte_identical_across_requests() -> None:
    messages = [user("go"), *exchange("c1", numbered(3_000))]
    first, _ = budget(copy.deepcopy(messages))
    second, _ = budget(copy.deepcopy(messages))
    assert orjson.dumps(first) == orjson.dumps(second)


def test_budgets_preview_is_cut_on_a_utf8_boundary() -> None:
    text = "é" * 60_000
    out, _ = budget(exchange("c1", text), preview_bytes=2_001)
    preview = out[1]["content"].split("\n")[3]
    assert preview == "é" * 1_000


def test_budgets_cut_command_output_to_head_and_tail_with_line_count() -> None:
    text = numbered(2_000)  # 40,000 chars, 2,000 lines
    out, report = budget(exchange("c1", text, name="bash"))
    cut = out[1]["content"]
    assert len(cut) <= 30_000
    head, marker, tail = re.split(r"^\[(\d+) lines truncated\]\n", cut, flags=re.M)
    assert text.startswith(head) and text.endswith(tail)
    assert head.count("\n") + int(marker) + tail.count("\n") == 2_000
    assert report.counters["truncated"] == 1


def test_budgets_cut_command_output_to_head_only_when_configured() -> None:
    text = numbered(2_000)
    out, _ = budget(exchange("c1", text, name="shell"), command_keep="head")
    cut = out[1]["content"]
    head, _, count = cut.rpartition("[")
    assert text.startswith(head) and len(cut) <= 30_000
    assert count.endswith(" lines truncated]")
    assert head.count("\n") + int(count.split()[0]) == 2_000


def test_budgets_leave_long_output_of_other_tools_whole() -> None:
    messages = exchange("c1", numbered(2_000), name="read_file")
    out, _ = budget(messages)
    assert out[1] is messages[1]


@pytest.mark.parametrize(
    ("opening", "is_error"),
    [
        ("Traceback (most recent call last):", True),
        ("Exit code 1", True),
        ("error: linker failed", True),
        ("ValueError: bad input", True),
        ("fatal: not a git repository", True),
        ('{"is_error": true, "output": "x"}', True),
        ("<tool_use_error>File does not exist.</tool_use_error>", True),
        ("all 12 tests passed", False),
        ("    except ValueError:", False),
        ("Exit code 0", False),
    ],
)
@pytest.mark.parametrize("memo", [None, ErrorMemo()])
def test_budgets_keep_head_and_tail_of_error_output(
    opening: str, is_error: bool, memo: ErrorMemo | None
) -> None:
    text = opening + "\n" + numbered(1_000) + "the cause, at the very end\n"
    for _ in range(2):  # with a memo, the second request is answered from it
        out, _ = apply_budgets(exchange("c1", text, name="read"), settings=DEFAULTS, memo=memo)
    cut = text_of(out[1])
    if not is_error:
        assert cut == text
        return
    assert len(cut) <= 10_064
    assert cut.startswith(opening) and cut.endswith("the cause, at the very end\n")
    assert re.search(r"^\[\d+ lines truncated\]$", cut, flags=re.M)


def parallel(sizes: list[int]) -> list[Message]:
    calls = [call(f"c{i}", "read") for i in range(len(sizes))]
    results = [tool(f"c{i}", numbered(size // 20)) for i, size in enumerate(sizes)]
    return [user("go"), assistant(None, *calls), *results]


def test_budgets_persist_the_largest_results_of_one_turn_until_the_rest_fit() -> None:
    messages = parallel([45_000, 48_000, 46_000, 44_000, 47_000])
    out, report = budget(messages)
    persisted = [m["tool_call_id"] for m in out[2:] if m["content"].startswith("<persisted")]
    assert persisted == ["c1"]
    assert sum(len(m["content"]) for m in out[2:]) <= 200_000
    assert list(report.outputs.values()) == [messages[3]["content"]]


def test_budgets_persist_several_when_one_is_not_enough() -> None:
    out, report = budget(parallel([45_000] * 6))
    persisted = [m["tool_call_id"] for m in out[2:] if m["content"].startswith("<persisted")]
    assert persisted == ["c0", "c1"]
    assert report.counters["persisted"] == 2


def test_budgets_count_each_assistant_turn_separately() -> None:
    messages = [user("go")]
    for i in range(5):
        messages += exchange(f"c{i}", numbered(2_250), name="read")
    out, _ = budget(messages)
    assert out == messages


def test_budgets_measure_text_parts_as_text_and_keep_their_cache_control() -> None:
    half = numbered(1_500)
    parts = [
        {"type": "text", "text": half},
        {"type": "text", "text": half, "cache_control": {"type": "ephemeral"}},
    ]
    out, report = budget([tool("c1", parts)])
    [(oid, stored)] = report.outputs.items()
    assert stored == half + "\n" + half
    assert out[0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert out[0]["content"][0]["text"].startswith(f'<persisted-output id="{oid}"')


def test_budgets_measure_other_content_as_json() -> None:
    content = [{"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 60_000}}]
    out, report = budget([tool("c1", content)])
    assert list(report.outputs.values()) == [orjson.dumps(content).decode()]
    assert out[0]["content"].startswith("<persisted-output")


def test_budgets_do_nothing_when_disabled() -> None:
    messages = exchange("c1", numbered(3_000))
    out, report = budget(messages, enabled=False)
    assert out == messages and report.outputs == {}


@pytest.mark.parametrize(
    "messages",
    [
        [*exchange("c1", numbered(3_000)), *exchange("c2", numbered(2_000))],
        parallel([45_000, 48_000, 46_000, 44_000, 47_000]),
        exchange("c1", "Exit code 2\n" + numbered(800), name="bash"),
        exchange("c1", "x" * 40_000, name="bash"),
    ],
)
def test_budgets_are_idempotent_and_never_mutate_input(messages: list[Message]) -> None:
    before = copy.deepcopy(messages)
    once, _ = budget(messages)
    twice, report = budget(once)
    assert messages == before
    assert twice == once
    assert report.outputs == {}


def test_budgets_run_replaces_only_the_draft_messages() -> None:
    start = draft([user("go"), *exchange("c1", numbered(3_000))], temperature=0)
    out, report = run(start, turn(), settings=DEFAULTS)
    assert out.body == start.body and out.system == start.system
    assert isinstance(out.messages, tuple)
    assert out.messages[2]["content"].startswith("<persisted-output")
    assert report.stage == "budgets"


def test_budgets_persist_a_large_look_alike_of_a_persisted_block() -> None:
    fake = f'<persisted-output id="{"0" * 32}" chars="1">\n' + "x" * 60_000 + "</persisted-output>"
    out, report = budget([tool("c1", fake)])
    assert list(report.outputs.values()) == [fake]
    assert out[0]["content"].startswith(f'<persisted-output id="{next(iter(report.outputs))}"')


@pytest.mark.parametrize(
    "bad",
    [{"error_pattern": "(unclosed"}, {"command_keep": "tail"}, {"persist_over_chars": 0}],
)
def test_budget_settings_reject_bad_values_at_construction(bad: dict[str, Any]) -> None:
    with pytest.raises((re.error, ValueError)):
        BudgetSettings(**bad)


def test_budgets_run_hands_back_the_same_draft_without_tool_results() -> None:
    d = draft([user("hi"), assistant("hello"), user("bye")])
    out, report = run(d, turn(), settings=DEFAULTS)
    _, computed = apply_budgets(d.messages, settings=DEFAULTS)
    expected = {"persisted": 0, "truncated": 0, "chars_saved": 0}
    assert out is d
    assert report == computed
    assert (report.stage, report.counters, report.outputs) == ("budgets", expected, {})


def test_budgets_name_a_long_result_by_its_call_whatever_came_before() -> None:
    messages = [
        *exchange("c0", "short", name="bash"),
        *exchange("c1", numbered(2_000), name="read_file"),
        *exchange("c2", numbered(2_000), name="bash"),
    ]
    out, report = budget(messages)
    assert out[:4] == messages[:4]
    assert out[3] is messages[3]
    assert len(out[5]["content"]) <= 30_000
    assert report.counters["truncated"] == 1


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


def lines_of(count: int) -> str:
    return "".join(f"line {n:04d}\n" for n in range(count))  # 10 chars a line


@pytest.mark.parametrize(
    ("text", "command", "settings", "limit"),
    [
        ("error: boom\n" + lines_of(100), False, SMALL, 2 * 50 + 64),
        ("error: boom\n" + lines_of(100), True, SMALL, 2 * 50 + 64),
        (lines_of(100), True, SMALL, 200),
        (
            lines_of(100),
            True,
            BudgetSettings(command_max_chars=200, command_keep="head"),
            200,
        ),
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
    text = "error: boom\n" + lines_of(100) + "the cause\n"
    assert cut_result_text(text, command=False, settings=SMALL).endswith("\nthe cause\n")
    head_only = BudgetSettings(command_max_chars=200, command_keep="head")
    assert cut_result_text(lines_of(100), command=True, settings=head_only).endswith(
        " lines truncated]"
    )


def test_cut_result_text_leaves_long_output_whole_when_neither_error_nor_command() -> None:
    text = lines_of(1_000)
    assert cut_result_text(text, command=False, settings=SMALL) == text
