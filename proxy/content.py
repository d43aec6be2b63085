"""Reading and rewriting message contents: shared by the stages that edit tool results, by the
ones that place cache markers, and by recall. Pure.

It also owns the `<persisted-output>` block that replaces a tool result stored in full: the one
module that writes and reads it. A block's first three lines are its header (id and size, the
fetch line, the preview line), then up to `preview_bytes` bytes of the text and the close tag.
The id is the sha256 of the text (`output_id`), so one text always renders byte-identically. The
budgets stage writes blocks (`persisted_block`, its rule 2) and leaves them alone (`is_persisted`,
its rule 1: a block `persisted_block` wrote, whatever preview size it was written with, and not a
look-alike: a different header, or more text than its own header announces). The prune stage
shortens a block's preview and keeps its frame (`is_framed`, `cut_preview`, `without_close`).

And it owns the recall call a cut's marker names, `ctx_recall(ref="REF")` (the tenant's recall
tool name in place of `ctx_recall`, the ref as a JSON string): `recall_call` and `recall_clause`
write it, `find_refs` reads refs back, `is_recall_clause` tells a clause inside a marker (the
stages' parsers accept a marker with or without one). A block written with a `tool_name` ends its
fetch line with the clause naming its id. See `proxy.recall.refs` for what refs name.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any, TypeAlias

import orjson

from proxy.types import JSON, Message

MarkerPath: TypeAlias = tuple[str | int, ...]
SYSTEM_ROLES = frozenset({"system", "developer"})
"""The roles of system content (`developer` is the newer OpenAI name)."""
MAX_BREAKPOINTS = 4
"""Anthropic accepts at most four `cache_control` breakpoints in one request."""
_CONTAINERS = (dict, list)
_MARKER_KEY = b'"cache_control"'


def system_lead(messages: Sequence[Message]) -> int:
    """How many of `messages` lead with a system role (`SYSTEM_ROLES`): the client's system
    prompt, split from the history that follows."""
    lead = 0
    while lead < len(messages) and messages[lead].get("role") in SYSTEM_ROLES:
        lead += 1
    return lead


def body_with_messages(body: JSON | Any, messages: Sequence[Message]) -> JSON:
    """A shallow copy of `body` with `messages` replaced."""
    out = dict(body)
    out["messages"] = list(messages)
    return out


def content_text(content: Any) -> str:
    """The text of a tool result: a string, text parts joined by newlines, else compact JSON."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content and all(is_text_part(p) for p in content):
        return "\n".join(part["text"] for part in content)
    return orjson.dumps(content).decode()


def is_text_part(part: Any) -> bool:
    return (
        isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
    )


def with_text(message: Message, text: str) -> Message:
    """A copy of `message` whose content is `text`; a part's `cache_control` is carried over."""
    content = message.get("content")
    out = dict(message)
    out["content"] = text
    if isinstance(content, list):  # parts: the common string content skips this
        marks = [
            p["cache_control"] for p in content if isinstance(p, dict) and "cache_control" in p
        ]
        if marks:
            out["content"] = [{"type": "text", "text": text, "cache_control": marks[-1]}]
    return out


def tool_names(messages: Sequence[Message]) -> dict[str, str]:
    """tool_call_id -> the function name the assistant called it with."""
    names: dict[str, str] = {}
    for message in messages:
        for call in message.get("tool_calls") or ():
            if isinstance(call, dict) and isinstance(call.get("function"), dict):
                names[str(call.get("id"))] = str(call["function"].get("name"))
    return names


def find_cache_markers(value: Any, path: MarkerPath = ()) -> list[MarkerPath]:
    """Paths of every dict holding a `cache_control`, in document order."""
    found: list[MarkerPath] = []
    if isinstance(value, _CONTAINERS):
        _collect_markers(value, path, found)
    return found


def find_body_markers(body: JSON) -> list[MarkerPath]:
    """`find_cache_markers(body)` for a request body, quicker on tool definitions.

    A top-level value other than `messages` (tools with their JSON schemas, a response format:
    many small containers, few characters) is walked only when its JSON holds a
    `"cache_control"` key at all; serializing it costs a tenth of walking it. The messages (long
    texts, few containers) are always walked. Same paths, same order.
    """
    found: list[MarkerPath] = []
    if body.get("cache_control") is not None:
        found.append(())
    for key, value in body.items():
        if not isinstance(value, _CONTAINERS):
            continue
        if key == "messages" or _may_hold_marker(value):
            _collect_markers(value, (key,), found)
    return found


def _may_hold_marker(value: Any) -> bool:
    """False only when no dict inside `value` has a `cache_control` key: its JSON would show it
    (the key needs no escaping). True when `value` is not plain JSON (walked as before)."""
    try:
        return _MARKER_KEY in orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError: non-string keys, too deep, other types
        return True


