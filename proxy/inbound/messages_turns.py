"""The prepared history → the Messages `messages` of the request (pure; for
`proxy.inbound.messages_render`).

Each prepared message is paired with the client message it stands for
(`proxy.inbound.splice.match_origins`) and rendered to blocks: an untouched one to the
client's own blocks; a changed one item by item around what it carries (a pruned
`tool_result` gets its new text and keeps `is_error`, images, unknown keys and the client's
marker; thinking blocks keep their place and signature); a new one (summary, preserved output,
placeholder result) fresh, by `proxy.translate.anthropic_blocks`. Then turns are formed:
consecutive blocks of one role make one turn, unless they come from two client messages the
client itself sent apart. A turn made of all of one client message's internal messages, all
untouched, is that client message (the very object); one client message changed keeps its own
block order; a turn mixing sources puts tool results first, as the API requires. Markers this
module sets where the client had none are collected in `ours`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from proxy.inbound.messages_blocks import MARKER, block_of, tool_use_of
from proxy.inbound.messages_carrier import Carrier, Origin, client_blocks, client_message
from proxy.inbound.splice import (
    items_of,
    match_origins,
    splice,
    splice_placed,
    with_marker_of,
)
from proxy.translate.anthropic_blocks import (
    assistant_blocks,
    content_blocks,
    tool_result_block,
    with_message_cache_control,
)
from proxy.types import JSON, Message


class _Piece(NamedTuple):
    """The blocks one prepared message renders to, and where they came from."""

    role: str
    origin: Origin | None
    blocks: list[Any]
    pristine: bool
    places: list[Place]
    """Where each block goes among its client message's blocks (`Place`)."""


Place = tuple[int, int, int]
"""(client block index, 0 at it or ±1 beside it, order among fresh blocks)."""


def unchanged(message: Message, origin: Origin) -> bool:
    """Whether a prepared message is the one built from the client's, as built."""
    return message is origin.internal or message == origin.internal


def render_turns(final: Sequence[Message], carrier: Carrier, ours: list[JSON]) -> list[JSON]:
    """The Messages turns for the prepared history `final` (the module docstring)."""
    pieces: list[_Piece | None] = []
    for message, j in zip(final, match_origins(final, carrier.origins), strict=True):
        if j is not None:
            pieces.append(_piece(message, carrier, carrier.origins[j], ours))
            continue
        piece = _fresh(message)
        if piece is not None:
            ours += [b for b in piece.blocks if isinstance(b, dict) and b.get(MARKER) is not None]
        pieces.append(piece)
    groups: list[list[_Piece]] = []
    for piece in pieces:
        if piece is None:
            continue
        if groups and groups[-1][-1].role == piece.role and _joins(groups[-1], piece):
            groups[-1].append(piece)
        else:
            groups.append([piece])
    owned = _origins_per_message(carrier)
    return [_message_of(group, carrier, owned) for group in groups]


def _piece(message: Message, carrier: Carrier, origin: Origin, ours: list[JSON]) -> _Piece:
    role = "assistant" if origin.internal.get("role") == "assistant" else "user"
    blocks = client_blocks(carrier, origin)
    own = [(index, 0, 0) for index in origin.blocks or range(len(blocks))]
    if unchanged(message, origin):
        return _Piece(role, origin, blocks, True, own)
    if origin.internal.get("role") == "tool":
        result = _tool_result(blocks[0], message, origin, ours, sticky=carrier.sticky_markers)
        return _Piece(role, origin, [result, *blocks[1:]], False, own)
    snapshot, current = items_of(origin.internal), items_of(message)
    placed = splice_placed(
        blocks,
        origin.slots,
        snapshot,
        current,
        fresh=_fresh_item,
        ours=ours,
        sticky=carrier.sticky_markers,
    )
    places = [(_client_index(origin, p), side, n) for (p, side, n), _ in placed]
    return _Piece(role, origin, [block for _, block in placed], False, places)


