"""Reading a cut item back, a page at a time, and searching everything cut. Pure.

`page_of` gives a text from `offset`, exactly, within `max_chars`; a text that does not fit whole
ends with one line `[chars A-B of N; the rest: ctx_recall(ref="REF", offset=B)]`, so the pages'
bodies concatenate to the text. `search_documents` finds a query case-insensitively and as a
literal (`str.find` over case-folded text: linear whatever the query, no pattern language), and
gives each matching line with `CONTEXT_LINES` lines around it under the ref and offset to read it
from, within `max_chars`. Long lines are shown clipped around the match.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import NamedTuple

import orjson

from proxy.recall.refs import recall_call

__all__ = ["CONTEXT_LINES", "MAX_QUERY_CHARS", "Found", "page_of", "search_documents"]

CONTEXT_LINES = 2
MAX_QUERY_CHARS = 1_000
_LINE_SHOWN = 240
"""A line is shown whole up to this many characters, else clipped around the match."""
_NOTE_ROOM = 200
"""Room kept in a result for its last line (a page's note, a search's "more" line)."""


def page_of(text: str, *, ref: str, offset: int, max_chars: int, tool_name: str) -> str:
    """`text` from `offset` within `max_chars`: the whole text as is when it fits from 0, else a
    page of it and a note line saying which characters these are and how to get the rest.
    An `offset` at or past the end gives a one-line explanation instead."""
    total = len(text)
    if offset == 0 and total <= max_chars:
        return text
    if offset >= total:
        return f"[offset {offset} is past the end of ref={_quoted(ref)}: it has {total} chars]"
    end = min(total, offset + max(max_chars - _NOTE_ROOM - len(ref), 1))
    note = f"[chars {offset}-{end} of {total}"
    if end < total:
        note += f"; the rest: {recall_call(ref, tool_name=tool_name, offset=end)}"
    return f"{text[offset:end]}\n{note}]"


class Found(NamedTuple):
    """A search's result text and how many occurrences of the query there were in all."""

    text: str
    occurrences: int


def search_documents(
    documents: Iterable[tuple[str, str]], query: str, *, max_chars: int, tool_name: str
) -> Found:
    """Every line of the (ref, text) documents holding `query` (case-insensitive, literal), with
    context, in document order, within `max_chars`. `query` must be a non-empty line without line
    breaks (the caller checks); a query found nowhere gives a one-line answer. Work is linear in
    the documents' size, and stops collecting lines once the result is full."""
    needle = query.casefold()
    blocks: list[str] = []
    used = shown = occurrences = 0
    full = False
    for ref, text in documents:
        folded = text.casefold()
        count = folded.count(needle)
        if not count:
            continue
        occurrences += count
        if full:
            continue
        for block, lines in _blocks(ref, text, folded, needle, tool_name=tool_name):
            if used + len(block) + 2 > max_chars - _NOTE_ROOM:
                full = True
                break
            blocks.append(block)
            used += len(block) + 2
            shown += lines
    if not occurrences:
        return Found(f"No cut content contains {_quoted(query)}.", 0)
    head = f"{occurrences} occurrence(s) of {_quoted(query)} in cut content"
    if full:
        head += (
            f"; the first {shown} matching line(s) shown. Narrow the query, or read an item"
            f" from an offset: {tool_name}(ref=..., offset=N)"
        )
    return Found("\n\n".join([head + ":", *blocks]), occurrences)


class _Hit(NamedTuple):
    line: int
    """0-based line number."""
    column: int
    start: int
    """Offset of the line's first character in the text."""


def _blocks(
    ref: str, text: str, folded: str, needle: str, *, tool_name: str
) -> Iterator[tuple[str, int]]:
    """(block, matching lines in it) for one document's matches, lazily. Matches whose context
    overlaps share a block."""
    hits = _hits(folded, needle) if len(folded) == len(text) else _hits_by_line(text, needle)
    group: list[_Hit] = []
    for hit in hits:
        if group and hit.line - group[-1].line > 2 * CONTEXT_LINES:
            yield _block(ref, text, group, len(needle), tool_name), len(group)
            group = []
        group.append(hit)
    if group:
        yield _block(ref, text, group, len(needle), tool_name), len(group)


def _hits(folded: str, needle: str) -> Iterator[_Hit]:
    """The first match of each matching line; `folded` lines up with the text character for
    character. Positions only grow: one scan of the text in all."""
    line, start, at = 0, 0, folded.find(needle)
    while at >= 0:
        line += folded.count("\n", start, at)
        start = folded.rfind("\n", 0, at) + 1
        yield _Hit(line, at - start, start)
        end = folded.find("\n", at)
        at = folded.find(needle, end + 1) if end >= 0 else -1


def _hits_by_line(text: str, needle: str) -> Iterator[_Hit]:
    """`_hits` for a text whose case folding changes its length (rare characters): line by line,
    so that positions always point into `text`."""
    line = start = 0
    while start <= len(text):
        end = _line_end(text, start)
        column = text[start:end].casefold().find(needle)
        if column >= 0:
            yield _Hit(line, min(column, end - start), start)
        line, start = line + 1, end + 1


def _line_end(text: str, start: int) -> int:
    end = text.find("\n", start)
    return end if end >= 0 else len(text)


def _block(ref: str, text: str, group: list[_Hit], width: int, tool_name: str) -> str:
    """One block: where to read it from, then the lines, `>` marking the matching ones."""
    start, first = group[0].start, group[0].line
    while first > group[0].line - CONTEXT_LINES and start > 0:
        start, first = text.rfind("\n", 0, start - 1) + 1, first - 1
    columns = {hit.line: hit.column for hit in group}
    call = recall_call(ref, tool_name=tool_name, offset=start)
    out = [f"ref={_quoted(ref)} line {group[0].line + 1} (read from here: {call}):"]
    number, last = first, group[-1].line + CONTEXT_LINES
    while number <= last and start <= len(text):
        end = _line_end(text, start)
        mark = ">" if number in columns else " "
        out.append(
            f"{mark}{number + 1:>6}| {_clip(text[start:end], columns.get(number, 0), width)}"
        )
        number, start = number + 1, end + 1
    return "\n".join(out)


def _clip(line: str, column: int, width: int) -> str:
    """`line` whole when short, else a window around the match at `column` (`…` at cut ends)."""
    if len(line) <= _LINE_SHOWN:
        return line
    room = max((_LINE_SHOWN - width) // 2, 20)
    begin = max(column - room, 0)
    end = min(column + width + room, len(line))
    return ("…" if begin else "") + line[begin:end] + ("…" if end < len(line) else "")


def _quoted(text: str) -> str:
    return orjson.dumps(text).decode()
