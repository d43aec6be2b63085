"""The recall ref scheme, and the recall text every cut's marker carries. Pure.

A ref names one item of the conversation that the proxy cut:

    <tool_call_id>          a pruned, truncated or persisted tool result: the client's id as is
    <32 hex>                a persisted output: the id of its `<persisted-output>` block
    turns:<first>-<last>    the client's messages first..last, counted from 0 after its leading
                            system messages (as compaction's `covers` counts): the span a summary
                            replaced is `turns:0-<covers - 1>`; `turns:i-i` is one message

Every ref is a pure function of the client's own history (ids it chose, hashes of texts it sent,
positions in a history that only grows), so a marker naming it is byte-stable across requests.

A marker names a ref with the literal call `ctx_recall(ref="REF")` (`recall_call`; the configured
tool name in place of `ctx_recall`, the ref as a JSON string), in these exact forms (written by
the stages when the tenant's recall is on; `recall_clause` is the part after `; `):

    prune       ...(truncated, original: 5000 chars; full text: ctx_recall(ref="call_1"))
    truncation  [120 lines truncated; full text: ctx_recall(ref="call_1")]
    persisted   Output too large (80000 chars), stored in full: GET /v1/ctx/outputs/<id>;
                full text: ctx_recall(ref="<id>")          (one line: the block's fetch line)
    summary     `summary_line(0, covers - 1)` as the summary message's last line
    first user  `proxy.recall.first_user` writes its own cut line

`recall_notice` is the bootstrap's one-line sentence; `find_refs` reads refs back out of a text.
The call's text is `proxy.content`'s (the stages, which may import only the foundation, write it
there); this module re-exports it beside the refs it names.
"""

from __future__ import annotations

import re

from proxy.content import find_refs, recall_call, recall_clause, recall_notice

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


def summary_line(first: int, last: int, *, tool_name: str) -> str:
    """The last line of a summary standing for the client's messages `first`..`last`."""
    ref = turns_ref(first, last)
    return (
        f"[Messages {first}-{last} are summarized above; {recall_clause(ref, tool_name=tool_name)}]"
    )
