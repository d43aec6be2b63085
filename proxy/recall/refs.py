"""The recall ref scheme and the recall text every cut's marker carries. Pure; imports nothing
of the project (the stages that write markers import it).

A ref names one item of the conversation that the proxy cut:

    <tool_call_id>          a pruned, truncated or persisted tool result: the client's id as is
    <32 hex>                a persisted output: the id of its `<persisted-output>` block
    turns:<first>-<last>    the client's messages first..last, counted from 0 after its leading
                            system messages (as compaction's `covers` counts): the span a summary
                            replaced is `turns:0-<covers - 1>`; `turns:i-i` is one message

Every ref is a pure function of the client's own history (ids it chose, hashes of texts it sent,
positions in a history that only grows), so a marker naming it is byte-stable across requests.

A marker names a ref with the literal call `ctx_recall(ref="REF")` (`recall_call`; the configured
tool name in place of `ctx_recall`, the ref as a JSON string), in these exact forms (the stages
adopt them when recall is wired into requests; `recall_clause` is the part after `; `):

    prune       ...(truncated, original: 5000 chars; full text: ctx_recall(ref="call_1"))
    truncation  [120 lines truncated; full text: ctx_recall(ref="call_1")]
    persisted   Output too large (80000 chars), stored in full: GET /v1/ctx/outputs/<id>;
                full text: ctx_recall(ref="<id>")          (one line: the block's fetch line)
    summary     `summary_line(0, covers - 1)` as the summary message's last line
    first user  `proxy.recall.first_user` writes its own cut line

`recall_notice` is the bootstrap's one-line sentence; `find_refs` reads refs back out of a text.
"""

from __future__ import annotations

import re

import orjson

__all__ = [
    "TURNS_PREFIX",
    "find_refs",
    "is_output_id",
    "parse_turns",
    "recall_call",
    "recall_clause",
    "recall_notice",
    "summary_line",
    "turns_ref",
]

TURNS_PREFIX = "turns:"
_TURNS = re.compile(r"turns:(\d{1,9})-(\d{1,9})")
_OUTPUT_ID = re.compile(r"[0-9a-f]{32}")
_QUOTED = re.compile(r'"(?:[^"\\\n]|\\.){0,1000}"')
"""A JSON string of at most 1,000 characters (no ref is longer): the ref of a marker."""


def turns_ref(first: int, last: int) -> str:
    """The ref of the client's messages `first`..`last` (both included)."""
    if not 0 <= first <= last:
        raise ValueError(f"not a span of messages: {first}-{last}")
    return f"{TURNS_PREFIX}{first}-{last}"


def parse_turns(ref: str) -> tuple[int, int] | None:
    """(first, last) of a `turns:` ref, or None when `ref` is not one (or first > last)."""
    match = _TURNS.fullmatch(ref)
    if match is None:
        return None
    first, last = int(match[1]), int(match[2])
    return (first, last) if first <= last else None


def is_output_id(ref: str) -> bool:
    """True for the shape of a persisted output's id (32 lowercase hex)."""
    return _OUTPUT_ID.fullmatch(ref) is not None


def recall_call(ref: str, *, tool_name: str, offset: int | None = None) -> str:
    """`ctx_recall(ref="REF")`, or with `, offset=N`: the call a marker or a page names."""
    quoted = orjson.dumps(ref).decode()
    return (
        f"{tool_name}(ref={quoted})"
        if offset is None
        else f"{tool_name}(ref={quoted}, offset={offset})"
    )


def recall_clause(ref: str, *, tool_name: str) -> str:
    """`full text: ctx_recall(ref="REF")`, what each marker appends after `; `."""
    return f"full text: {recall_call(ref, tool_name=tool_name)}"


def summary_line(first: int, last: int, *, tool_name: str) -> str:
    """The last line of a summary standing for the client's messages `first`..`last`."""
    ref = turns_ref(first, last)
    return (
        f"[Messages {first}-{last} are summarized above; {recall_clause(ref, tool_name=tool_name)}]"
    )


def recall_notice(*, tool_name: str) -> str:
    """The bootstrap's tool-result notice, one line."""
    return (
        "Content cut to save space can be recalled exactly: call "
        f'{tool_name}(ref="REF") with the ref its marker names, or '
        f'{tool_name}(query="words") to search everything cut from this conversation.'
    )


def find_refs(text: str, *, tool_name: str) -> list[str]:
    """The refs of every `ctx_recall(ref="REF"` in `text`, in order, each once. Linear in
    `text`; a malformed call is skipped."""
    opening = f"{tool_name}(ref="
    found: dict[str, None] = {}
    at = text.find(opening)
    while at >= 0:
        start = at + len(opening)
        match = _QUOTED.match(text, start)
        if match is not None:
            try:
                ref = orjson.loads(match[0])
            except orjson.JSONDecodeError:
                ref = None
            if isinstance(ref, str) and ref:
                found[ref] = None
        at = text.find(opening, start)
    return list(found)
