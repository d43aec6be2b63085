"""The prepared history → the Responses `input` items (pure; for
`proxy.inbound.responses_render`).

Each prepared message is paired with the origin it stands for (`proxy.inbound.splice`) and
rendered to items:

    untouched                 the client's items, as sent (the very objects), carried ones too
    changed                   re-rendered element by element around what it carries: a pruned
                              `function_call_output` gets its new output and keeps its id,
                              status and unknown keys; reasoning and hosted-tool items keep
                              their place; a part the stage added joins the item beside it
    new, or a compaction      fresh items: a user or system message with `input_text` parts,
      item of ctxproxy's      an assistant message, `function_call`s (`custom_tool_call`s for
                              custom tools), a `function_call_output` (or custom one)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from proxy.inbound.responses_carrier import (
    WHOLE,
    Carrier,
    Origin,
    client_item,
    container_key,
    element_values,
)
from proxy.inbound.responses_items import (
    CALL_KINDS,
    fresh_call_item,
    fresh_part,
)
from proxy.inbound.splice import Placed, items_of, match_origins, splice_placed
from proxy.types import JSON, Message

FRESH = -10
"""The target of parts that join no client item: a new item is made for them."""
ITEM = -11
"""The target of a whole item (a carried one as sent, a fresh call): it stands alone."""


def render_items(
    final: Sequence[Message], origins: Sequence[Origin], carrier: Carrier
) -> tuple[list[Any], bool]:
    """Items for the prepared messages `final`, and whether they are all the client's as sent,
    in order (then the caller sends the client's `input` itself)."""
    found = match_origins(final, origins)
    pristine = len(final) == len(origins)
    out: list[Any] = []
    for n, (message, j) in enumerate(zip(final, found, strict=True)):
        origin = origins[j] if j is not None else None
        if origin is None or origin.expanded:
            out += fresh_items(message, carrier)
            pristine = False
        elif message is origin.internal or message == origin.internal:
            out += [client_item(carrier, i) for i in origin.items]
            pristine = pristine and j == n
        else:
            out += changed_items(message, origin, carrier)
            pristine = False
    return out, pristine


def fresh_items(message: Message, carrier: Carrier) -> list[JSON]:
    """Items for a message no client item stands for (a summary, a placeholder result)."""
    role = str(message.get("role") or "user")
    parts = [fresh_part(p, role=role) for p in _content_parts(message)]
    kept = [p for p in parts if p is not None]
    if role == "tool":
        return [_output_item(message, kept, carrier)]
    out: list[JSON] = []
    if role == "assistant":
        text = "".join(str(p.get("text") or "") for p in kept if p.get("type") == "output_text")
        if text:
            out.append({"type": "message", "role": "assistant", "content": text})
        for call in message.get("tool_calls") or ():
            item = fresh_call_item(call, custom=carrier.custom)
            if item is not None:
                out.append(item)
    elif kept:
        out.append({"type": "message", "role": role, "content": kept})
    return out


def _content_parts(message: Message) -> list[Any]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content) if isinstance(content, list) else []


def _output_item(message: Message, parts: list[JSON], carrier: Carrier) -> JSON:
    call_id = str(message.get("tool_call_id") or "")
    kind = "custom_tool_call_output" if call_id in carrier.custom_calls else "function_call_output"
    content = message.get("content")
    output: Any = content if isinstance(content, str) else parts
    return {"type": kind, "call_id": call_id, "output": output}


def changed_items(message: Message, origin: Origin, carrier: Carrier) -> list[Any]:
    """The items of `origin` re-rendered for the changed `message` (the module docstring)."""
    role = str(message.get("role") or "user")
    values = element_values(carrier, origin)
    snapshot, current = items_of(origin.internal), items_of(message)

    def fresh(item: Any) -> JSON | None:
        if isinstance(item, dict) and isinstance(item.get("function"), dict):
            return fresh_call_item(item, custom=carrier.custom)
        return fresh_part(item, role=role)

    placed = splice_placed(values, origin.slots, snapshot, current, fresh=fresh, ours=[])
    out: list[Any] = []
    for target, blocks, kept in _grouped(placed, origin):
        if target == ITEM:
            out += blocks  # whole items: carried ones as sent, fresh calls
        elif target == FRESH:
            out.append(_fresh_container(message, blocks, carrier))
        else:
            out.append(_rebuilt(client_item(carrier, target), blocks, kept=kept, role=role))
    return out


def _grouped(placed: Sequence[Placed], origin: Origin) -> list[tuple[int, list[Any], bool]]:
    """The placed blocks in runs by the item they go to: a client item's index (its content
    parts), `ITEM` (a whole item, alone) or `FRESH`; and whether a run is all as sent."""
    groups: list[tuple[int, list[Any], bool]] = []
    for (position, side, _), block in placed:
        if side == 0:  # a client element, kept
            index, part = origin.elements[position]
            target = ITEM if part == WHOLE else index
        elif isinstance(block, dict) and block.get("type") in CALL_KINDS:
            target = ITEM
        else:  # a fresh part joins the item whose element it is placed beside
            anchor = origin.elements[position] if position < len(origin.elements) else None
            target = anchor[0] if anchor is not None and anchor[1] != WHOLE else FRESH
        if groups and groups[-1][0] == target != ITEM:
            _, blocks, kept = groups[-1]
            groups[-1] = (target, [*blocks, block], kept and side == 0)
        else:
            groups.append((target, [block], side == 0))
    return groups


def _fresh_container(message: Message, parts: list[Any], carrier: Carrier) -> JSON:
    role = str(message.get("role") or "user")
    if role == "tool":
        return _output_item({**message, "content": parts}, parts, carrier)
    return {"type": "message", "role": role, "content": parts}


def _rebuilt(item: JSON, parts: list[Any], *, kept: bool, role: str) -> JSON:
    """`item` holding `parts` (the item itself when they are all its own, as sent)."""
    key = container_key(item)
    content = item.get(key)
    same_role = key == "output" or role == "tool" or item.get("role") == role
    if kept and same_role:
        if isinstance(content, str) and len(parts) == 1:
            return item
        if isinstance(content, list) and len(parts) == len(content):
            return item
    new: Any = parts
    plain = all(isinstance(p, dict) and set(p) == {"type", "text"} for p in parts)
    if isinstance(content, str) and plain:
        new = "".join(p["text"] for p in parts)
    out = {**item, key: new}
    if not same_role:
        out["role"] = role
    return out
