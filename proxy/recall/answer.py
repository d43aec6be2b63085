"""One recall call answered: its arguments read, the item or the search, a tool result text.

Pure except `answer_call`, the async shell: it loads the persisted outputs the index names but
does not hold (`RecallIndex.stored`) through an `OutputReader` (the state store satisfies it),
scoped to the caller's tenant. Never raises: malformed or missing arguments, an unknown ref
(another conversation's included) or a store that cannot be read give a short explanatory
result listing the refs that exist.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, NamedTuple, Protocol

import orjson

from proxy.recall.index import CutItem, CutKind, RecallIndex
from proxy.recall.refs import recall_call
from proxy.recall.search import MAX_QUERY_CHARS, page_of, search_documents
from proxy.recall.tool import RecallSettings

__all__ = [
    "OutputReader",
    "RecallAnswer",
    "RecallArgs",
    "answer",
    "answer_call",
    "needed_outputs",
    "parse_arguments",
]

_LISTED = 40
"""At most this many refs in an explanation; the count of the rest follows."""
_KIND_NAMES: Mapping[CutKind, str] = {
    "result": "tool result",
    "output": "stored output",
    "summary": "summarized",
}


class OutputReader(Protocol):
    """Where persisted outputs are read back (`StateStore.get_output` fits)."""

    async def get_output(self, tenant: str, output_id: str) -> str | None: ...


class RecallArgs(NamedTuple):
    ref: str | None = None
    query: str | None = None
    offset: int = 0


class RecallAnswer(NamedTuple):
    """The tool result's text, and what to count: `kind` ref/query (invalid: unreadable
    arguments), `outcome` hit/miss."""

    text: str
    kind: Literal["ref", "query", "invalid"]
    outcome: Literal["hit", "miss"]


def parse_arguments(raw: object) -> RecallArgs | str:
    """The call's arguments (the JSON text the model wrote), or what is wrong with them."""
    if not isinstance(raw, str) or not raw.strip():
        return "No arguments: pass ref (a ref a marker names) or query (text to search for)."
    try:
        args = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return "The arguments are not a JSON object."
    if not isinstance(args, dict):
        return "The arguments are not a JSON object."
    ref, query, offset = args.get("ref"), args.get("query"), _offset(args.get("offset", 0))
    if ref is not None and not (isinstance(ref, str) and ref.strip()):
        return "ref must be a non-empty string."
    if query is not None and not (isinstance(query, str) and query.strip()):
        return "query must be a non-empty string."
    if ref is None and query is None:
        return "Pass ref (a ref a marker names) or query (text to search for)."
    if offset is None:
        return "offset must be a whole number of characters, 0 or more."
    if isinstance(query, str):
        query = query.strip()
        if "\n" in query or "\r" in query:
            return "query is matched within one line: send a single line of text."
        if len(query) > MAX_QUERY_CHARS:
            return f"query is too long: at most {MAX_QUERY_CHARS} characters."
    return RecallArgs(ref.strip() if isinstance(ref, str) else None, query, offset)


def _offset(value: object) -> int | None:
    """A non-negative whole number (given as a number or as digits), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    return value if isinstance(value, int) and value >= 0 else None


def needed_outputs(args: RecallArgs, index: RecallIndex) -> tuple[str, ...]:
    """The output ids to load from the store before `answer`: the ref's, when only the store
    has it; for a search, every one the index names but does not hold."""
    if args.ref is not None:
        return (args.ref,) if args.ref in index.stored else ()
    return index.stored


def answer(
    args: RecallArgs | str,
    index: RecallIndex,
    *,
    settings: RecallSettings,
    loaded: Mapping[str, str | None] | None = None,
) -> RecallAnswer:
    """The tool result for one call; `loaded` holds the outputs `needed_outputs` named (None:
    not in the store, or the store could not be read)."""
    loaded = loaded or {}
    if isinstance(args, str):
        return RecallAnswer(f"{args}\n{_listing(index, settings)}", "invalid", "miss")
    if args.ref is None:
        stored = [(ref, text) for ref in index.stored if (text := loaded.get(ref)) is not None]
        return _search([*index.documents(), *stored], args.query or "", settings)
    item, candidates = index.resolve(args.ref)
    if item is None and args.ref in index.stored and (text := loaded.get(args.ref)) is not None:
        item = CutItem(args.ref, "output", text)
    if item is None or item.text is None:
        return RecallAnswer(_miss(args.ref, index, settings, candidates), "ref", "miss")
    if args.query is not None:
        return _search([(item.ref, item.text)], args.query, settings)
    text = page_of(
        item.text,
        ref=args.ref,
        offset=args.offset,
        max_chars=settings.max_result_chars,
        tool_name=settings.tool_name,
    )
    return RecallAnswer(
        text, "ref", "hit" if args.offset < len(item.text) or not item.text else "miss"
    )


async def answer_call(
    arguments: object,
    index: RecallIndex,
    *,
    settings: RecallSettings,
    reader: OutputReader,
    tenant: str,
) -> RecallAnswer:
    """`answer` for the raw `arguments` of one call, loading what it needs from `reader`."""
    args = parse_arguments(arguments)
    loaded: dict[str, str | None] = {}
    if not isinstance(args, str):
        for output_id in needed_outputs(args, index):
            try:
                loaded[output_id] = await reader.get_output(tenant, output_id)
            except Exception:  # fail-open: a store that cannot be read is a miss, not an error
                loaded[output_id] = None
    return answer(args, index, settings=settings, loaded=loaded)


def _search(documents: list[tuple[str, str]], query: str, settings: RecallSettings) -> RecallAnswer:
    found = search_documents(
        documents, query, max_chars=settings.max_result_chars, tool_name=settings.tool_name
    )
    return RecallAnswer(found.text, "query", "hit" if found.occurrences else "miss")


def _miss(
    ref: str, index: RecallIndex, settings: RecallSettings, candidates: tuple[CutItem, ...]
) -> str:
    quoted = orjson.dumps(ref).decode()
    if candidates:
        lines = [f"ref={quoted} names {len(candidates)} cut items; recall one by its own ref:"]
        lines += [f"- {_row(c.ref, c.kind, len(c.text or ''))}" for c in candidates]
        return "\n".join(lines)
    if ref in index.stored:
        return f"The output ref={quoted} is no longer stored.\n{_listing(index, settings)}"
    return f"No cut item has ref={quoted} in this conversation.\n{_listing(index, settings)}"


def _listing(index: RecallIndex, settings: RecallSettings) -> str:
    rows = index.listing()
    if not rows:
        return "Nothing has been cut from this conversation."
    call = recall_call("REF", tool_name=settings.tool_name)
    lines = [f"Refs that exist ({len(rows)}), each for {call}:"]
    lines += [f"- {_row(ref, kind, chars)}" for ref, kind, chars in rows[:_LISTED]]
    if len(rows) > _LISTED:
        lines.append(f"- and {len(rows) - _LISTED} more; search them with query")
    return "\n".join(lines)


def _row(ref: str, kind: CutKind, chars: int) -> str:
    size = f", {chars} chars" if chars >= 0 else ""
    return f"{orjson.dumps(ref).decode()} ({_KIND_NAMES[kind]}{size})"
