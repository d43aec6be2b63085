"""Which client message each prepared internal message stands for, and re-rendering a changed
one around the blocks it carries (pure; shared by the Messages and Responses renders).

An origin is anything with the `internal` message it built (`Built`): the Messages carrier's
`Origin`, the Responses carrier's. `match_origins` pairs the prepared messages with a carrier's
origins, order kept: first by
identity (the pipeline hands untouched messages on as the very objects it received), then,
in each gap between those anchors and searching from its end (stages cut a history's head,
never its tail), a tool message by its `tool_call_id`, an assistant message with tool calls by
their ids, any other by equality but for `cache_control` markers. A message left unpaired is
new (a summary, a placeholder result) and is rendered fresh.

`splice` re-renders a changed message item by item: an item equal to the one built from the
client (but for its marker) keeps the client's block, with the marker the item has now; an item
the client's message did not have becomes a fresh block placed after the item before it; a
block that no item stands for (thinking, server-tool blocks, images in a tool result) stays
where it was. Blocks given a marker the client did not set are collected in `ours`.

`merge_over_client` does the same for a whole body: the keys a render changed take their place
among the client's, `ABSENT` standing for a key the body no longer has.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from proxy.inbound.messages_blocks import MARKER, without_marker
from proxy.types import JSON, Message

ABSENT: Any = object()
"""A key left out of a rendered body."""
Fresh = Callable[[Any], JSON | None]
Placed = tuple[tuple[int, int, int], Any]
"""A block and where it goes: (position among the client's blocks, 0 there or ±1 beside it,
order among fresh blocks)."""


class Built(Protocol):
    """An origin: it knows the internal message built from the client's (the very object)."""

    @property
    def internal(self) -> Message: ...


def items_of(message: Message) -> list[Any]:
    """A message's items: its content as parts (a non-empty string as one text part), then
    its tool calls."""
    content = message.get("content")
    if isinstance(content, str):
        items: list[Any] = [{"type": "text", "text": content}] if content else []
    elif isinstance(content, list):
        items = list(content)
    else:
        items = []
    calls = message.get("tool_calls")
    return [*items, *calls] if isinstance(calls, list) else items


def merge_over_client(client: Mapping[str, Any], rendered: Mapping[str, Any]) -> JSON:
    """The client's body with `rendered`'s values in place of its own, in the client's key order;
    keys new to it follow in `rendered`'s order; a key whose value is `ABSENT` is left out."""
    out: JSON = {}
    for key, value in client.items():
        value = rendered.get(key, value)
        if value is not ABSENT:
            out[key] = value
    for key, value in rendered.items():
        if key not in client and value is not ABSENT:
            out[key] = value
    return out


def same_item(item: Any, other: Any) -> bool:
    return bool(without_marker(item) == without_marker(other))


def splice(
    blocks: Sequence[Any],
    slots: Sequence[int],
    snapshot: Sequence[Any],
    current: Sequence[Any],
    *,
    fresh: Fresh,
    ours: list[JSON],
    sticky: bool = False,
) -> list[Any]:
    """`blocks` (the client's) re-rendered for `current` items, where `snapshot[k]` was built
    from `blocks[slots[k]]`; see the module docstring. `sticky`: see `with_marker_of`."""
    placed = splice_placed(blocks, slots, snapshot, current, fresh=fresh, ours=ours, sticky=sticky)
    return [block for _, block in placed]


