"""The images of the client's tool results, by the prepared tool message they came with (pure;
for `proxy.inbound.chat_request`).

The internal tool message holds a result's text only: images stay with the client's block
(`tool_result` content `image` blocks; `function_call_output` `input_image` parts), out of
every stage's sight, since the stages read a tool result as text. A chat upstream cannot take
them in a `tool` message either; these functions find them again for each prepared tool
message paired with a client result (`proxy.inbound.splice.match_origins`), as image_url parts
(a base64 source as a `data:` URL), whatever a stage did to the text — the Anthropic render
keeps them too. A result whose message a summary replaced has none; an image by file id (no
URL a chat model could fetch) is not found.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from proxy.inbound import messages_blocks, responses_items
from proxy.inbound.messages_carrier import Carrier as MessagesCarrier
from proxy.inbound.messages_carrier import client_blocks
from proxy.inbound.responses_carrier import Carrier as ResponsesCarrier
from proxy.inbound.responses_carrier import client_item
from proxy.inbound.splice import match_origins
from proxy.types import JSON, Message


def messages_result_images(
    final: Sequence[Message], carrier: MessagesCarrier
) -> dict[int, list[JSON]]:
    """Image parts by the index in `final` of the tool message whose `tool_result` held them."""
    held: dict[int, list[JSON]] = {}
    for j, origin in enumerate(carrier.origins):
        if origin.internal.get("role") == "tool":
            result = client_blocks(carrier, origin)[0]
            content = result.get("content") if isinstance(result, dict) else None
            held[j] = _images(content, "image", messages_blocks.part_of)
    return _by_message(final, carrier.origins, held)


def responses_result_images(
    final: Sequence[Message], carrier: ResponsesCarrier
) -> dict[int, list[JSON]]:
    """Image parts by the index in `final` of the tool message whose output item held them."""
    held: dict[int, list[JSON]] = {}
    for j, origin in enumerate(carrier.origins):
        if origin.expanded or origin.internal.get("role") != "tool":
            continue
        for item_index in origin.items:
            item = client_item(carrier, item_index)
            if isinstance(item, dict) and item.get("type") in responses_items.OUTPUT_KINDS:
                held[j] = _images(item.get("output"), "input_image", responses_items.part_of)
    return _by_message(final, carrier.origins, held)


def _by_message(
    final: Sequence[Message], origins: Sequence[Any], held: dict[int, list[JSON]]
) -> dict[int, list[JSON]]:
    """`held` (images by origin) by the index of the prepared tool message paired with each
    origin; no pairing at all when no result holds an image (the common case)."""
    if not any(held.values()):
        return {}
    found = match_origins(final, origins)
    return {
        index: held[j]
        for index, (message, j) in enumerate(zip(final, found, strict=True))
        if j is not None and message.get("role") == "tool" and held.get(j)
    }


def _images(content: Any, kind: str, part_of: Callable[[Any], JSON | None]) -> list[JSON]:
    """The parts for the blocks of type `kind` in a result's content (a list) that have one."""
    if not isinstance(content, list):
        return []
    found = (part_of(b) for b in content if isinstance(b, dict) and b.get("type") == kind)
    return [part for part in found if part is not None]
