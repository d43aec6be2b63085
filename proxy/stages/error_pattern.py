"""Recognising error output in a tool result, for the budgets stage's error rule. Pure.

`DEFAULT_ERROR_PATTERN` is the documented default of `BudgetSettings.error_pattern`: a traceback,
`<word>error:` / `fatal:` / `panic:` (optionally `[code]`) or a non-zero `exit code|status` at the
start of a line, or a JSON `"is_error": true`, or a `<tool_use_error>` tag; case-insensitive.

Searched as written, that pattern is slow: a case-insensitive alternation gives `re` no literal to
skip to, so every character of a 50 KB result is tried (a third of the proxy's CPU on agentic
requests). `is_error_output` answers the same question for the default with searches that each
start on an uncased literal (`\n`, `"`, `<`) that `re` scans for quickly; any other pattern is
searched as written.
"""

from __future__ import annotations

import re
from collections.abc import Callable

DEFAULT_ERROR_PATTERN = (
    r"(?im)^(?:Traceback \(most recent call last\)|(?:\w*error|fatal|panic)(?:\[\w+\])?:"
    r"|exit (?:code|status):? *[1-9])"
    r'|"is_error"\s*:\s*true|<tool_use_error>'
)
# The line alternatives of the default. `\w*error` followed by `[` or `:` (not word characters)
# means the line's whole first word ends in "error": taking the word possessively and looking back
# five characters finds that without backtracking through the word.
_LINE_START = (
    r"(?:(?i:Traceback \(most recent call last\))"
    r"|(?:\w*+(?<=(?i:error))|(?i:fatal|panic))(?:\[\w+\])?:"
    r"|(?i:exit (?:code|status)):? *[1-9])"
)
_FIRST_LINE = re.compile(_LINE_START)
# `(?m)^` matches after "\n" only. Every alternative starts with a word character: most lines of
# real output (indented, numbered, blank) are dropped by that one cheap look-ahead.
_LATER_LINE = re.compile("\n(?=\\w)" + _LINE_START)
_JSON_FLAG = re.compile(r'"(?i:is_error)"\s*:\s*(?i:true)')
_TAG = re.compile(r"<(?i:tool_use_error)>")
# Both of the last two hold `_` followed by `error` in any case: one scan for that literal-led
# pair spares the two scans of text where it never occurs (re's own case folding, so exact).
_UNDERSCORE_ERROR = re.compile(r"_(?i:error)")


def matches_default(text: str) -> bool:
    """`re.search(DEFAULT_ERROR_PATTERN, text) is not None`, quickly."""
    return bool(
        _FIRST_LINE.match(text)
        or _LATER_LINE.search(text)
        or (_UNDERSCORE_ERROR.search(text) and (_JSON_FLAG.search(text) or _TAG.search(text)))
    )


def is_error_output(text: str, *, pattern: str) -> bool:
    """True when `pattern` occurs in `text` (`re.search`); the default one is searched quickly."""
    if pattern == DEFAULT_ERROR_PATTERN:
        return matches_default(text)
    return re.search(pattern, text) is not None


_EDGE = 64
"""Characters from each end of a text that, with its length, key the memo (see `ErrorMemo`)."""


class ErrorMemo:
    """`is_error_output` remembered per (pattern, text): an agent sends every earlier tool result
    again with each request.

    A freshly decoded text has no cached `str` hash, and hashing a long text costs about a third
    of searching it; comparing two equal texts is a memcmp, many times cheaper. So an entry is
    keyed by the pattern, the text's length and its first and last `_EDGE` characters, and holds
    the text, which must equal the one looked up. Texts that share such a key and differ are
    keyed by the whole text instead: every answer is the search's own.

    Holds at most `max_chars` characters of texts, dropping the least recently used; a longer
    text is searched every time. Not thread-safe (one event loop).
    """

    def __init__(
        self,
        *,
        max_chars: int = 4_000_000,
        search: Callable[..., bool] = is_error_output,
    ) -> None:
        if max_chars < 1:
            raise ValueError("ErrorMemo max_chars must be at least 1")
        self._max_chars = max_chars
        self._search = search
        self._chars = 0
        self._entries: dict[tuple[str | int, ...], tuple[str, bool]] = {}

    def is_error_output(self, text: str, *, pattern: str) -> bool:
        if len(text) > self._max_chars:
            return self._search(text, pattern=pattern)
        key: tuple[str | int, ...] = (pattern, len(text), text[:_EDGE], text[-_EDGE:])
        entry = self._entries.pop(key, None)
        if entry is not None and entry[0] != text:  # another text with the same edges
            self._entries[key] = entry
            key = (pattern, text)
            entry = self._entries.pop(key, None)
        if entry is None:
            entry = (text, self._search(text, pattern=pattern))
            self._make_room(len(text))
            self._chars += len(text)
        self._entries[key] = entry
        return entry[1]

    def _make_room(self, chars: int) -> None:
        while self._entries and self._chars + chars > self._max_chars:
            text, _ = self._entries.pop(next(iter(self._entries)))
            self._chars -= len(text)
