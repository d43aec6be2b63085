"""One learned fact: the line `- YYYY-MM-DD: text` that the memory index shows. Pure.

`fact_line` makes one from what a model wrote: control characters become spaces (so a fact stays
one line under `str.splitlines`, whose breaks include U+2028 and U+0085), any tag that would open
or close a bootstrap section (`<soul>`, `</memory_index>`, …) becomes a space until none is left,
spacing is folded, a date written in front is replaced by the compaction's, and the line is cut
to `MAX_LINE_CHARS`. `fact_key` is what two facts are compared by: the text without its date,
case-folded, with punctuation and spacing folded, so "Prefers ISO dates." and "prefers  ISO-dates"
are one fact.
"""

from __future__ import annotations

import re
import unicodedata

MAX_LINE_CHARS = 300
SECTION_TAGS = ("soul", "user_profile", "agent", "memory_index", "memory")
"""The bootstrap's section tags (`proxy.stages.bootstrap.TAGS`) and the extraction's own."""

_TAG = re.compile(
    r"<\s*/?\s*(?:soul|user_profile|agent|memory_index|memory)\b[^<>]*>?", re.IGNORECASE
)
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_LEADING_DATE = re.compile(r"^(?:[-*]\s+)?\d{4}-\d{2}-\d{2}\s*[:–—-]?\s*")
_LINE = re.compile(r"^- (\d{4}-\d{2}-\d{2}): (.+)$")
_BREAKING = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co"})
"""Control and format characters (bidi overrides among them), line and paragraph separators."""


def clean_text(text: str) -> str:
    """`text` with control characters as spaces, section tags removed, spacing folded."""
    plain = "".join(" " if unicodedata.category(c) in _BREAKING else c for c in text)
    while True:
        stripped = _TAG.sub(" ", plain)
        if stripped == plain:
            break
        plain = stripped
    return " ".join(plain.split())


def fact_line(text: str, *, day: str) -> str | None:
    """The fact line for `text` dated `day` (`YYYY-MM-DD`), at most `MAX_LINE_CHARS` characters
    (a longer text is cut, ending in `…`); None when nothing worth a fact is left."""
    if not _DAY.match(day):
        raise ValueError(f"not a YYYY-MM-DD date: {day!r}")
    body = _LEADING_DATE.sub("", clean_text(text)).strip()
    if not fact_key(body):
        return None
    line = f"- {day}: {body}"
    if len(line) > MAX_LINE_CHARS:
        line = line[: MAX_LINE_CHARS - 1].rstrip() + "…"
    return line


def fact_text(line: str) -> str:
    """The text of a fact line without its `- YYYY-MM-DD: ` (or `- `) in front."""
    found = _LINE.match(line)
    if found:
        return found.group(2)
    return line.removeprefix("- ").strip()


def fact_key(text: str) -> str:
    """The normalised text two facts are compared by (a fact line's date left out)."""
    folded = "".join(c if c.isalnum() else " " for c in fact_text(text).casefold())
    return " ".join(folded.split())


def is_fact_line(line: str) -> bool:
    """A line as `fact_line` writes it (what a stored or hand-edited file may be trusted with
    after `clean_line`)."""
    return _LINE.match(line) is not None


def clean_line(line: str) -> str | None:
    """A stored line read back (a file a person may have edited): sanitised as `fact_line`
    does, keeping its own date; None for a line that is not a fact."""
    found = _LINE.match(line.strip())
    if found is None:
        return None
    return fact_line(found.group(2), day=found.group(1))


def matches(line: str, pattern: str) -> bool:
    """`ctxproxy memory forget`'s test: `pattern` occurs in the line, ignoring case."""
    return bool(pattern) and pattern.casefold() in line.casefold()
