"""The quick search of the default error pattern agrees with `re.search` of the pattern itself."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from proxy.stages.error_pattern import (
    DEFAULT_ERROR_PATTERN,
    ErrorMemo,
    is_error_output,
    matches_default,
)

ORIGINAL = re.compile(DEFAULT_ERROR_PATTERN)
FRAGMENTS = [
    "error", "Error", "ERROR", "eRRor", "ror", "fatal", "FATAL", "panic", "Traceback",
    "Traceback (most recent call last)", "traceback (MOST RECENT CALL LAST)", "exit code",
    "Exit Status", "exit", " code", ":", "[", "]", "E42", "x", "_", " ", "  ", "\n", "\r", "\t",
    "1", "0", "7", '"is_error"', '"IS_Error"', "true", "TRUE", ": ", '"', "<tool_use_error>",
    "<TOOL_USE_ERROR>", "<", ">", "é", "ſ", "ı", "İ", "K", "😀",
]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("error: no such file", True),
        ("building\nTypeError: bad operand", True),
        ("ok\nerror[E0425]: cannot find value", True),
        ("ok\n  error: indented lines do not count", False),
        ("ok\nerrors: a plural is not an error line", False),
        ("ok\nxfatal: not fatal", False),
        ("ok\nPANIC[main]: boom", True),
        ("done\nexit status 0", False),
        ("done\nExit code:  3", True),
        ('{"IS_ERROR" : TRUE}', True),
        ("see <Tool_Use_Error> here", True),
        ("Traceback (most recent call last):\n  File x", True),
        ("a carriage return\rerror: is not a line start", False),
        ("plain output\nwith nothing wrong", False),
    ],
)
def test_error_pattern_default_finds_error_lines_flags_and_tags(text: str, found: bool) -> None:
    assert matches_default(text) is found
    assert (ORIGINAL.search(text) is not None) is found


@hypothesis_settings(max_examples=2_000, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=12).map("".join))
def test_error_pattern_quick_search_agrees_with_the_pattern(text: str) -> None:
    assert matches_default(text) is (ORIGINAL.search(text) is not None)


def test_error_pattern_other_patterns_are_searched_as_written() -> None:
    assert is_error_output("all good\nWARN: disk", pattern=r"(?m)^WARN:")
    assert not is_error_output("error: but not this pattern", pattern=r"(?m)^WARN:")


class CountedSearch:
    def __init__(self) -> None:
        self.texts: list[str] = []

    def __call__(self, text: str, *, pattern: str) -> bool:
        self.texts.append(text)
        return is_error_output(text, pattern=pattern)


def test_error_memo_answers_like_the_search_and_searches_a_text_once() -> None:
    search = CountedSearch()
    memo = ErrorMemo(search=search)
    texts = ["ok\nerror: boom", "all good", "ok\nerror: boom"]
    for text in texts * 2:
        assert memo.is_error_output(text, pattern=DEFAULT_ERROR_PATTERN) is matches_default(text)
    assert search.texts == ["ok\nerror: boom", "all good"]


def test_error_memo_keeps_patterns_apart() -> None:
    memo = ErrorMemo()
    assert memo.is_error_output("WARN: x", pattern=r"^WARN:")
    assert not memo.is_error_output("WARN: x", pattern=DEFAULT_ERROR_PATTERN)


def test_error_memo_holds_at_most_max_chars_of_texts() -> None:
    search = CountedSearch()
    memo = ErrorMemo(max_chars=10, search=search)
    for text in ["aaaa", "bbbb", "cccc", "aaaa", "x" * 11, "x" * 11]:
        memo.is_error_output(text, pattern=DEFAULT_ERROR_PATTERN)
    # "aaaa" was dropped for "cccc"; a text over the limit is never kept
    assert search.texts == ["aaaa", "bbbb", "cccc", "aaaa", "x" * 11, "x" * 11]
    memo.is_error_output("cccc", pattern=DEFAULT_ERROR_PATTERN)
    assert len(search.texts) == 6


def test_error_memo_tells_apart_texts_with_equal_length_and_edges() -> None:
    search = CountedSearch()
    memo = ErrorMemo(search=search)
    edge = "x" * 100
    clean, failed = f"{edge}\nall fine!\n{edge}", f"{edge}\nerror: no\n{edge}"
    assert len(clean) == len(failed)
    for _ in range(2):
        assert not memo.is_error_output(clean, pattern=DEFAULT_ERROR_PATTERN)
        assert memo.is_error_output(failed, pattern=DEFAULT_ERROR_PATTERN)
    assert search.texts == [clean, failed]


def test_error_memo_answers_an_equal_text_decoded_afresh() -> None:
    search = CountedSearch()
    memo = ErrorMemo(search=search)
    text = "ok\nerror: boom\n" + "y" * 500
    memo.is_error_output(text, pattern=DEFAULT_ERROR_PATTERN)
    copy = "".join(list(text))
    assert copy is not text
    assert memo.is_error_output(copy, pattern=DEFAULT_ERROR_PATTERN)
    assert search.texts == [text]