def splice_placed(
    blocks: Sequence[Any],
    slots: Sequence[int],
    snapshot: Sequence[Any],
    current: Sequence[Any],
    *,
    fresh: Fresh,
    ours: list[JSON],
    sticky: bool = False,
) -> list[Placed]:
    """`splice`, each block with its place (sorted): a caller merging blocks re-rendered from
    several internal messages of one client message puts them back in the client's order."""
    matched: dict[int, Any] = {}
    placed: list[Placed] = []
    first = slots[0] if slots else len(blocks)
    start, last = 0, -1
    for i, item in enumerate(current):
        k = next((k for k in range(start, len(snapshot)) if same_item(item, snapshot[k])), None)
        if k is not None:
            matched[k] = item
            start, last = k + 1, slots[k]
            continue
        block = fresh(item)
        if block is not None:
            ours += [block] if block.get(MARKER) is not None else []
            placed.append(((last, 1, i) if last >= 0 else (first, -1, i), block))
    stands = {slot: k for k, slot in enumerate(slots)}
    for position, block in enumerate(blocks):
        k = stands.get(position)
        if k is None:
            placed.append(((position, 0, 0), block))
        elif k in matched:
            kept = with_marker_of(block, matched[k], ours, sticky=sticky)
            placed.append(((position, 0, 0), kept))
    placed.sort(key=lambda entry: entry[0])
    return placed


def with_marker_of(block: Any, holder: Any, ours: list[JSON], *, sticky: bool = False) -> Any:
    """`block` carrying the marker `holder` has now (the block itself when it is the same).
    `sticky`: the client's markers were kept from the stages, so a block the client marked
    keeps its marker whatever `holder` has."""
    want = holder.get(MARKER) if isinstance(holder, dict) else None
    have = block.get(MARKER) if isinstance(block, dict) else None
    if want == have or not isinstance(block, dict) or (sticky and have is not None):
        return block
    out = {k: v for k, v in block.items() if k != MARKER}
    if want is not None:
        out[MARKER] = want
        ours.append(out)
    return out


def match_origins(final: Sequence[Message], origins: Sequence[Built]) -> list[int | None]:
    """For each prepared message, the index of the origin it stands for, or None (new)."""
    index = {id(origin.internal): j for j, origin in enumerate(origins)}
    found: list[int | None] = []
    last = -1
    for message in final:
        j = index.get(id(message))
        if j is not None and j > last:
            last = j
        else:
            j = None
        found.append(j)
    stop = 0
    while stop < len(final):
        if found[stop] is not None:
            stop += 1
            continue
        start = stop
        while stop < len(final) and found[stop] is None:
            stop += 1
        low = found[start - 1] if start > 0 else -1
        high = found[stop] if stop < len(final) else len(origins)
        assert low is not None and high is not None  # the gap is bounded by anchors or ends
        _fill_gap(final, origins, found, (start, stop), (low, high))
    return found


def _fill_gap(
    final: Sequence[Message],
    origins: Sequence[Built],
    found: list[int | None],
    span: tuple[int, int],
    bounds: tuple[int, int],
) -> None:
    """Pair `final[start:stop]` with origins strictly between `low` and `high`, from the end."""
    (start, stop), (low, high) = span, bounds
    if stop - start == high - low - 1 and all(
        stands_for(final[start + n], origins[low + 1 + n].internal) for n in range(stop - start)
    ):
        found[start:stop] = range(low + 1, high)  # the usual gap: the same messages, copied
        return
    bound = high
    for f in range(stop - 1, start - 1, -1):
        for j in range(bound - 1, low, -1):
            if stands_for(final[f], origins[j].internal):
                found[f] = j
                bound = j
                break


def stands_for(message: Message, built: Message) -> bool:
    """Whether a prepared message is the one built from a client message, changed or not."""
    if message.get("role") != built.get("role"):
        return False
    if message.get("role") == "tool":
        return bool(message.get("tool_call_id") == built.get("tool_call_id"))
    ids, built_ids = _call_ids(message), _call_ids(built)
    if ids and ids == built_ids:
        return True
    return _bare(message) == _bare(built)


def _call_ids(message: Message) -> list[Any]:
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return []
    return [call.get("id") for call in calls if isinstance(call, dict)]


def _bare(message: Message) -> JSON:
    """`message` without any `cache_control` (on it, its parts, its tool calls), its content
    as items: a string and one text part holding it compare equal."""
    out = {k: v for k, v in message.items() if k not in (MARKER, "content", "tool_calls")}
    out["items"] = [without_marker(item) for item in items_of(message)]
    return out