def _client_index(origin: Origin, position: int) -> int:
    """The client block index of a position among `origin`'s owned blocks (one past the
    last for the end)."""
    if not origin.blocks:
        return position  # a string content: one block, at 0
    if position < len(origin.blocks):
        return origin.blocks[position]
    return origin.blocks[-1] + 1


def _fresh_item(item: Any) -> JSON | None:
    if isinstance(item, dict) and item.get("type") == "function" and "function" in item:
        return tool_use_of(item)
    return block_of(item)


def _tool_result(
    block: JSON, message: Message, origin: Origin, ours: list[JSON], *, sticky: bool
) -> Any:
    """The client's `tool_result` block carrying the prepared tool message's content/marker."""
    snapshot, current = items_of(origin.internal), items_of(message)
    content = block.get("content")
    out = block
    if current != snapshot:
        out = dict(block)
        own = content if isinstance(content, list) else items_of({"content": content})
        parts = splice(
            own, origin.slots, snapshot, current, fresh=block_of, ours=ours, sticky=sticky
        )
        plain = len(parts) == 1 and _is_plain_text(parts[0])
        if isinstance(content, str) and plain:
            out["content"] = parts[0]["text"]
        elif parts or "content" in block:
            out["content"] = parts
    return with_marker_of(out, message, ours, sticky=sticky)


def _is_plain_text(block: Any) -> bool:
    return isinstance(block, dict) and set(block) == {"type", "text"} and block["type"] == "text"


def _fresh(message: Message) -> _Piece | None:
    """A prepared message no client message stands for; None when it renders to nothing."""
    role = message.get("role")
    if role == "tool":
        blocks = [tool_result_block(message)]
    elif role == "assistant":
        blocks = assistant_blocks(message)
    else:
        own = content_blocks(message.get("content"))
        blocks = with_message_cache_control(own, message.get(MARKER))
    if not blocks:
        return None
    kind = "assistant" if role == "assistant" else "user"
    return _Piece(kind, None, blocks, False, [(0, 0, 0)] * len(blocks))


def _joins(group: list[_Piece], piece: _Piece) -> bool:
    """Whether `piece` belongs to the turn `group` is building (same role checked before):
    yes, unless both come from client messages and from different ones."""
    if piece.origin is None:
        return True
    sources = {p.origin.message for p in group if p.origin is not None}
    return not sources or piece.origin.message in sources


def _origins_per_message(carrier: Carrier) -> dict[int, int]:
    counts: dict[int, int] = {}
    for origin in carrier.origins:
        counts[origin.message] = counts.get(origin.message, 0) + 1
    return counts


def _message_of(group: list[_Piece], carrier: Carrier, owned: dict[int, int]) -> JSON:
    sources = [p.origin for p in group if p.origin is not None]
    single = len({o.message for o in sources}) == 1 and len(sources) == len(group)
    if single and len(group) == owned[sources[0].message] and all(p.pristine for p in group):
        return client_message(carrier, sources[0])
    if single:  # one client message, changed: its own block order
        placed = [pair for piece in group for pair in zip(piece.places, piece.blocks, strict=True)]
        blocks = [block for _, block in sorted(placed, key=lambda pair: pair[0])]
    else:  # tool results lead a user turn (the API requires it)
        blocks = [block for piece in group for block in piece.blocks]
        blocks.sort(key=lambda b: not (isinstance(b, dict) and b.get("type") == "tool_result"))
    base = client_message(carrier, sources[0]) if sources else {}
    if single and _same_objects(blocks, base.get("content")):
        return base  # every block came back as sent (a marker of ours gave way to the client's)
    return {**base, "role": group[0].role, "content": blocks}


def _same_objects(blocks: list[Any], content: Any) -> bool:
    if not isinstance(content, list) or len(content) != len(blocks):
        return False
    return all(a is b for a, b in zip(blocks, content, strict=True))
