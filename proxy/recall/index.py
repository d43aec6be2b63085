"""What the proxy cut from one request, and the original of each cut item, by ref. Pure.

Clients resend their whole history, so the original of every cut is in the request: the index
compares the client's messages (`body["messages"]` as sent) with the prepared upstream ones. Both
lose their leading system/developer messages; the rest (the histories) line up as

    upstream history = replacement (a stored summary, preserved output…) + one message per
                       client message from `covers` on (budgets and pruning edit, never drop)

`covers` being how many client messages a compaction replaced (0: none). Items, in the order of
the client's history:

    summary  each replaced message: a tool result by its `tool_call_id`, any other message by
             `turns:i-i`; the whole span is `turns:0-<covers-1>` (any `turns:` span of the
             history is read on demand, as a transcript)
    result   a tool result from `covers` on whose upstream text differs from the client's (pruned,
             truncated, persisted): by its `tool_call_id`
    output   a persisted output id that a cut result's marker names (`ctx_recall(ref="<id>")`):
             the same original text. One named only by the replacement (a summary quoting it) has
             no text here: the caller loads it from the store (`RecallIndex.stored`)

A `tool_call_id` that names several cut results is ambiguous: `resolve` gives the candidates,
each by `turns:i-i`. `cut_kinds` is the cheap per-request check ("was anything cut?");
`has_cut` the same question answered at the first cut; `build_index` is only needed once the
model calls the tool.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, TypeAlias

import orjson

from proxy.content import content_text, is_framed
from proxy.recall.refs import find_refs, is_output_id, parse_turns, turns_ref
from proxy.types import Message

__all__ = [
    "CutItem",
    "CutKind",
    "RecallIndex",
    "Resolution",
    "build_index",
    "cut_kinds",
    "has_cut",
    "history_of",
    "message_text",
]

CutKind: TypeAlias = Literal["result", "output", "summary"]
_LEADING = frozenset({"system", "developer"})


class CutItem(NamedTuple):
    """One cut item: its ref, kind and original text (None: an output the store holds)."""

    ref: str
    kind: CutKind
    text: str | None


class Resolution(NamedTuple):
    """What a ref names: one item, several candidates (an ambiguous id), or nothing."""

    item: CutItem | None = None
    candidates: tuple[CutItem, ...] = ()


def history_of(messages: Sequence[Message]) -> Sequence[Message]:
    """`messages` without the leading system/developer messages (a slice, nothing copied)."""
    lead = 0
    while lead < len(messages) and messages[lead].get("role") in _LEADING:
        lead += 1
    return messages[lead:]


def message_text(message: Message) -> str:
    """A message as text for recall and search: its content (a string as is, text parts joined by
    newlines, another part as `[<type>]`), then a `[call <name> <id>] <arguments>` line per tool
    call. A user or tool message with string content is exactly that string."""
    content = message.get("content")
    if content is None or isinstance(content, str):
        text = content or ""
    elif isinstance(content, list):
        text = "\n".join(_part_text(part) for part in content)
    else:
        text = orjson.dumps(content, default=str).decode()
    lines = [text] if text else []
    for call in message.get("tool_calls") or ():
        if isinstance(call, dict):
            function = _object(call.get("function"))
            lines.append(
                f"[call {function.get('name', '')} {call.get('id', '')}] "
                f"{function.get('arguments', '')}"
            )
    return "\n".join(lines)


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _part_text(part: object) -> str:
    if isinstance(part, dict) and isinstance(part.get("text"), str):
        return str(part["text"])
    kind = part.get("type", "part") if isinstance(part, dict) else type(part).__name__
    return f"[{kind}]"


def _tool_pairs(
    client: Sequence[Message], upstream: Sequence[Message], covers: int
) -> Iterator[tuple[int, str, str]]:
    """(client position, client text, upstream text) of each tool result from `covers` on whose
    upstream counterpart answers the same call. Nothing when the histories do not line up."""
    shift = len(upstream) - (len(client) - covers)
    if shift < 0 or covers > len(client):
        return
    pairs = zip(client[covers:], upstream[shift:], strict=False)
    for position, (sent, out) in enumerate(pairs, start=covers):
        if sent is out or sent.get("role") != "tool":
            continue  # unchanged messages stay the very same objects: most of a history
        before, after = sent.get("content"), out.get("content")
        if before is after or out.get("tool_call_id") != sent.get("tool_call_id"):
            continue
        if out.get("role") != "tool":
            continue
        original, cut = content_text(before), content_text(after)
        if original != cut:
            yield position, original, cut


def cut_kinds(
    messages: Sequence[Message], prepared: Sequence[Message], *, covers: int
) -> frozenset[CutKind]:
    """Which kinds of cut the prepared request carries; empty when nothing was cut.

    `messages` as the client sent them, `prepared` as they go upstream (both with system
    messages). One pass over the tool results; unchanged ones cost an identity check."""
    client, upstream = history_of(messages), history_of(prepared)
    kinds: set[CutKind] = {"summary"} if 0 < covers <= len(client) else set()
    for _, _, cut in _tool_pairs(client, upstream, covers):
        kinds.add("output" if is_framed(cut) else "result")
        if len(kinds) == 3:
            break
    return frozenset(kinds)


def has_cut(messages: Sequence[Message], prepared: Sequence[Message], *, covers: int) -> bool:
    """Whether `cut_kinds` would be non-empty, stopping at the first cut (the per-request check
    of whether to offer the recall tool)."""
    if 0 < covers <= len(history_of(messages)):
        return True
    return next(_tool_pairs(history_of(messages), history_of(prepared), covers), None) is not None


@dataclass(frozen=True, slots=True)
class RecallIndex:
    """ref → cut item for one request. Build it with `build_index`."""

    history: Sequence[Message]
    """The client's history (after its system messages): `turns:` refs read it."""
    covers: int = 0
    items: Mapping[str, CutItem] = field(default_factory=dict)
    """Every item with a text by its own ref, in the order of the client's history."""
    ambiguous: Mapping[str, tuple[CutItem, ...]] = field(default_factory=dict)
    """A `tool_call_id` that several cut results answer → those results."""
    stored: tuple[str, ...] = ()
    """Output ids the replacement names whose text is not in the request (load from the store)."""

    @property
    def empty(self) -> bool:
        return not self.covers and not self.items and not self.stored

    def resolve(self, ref: str) -> Resolution:
        """The item `ref` names: a known ref, an ambiguous id, or a `turns:` span of the history."""
        if (item := self.items.get(ref)) is not None:
            return Resolution(item)
        if ref in self.ambiguous:
            return Resolution(candidates=self.ambiguous[ref])
        span = parse_turns(ref)
        if span is not None and span[1] < len(self.history):
            return Resolution(CutItem(ref, "summary", self.transcript(*span)))
        return Resolution()

    def transcript(self, first: int, last: int) -> str:
        """Messages `first`..`last` as text: one message exactly (`message_text`), several each
        under a `[#i role]` header line."""
        if first == last:
            return message_text(self.history[first])
        return "\n\n".join(
            f"[#{i} {self.history[i].get('role', '')}]\n{message_text(self.history[i])}"
            for i in range(first, last + 1)
        )

    def listing(self) -> list[tuple[str, CutKind, int]]:
        """(ref, kind, characters) of what can be recalled: the replaced span (which stands for
        each message in it), each cut result and output, then the outputs only the store holds
        (size unknown: -1)."""
        rows: list[tuple[str, CutKind, int]] = []
        if self.covers:
            span = self.history[: self.covers]
            rows.append((turns_ref(0, self.covers - 1), "summary", _chars(span)))
        rows.extend(
            (ref, item.kind, len(item.text or ""))
            for ref, item in self.items.items()
            if item.kind != "summary"
        )
        rows.extend((ref, "output", -1) for ref in self.stored)
        return rows

    def documents(self) -> Iterator[tuple[str, str]]:
        """(ref, text) of everything cut, for a search, in history order: each replaced message
        and each cut result once (an output's text is its result's, so outputs are skipped)."""
        for ref, item in self.items.items():
            if item.kind != "output" and item.text is not None:
                yield ref, item.text


