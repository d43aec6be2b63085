"""The prepared internal body + its `Carrier` → the Messages body for an Anthropic upstream (pure).

Faithful by construction: every part of the client's body that no stage changed is emitted as
the client sent it — the very objects, in the client's key order — and only what changed is
re-rendered:

    system      unchanged: as sent (string or blocks). Changed (bootstrap): text blocks in the
                order the cache stage laid out — static part (with its marker), the client's
                own blocks as sent (markers kept), dynamic part — after Claude Code's
                attribution line, which stays first
    messages    each prepared message is paired with the client message it stands for
                (`proxy.inbound.messages_splice`); a client message whose internal messages all
                came through untouched is emitted as is; a changed one is re-rendered item by
                item around what it carries (a pruned `tool_result` gets its new text, keeping
                `is_error`, images and unknown keys; thinking blocks keep their place and
                signature); a new message (summary, preserved output, placeholder result) is
                rendered fresh. Consecutive turns of one role are merged (tool results first)
                unless they are two client messages the client itself sent apart.
    tools, tool_choice, model, max_tokens, temperature, top_p, stop_sequences, stream:
                as sent unless the internal value changed, else rendered from it
    anything else (metadata, thinking, context_management, …): as sent

At most `MAX_BREAKPOINTS` `cache_control` markers leave: blocks the client never marked count
too (a server tool, a document by URL), so when the total is over, markers of ours (set here on
blocks the client had not marked) are removed, newest first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from proxy.content import MAX_BREAKPOINTS
from proxy.inbound.messages_blocks import MARKER, block_of, tool_use_of
from proxy.inbound.messages_carrier import Carrier, Origin, client_blocks, client_message
from proxy.inbound.messages_request import PARAMETERS
from proxy.inbound.messages_splice import (
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
from proxy.translate.anthropic_tools import tools_request
from proxy.types import JSON, Message

ABSENT: Any = object()
"""A key the output does not have."""
SYSTEM_ROLES = ("system", "developer")


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


def internal_to_messages(chat_body: JSON, carrier: Carrier) -> JSON:
    """The Messages body to send upstream for the prepared `chat_body` (see the module doc).
    Neither argument is mutated; unchanged parts are shared with `carrier.body`."""
    messages: list[Message] = chat_body.get("messages") or []
    lead = 0
    while lead < len(messages) and messages[lead].get("role") in SYSTEM_ROLES:
        lead += 1
    ours: list[JSON] = []
    rendered: JSON = {
        "system": _system(messages[:lead], carrier, ours),
        "messages": _conversation(messages[lead:], carrier, ours),
        "tools": _tools(chat_body, carrier, ours),
        "tool_choice": _tool_choice(chat_body, carrier),
        **_parameters(chat_body, carrier),
    }
    out: JSON = {}
    for key, value in carrier.body.items():
        value = rendered.pop(key, value)
        if value is not ABSENT:
            out[key] = value
    out.update({key: value for key, value in rendered.items() if value is not ABSENT})
    _cap_markers(out, ours)
    return out


def _system(lead: Sequence[Message], carrier: Carrier, ours: list[JSON]) -> Any:
    origin = carrier.system
    if origin is not None and len(lead) == 1 and _unchanged(lead[0], origin):
        return carrier.body["system"]
    if not lead:
        return ABSENT
    current = [part for message in lead for part in _parts_with_marker(message)]
    if origin is None:
        return splice([], (), [], current, fresh=block_of, ours=ours)
    blocks = client_blocks(carrier, origin)
    snapshot = items_of(origin.internal)
    return splice(blocks, origin.slots, snapshot, current, fresh=block_of, ours=ours)


def _parts_with_marker(message: Message) -> list[Any]:
    """A system message's parts; a message-level marker goes on its last part."""
    parts = items_of(message)
    marker = message.get(MARKER)
    if marker is not None and parts and isinstance(parts[-1], dict):
        parts[-1] = {**parts[-1], MARKER: parts[-1].get(MARKER) or marker}
    return parts


def _unchanged(message: Message, origin: Origin) -> bool:
    return message is origin.internal or message == origin.internal


def _conversation(final: Sequence[Message], carrier: Carrier, ours: list[JSON]) -> list[JSON]:
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
    if _unchanged(message, origin):
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


def _tools(chat_body: JSON, carrier: Carrier, ours: list[JSON]) -> Any:
    final, built = chat_body.get("tools"), carrier.internal.get("tools")
    if final is built or final == built:
        return carrier.body.get("tools", ABSENT)
    client = carrier.body.get("tools")
    blocks = client if isinstance(client, list) else []
    return splice(blocks, carrier.tools, built or [], final or [], fresh=_fresh_tool, ours=ours)


def _fresh_tool(tool: Any) -> JSON | None:
    """A Messages tool for a function tool a stage added (None for anything else)."""
    tools: list[JSON] = tools_request({"tools": [tool]}).get("tools", [])
    return tools[0] if tools else None


def _tool_choice(chat_body: JSON, carrier: Carrier) -> Any:
    keys = ("tool_choice", "parallel_tool_calls")
    final = [chat_body.get(key) for key in keys]
    if final == [carrier.internal.get(key) for key in keys]:
        return carrier.body.get("tool_choice", ABSENT)
    choice, parallel = final
    out: JSON
    if choice in ("auto", "none"):
        out = {"type": choice}
    elif choice == "required":
        out = {"type": "any"}
    elif isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        out = {"type": "tool", "name": choice["function"].get("name", "")}
    elif parallel is False:
        out = {"type": "auto"}
    else:
        return ABSENT
    if parallel is False and out["type"] != "none":
        out["disable_parallel_tool_use"] = True
    return out


def _parameters(chat_body: JSON, carrier: Carrier) -> JSON:
    out: JSON = {}
    for key, ours in (("model", "model"), *PARAMETERS):
        final = chat_body.get(ours, ABSENT)
        if final == carrier.internal.get(ours, ABSENT):
            continue
        if key == "stop_sequences" and isinstance(final, str):
            final = [final]
        out[key] = final
    return out


def _cap_markers(out: JSON, ours: list[JSON]) -> None:
    """Remove markers of ours, newest first, while the body has more than the API allows.
    Only blocks made here are touched (`ours` holds nothing shared with the client's body)."""
    if not ours:
        return  # every marker is the client's: passed through as sent
    total = _marker_count(out)
    while total > MAX_BREAKPOINTS and ours:
        block = ours.pop()
        if block.pop(MARKER, None) is not None:
            total -= 1


def _marker_count(out: JSON) -> int:
    """Markers where the API takes them: the body, tools, system blocks, message blocks and
    the blocks inside a tool result (a walk of those lists only, not of every value)."""
    blocks: list[Any] = [out, *_listed(out.get("tools")), *_listed(out.get("system"))]
    for message in _listed(out.get("messages")):
        for block in _listed(message.get("content") if isinstance(message, dict) else None):
            blocks.append(block)
            if isinstance(block, dict) and block.get("type") == "tool_result":
                blocks += _listed(block.get("content"))
    return sum(1 for b in blocks if isinstance(b, dict) and b.get(MARKER) is not None)


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
