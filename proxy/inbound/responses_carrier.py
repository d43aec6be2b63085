"""The Responses `Carrier`: what a Responses request was, beside the internal body made from it
(pure data).

The internal body is a plain chat-completions body, as for the Messages edge
(`proxy.inbound.messages_carrier`): every stage, the summarizer and a chat upstream see an
ordinary request. What the chat form cannot hold (reasoning items and their encrypted content,
hosted-tool items, item ids and statuses, unknown items and keys, the client's exact objects)
stays here, for the render (`proxy.inbound.responses_render`):

    Carrier.body      the client's body, as sent (never mutated)
    Carrier.items     its `input` as items (a string input: one user message)
    Carrier.internal  the internal body as built: its messages are the very objects handed to
                      the pipeline, so an untouched one is recognised by identity
    Carrier.origins   one `Origin` per internal message, in order
    Carrier.lead      how many origins stand for the leading system content (`instructions`,
                      then the input's leading system and developer messages)
    Carrier.tools     the client `tools` index of each internal tool
    Carrier.custom    names of the client's custom tools (their calls are `custom_tool_call`s)
    Carrier.custom_calls  call ids of the client's `custom_tool_call` items

An `Origin` names the client items one internal message stands for (the ones it converts and the
ones it carries) as a flat list of `Element`s, and where each internal item (content parts, then
tool calls) sits among them, so that a changed message is re-rendered around what it carries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from proxy.types import Message

INSTRUCTIONS = -1
"""The item index that stands for the body's `instructions`."""
WHOLE = -1
"""An element that is a whole item (a call, a carried item)."""
STRING = -2
"""An element that is an item's string content (or output), as one text part."""

Element = tuple[int, int]
"""(client item index, content part index | `WHOLE` | `STRING`)."""


@dataclass(frozen=True, slots=True)
class Origin:
    items: tuple[int, ...]
    """Indexes of the client items this internal message stands for, in order."""
    elements: tuple[Element, ...]
    """Those items as elements: a message's (or an output's) content parts, or whole items."""
    slots: tuple[int, ...]
    """For each item of `internal` (content parts, then tool calls): its index in `elements`."""
    internal: Message
    """The internal message as built (the object handed to the pipeline)."""
    expanded: bool = False
    """A compaction item of ctxproxy's, expanded to its summary: never sent as it came."""


@dataclass(frozen=True, slots=True)
class Carrier:
    body: Mapping[str, Any]
    items: tuple[Any, ...]
    internal: Mapping[str, Any]
    origins: tuple[Origin, ...]
    lead: int = 0
    tools: tuple[int, ...] = ()
    custom: frozenset[str] = frozenset()
    custom_calls: frozenset[str] = frozenset()


def container_key(item: Any) -> str:
    """The key holding an item's parts: `output` for a tool output, else `content`."""
    kind = item.get("type") if isinstance(item, dict) else None
    return "output" if kind in ("function_call_output", "custom_tool_call_output") else "content"


def client_item(carrier: Carrier, index: int) -> Any:
    """Client item `index`; for `INSTRUCTIONS`, a system message holding the instructions."""
    if index == INSTRUCTIONS:
        return {"role": "system", "content": carrier.body.get("instructions")}
    return carrier.items[index]


def element_values(carrier: Carrier, origin: Origin) -> list[Any]:
    """The client's JSON for each element of `origin` (a string content as one text part, made
    once: the render compares these by identity)."""
    values: list[Any] = []
    for index, part in origin.elements:
        item = client_item(carrier, index)
        if part == WHOLE:
            values.append(item)
        elif part == STRING:
            kind = "output_text" if item.get("role") == "assistant" else "input_text"
            values.append({"type": kind, "text": item[container_key(item)]})
        else:
            values.append(item[container_key(item)][part])
    return values