def _chars(messages: Sequence[Message]) -> int:
    return sum(len(message_text(m)) for m in messages)


def build_index(
    messages: Sequence[Message], prepared: Sequence[Message], *, covers: int, tool_name: str
) -> RecallIndex:
    """The recall index of one request (`messages` as sent, `prepared` as sent upstream, both
    with system messages; `covers` as in the module doc). Never raises on odd input: what does
    not line up is simply not indexed."""
    client, upstream = history_of(messages), history_of(prepared)
    covers = covers if 0 <= covers <= len(client) else 0
    found: list[tuple[str, CutItem]] = []  # (the key a marker names, the item)
    for position in range(covers):
        message = client[position]
        text = message_text(message)
        found.append((_result_id(message) or turns_ref(position, position), _at(position, text)))
    outputs: list[CutItem] = []
    for position, original, cut in _tool_pairs(client, upstream, covers):
        found.append((str(client[position]["tool_call_id"]), _at(position, original, "result")))
        for ref in find_refs(cut, tool_name=tool_name):
            if is_output_id(ref):
                outputs.append(CutItem(ref, "output", original))
    items, ambiguous = _keyed(found)
    for output in outputs:
        items.setdefault(output.ref, output)
    replaced = len(upstream) - (len(client) - covers) if covers else 0
    named = _named_refs(upstream[: max(replaced, 0)], tool_name)
    stored = tuple(ref for ref in named if is_output_id(ref) and ref not in items)
    return RecallIndex(client, covers, items, ambiguous, stored)


def _result_id(message: Message) -> str | None:
    call_id = message.get("tool_call_id")
    return call_id if message.get("role") == "tool" and isinstance(call_id, str) else None


def _at(position: int, text: str, kind: CutKind = "summary") -> CutItem:
    """An item known by its position (`_keyed` gives it its id when that is its own)."""
    return CutItem(turns_ref(position, position), kind, text)


def _keyed(
    found: list[tuple[str, CutItem]],
) -> tuple[dict[str, CutItem], dict[str, tuple[CutItem, ...]]]:
    """Items by key; a key that several items share is ambiguous, and each of them is known by
    its position (`turns:i-i`) instead."""
    groups: dict[str, list[CutItem]] = {}
    for key, item in found:
        groups.setdefault(key, []).append(item)
    items: dict[str, CutItem] = {}
    ambiguous: dict[str, tuple[CutItem, ...]] = {}
    for key, group in groups.items():
        if len(group) > 1:
            ambiguous[key] = tuple(group)
            items.update((item.ref, item) for item in group)
        else:
            items[key] = group[0]._replace(ref=key)
    return items, ambiguous


def _named_refs(replacement: Sequence[Message], tool_name: str) -> list[str]:
    """Refs that the messages standing in for the replaced span name (a summary's line…)."""
    refs: list[str] = []
    for message in replacement:
        content = message.get("content")
        if isinstance(content, str) and f"{tool_name}(ref=" in content:
            refs.extend(find_refs(content, tool_name=tool_name))
    return list(dict.fromkeys(refs))
