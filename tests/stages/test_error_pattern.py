"""The quick search of the default error pattern agrees with `re.search` of the pattern itself."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from proxy.stages.error_pattern import DEFAULT_ERROR_PATTERN, is_error_output, matches_default

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