def _collect_markers(
    value: dict[Any, Any] | list[Any], path: MarkerPath, found: list[MarkerPath]
) -> None:
    """Appends to `found`; called only on containers, so the many string leaves cost no call."""
    items: Any
    if isinstance(value, dict):
        if value.get("cache_control") is not None:
            found.append(path)
        items = value.items()
    else:
        items = enumerate(value)
    for key, item in items:
        if type(item) is not str and isinstance(item, _CONTAINERS):  # strings: most leaves
            _collect_markers(item, (*path, key), found)


PERSISTED_OPEN = "<persisted-output"
PERSISTED_CLOSE = "</persisted-output>"
_HEADER_LINES = 3
_BLOCK_HEAD = re.compile(
    re.escape(PERSISTED_OPEN) + r' id="(?P<id>[0-9a-f]{32})" chars="(?P<chars>\d+)">\n'
    r"Output too large \((?P=chars) chars\), stored in full: GET /v1/ctx/outputs/(?P=id)"
    r'(?:; full text: [A-Za-z0-9_-]{1,64}\(ref="(?P=id)"\))?\n'
    r"Preview \(first (?P<preview>\d{1,9}) bytes\):\n"
)
_TAIL = len("\n" + PERSISTED_CLOSE)


def output_id(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def persisted_block(text: str, *, preview_bytes: int, tool_name: str = "") -> tuple[str, str]:
    """(output id, block). The block's first three lines are its header; the preview follows.
    With a `tool_name` (recall is on) the fetch line ends with the recall clause of the id."""
    oid = output_id(text)
    preview = text.encode("utf-8", "surrogatepass")[:preview_bytes].decode("utf-8", "ignore")
    recall = f"; {recall_clause(oid, tool_name=tool_name)}" if tool_name else ""
    block = (
        f'{PERSISTED_OPEN} id="{oid}" chars="{len(text)}">\n'
        f"Output too large ({len(text)} chars), stored in full: GET /v1/ctx/outputs/{oid}{recall}\n"
        f"Preview (first {preview_bytes} bytes):\n{preview}\n{PERSISTED_CLOSE}"
    )
    return oid, block


def is_persisted(text: str) -> bool:
    """True for a block `persisted_block` wrote: its three header lines, a preview of at most
    the bytes its header announces (so at most as many characters), the close tag."""
    if not text.endswith(PERSISTED_CLOSE):
        return False
    head = _BLOCK_HEAD.match(text)
    return head is not None and len(text) - head.end() - _TAIL <= int(head["preview"])


def is_framed(text: str) -> bool:
    """Whether `text` opens and closes like a block (its header not checked)."""
    return text.startswith(PERSISTED_OPEN) and text.endswith(PERSISTED_CLOSE)


def cut_preview(block: str, *, keep: int, marker: str) -> str | None:
    """A framed `block` with its preview cut to `keep` characters and `marker` after them, its
    header and close tag kept; None when it has no preview line (it then stays whole)."""
    lines = block.split("\n", _HEADER_LINES)
    if len(lines) <= _HEADER_LINES:
        return None
    header = "\n".join(lines[:_HEADER_LINES])
    preview = lines[-1].removesuffix(PERSISTED_CLOSE).removesuffix("\n")
    return f"{header}\n{preview[:keep]}{marker}\n{PERSISTED_CLOSE}"


_CLOSE_LINE = "\n" + PERSISTED_CLOSE


def without_close(text: str) -> str:
    """`text` without the close tag and the line end before it, if it ends with them."""
    return text[: -len(_CLOSE_LINE)] if text.endswith(_CLOSE_LINE) else text


_CLAUSE_OPEN = "; full text: "
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_QUOTED = re.compile(r'"(?:[^"\\\n]|\\.){0,1000}"')
"""A JSON string of at most 1,000 characters (no ref is longer): the ref of a marker."""


def recall_call(ref: str, *, tool_name: str, offset: int | None = None) -> str:
    """`ctx_recall(ref="REF")`, or with `, offset=N`: the call a marker or a page names."""
    quoted = orjson.dumps(ref).decode()
    if offset is None:
        return f"{tool_name}(ref={quoted})"
    return f"{tool_name}(ref={quoted}, offset={offset})"


def recall_clause(ref: str, *, tool_name: str) -> str:
    """`full text: ctx_recall(ref="REF")`, what each marker appends after `; `."""
    return f"full text: {recall_call(ref, tool_name=tool_name)}"


def is_recall_clause(text: str) -> bool:
    """True when `text` is `; ` and a `recall_clause` (any tool name, a non-empty ref of at most
    1,000 characters as a JSON string): how the markers' parsers tell one, without a pattern
    that walks the ref character by character (they run on every replayed decision)."""
    if not text.startswith(_CLAUSE_OPEN) or not text.endswith('")'):
        return False
    name, sep, quoted = text[len(_CLAUSE_OPEN) : -1].partition("(ref=")
    if not sep or len(quoted) > 1_002 or not _TOOL_NAME.fullmatch(name):
        return False
    try:
        ref = orjson.loads(quoted)
    except orjson.JSONDecodeError:
        return False
    return isinstance(ref, str) and bool(ref) and quoted.startswith('"')


def recall_notice(*, tool_name: str) -> str:
    """The bootstrap's one line on recall, after its tool-result notice."""
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
