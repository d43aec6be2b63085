"""The `Carrier`: what a Messages request was, beside the internal body made from it (pure data).

The internal body is a plain chat-completions body: no keys of its own (only the client's
`cache_control` markers, where a chat client may send them too), so every stage, the summarizer
and an OpenAI upstream (`proxy.inbound.chat_request`) see an ordinary request. Everything the
chat form cannot hold (thinking signatures, citations, server-tool blocks, unknown blocks and keys,
the client's exact bytes) stays here, in a side table the render reads:

    Carrier.body      the client's Messages body, as sent (never mutated)
    Carrier.internal  the internal body as built: its messages are the very objects the
                      pipeline receives, so an untouched message is recognised by identity
    Carrier.origins   one `Origin` per internal message after the system message, in order
    Carrier.system    the `Origin` of the internal system message (None without `system`)
    Carrier.tools     the client `tools` index of each internal tool
    Carrier.sticky_markers  whether the client's message markers were kept from the stages

An `Origin` names the client message and the blocks one internal message stands for, and where
each of its items (content parts, then tool calls) sits among those blocks, so that a changed
message can be re-rendered item by item around the blocks it carries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from proxy.types import JSON, Message

SYSTEM = -1
"""`Origin.message` of the system message (the client's top-level `system`)."""


@dataclass(frozen=True, slots=True)
class Origin:
    message: int
    """Index of the client message (`SYSTEM` for the top-level `system`)."""
    blocks: tuple[int, ...]
    """Indexes of the client blocks this internal message stands for, in order; empty for a
    string content. For a tool message: the one `tool_result` block and the carried blocks
    of its user message that no other internal message stands for."""
    slots: tuple[int, ...]
    """For each item of `internal` (content parts, then tool calls): its position among the
    owned blocks (for a tool message: among the `tool_result`'s own content blocks)."""
    internal: Message
    """The internal message as built (the object handed to the pipeline)."""


@dataclass(frozen=True, slots=True)
class Carrier:
    body: Mapping[str, Any]
    internal: Mapping[str, Any]
    origins: tuple[Origin, ...]
    system: Origin | None = None
    tools: tuple[int, ...] = ()
    sticky_markers: bool = False
    """The client's markers on messages were kept out of the internal form: each comes back
    on its block as sent."""


def client_blocks(carrier: Carrier, origin: Origin) -> list[Any]:
    """The client blocks `origin` owns, in order; a string content as one text block."""
    content = _client_content(carrier, origin)
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list):
        return []
    return [content[i] for i in origin.blocks]


def _client_content(carrier: Carrier, origin: Origin) -> Any:
    if origin.message == SYSTEM:
        return carrier.body.get("system")
    message = carrier.body["messages"][origin.message]
    return message.get("content")


def client_message(carrier: Carrier, origin: Origin) -> JSON:
    """The client message `origin` came from (never the system)."""
    message: JSON = carrier.body["messages"][origin.message]
    return message
