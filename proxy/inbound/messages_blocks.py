"""One Anthropic content block ⇄ one chat-completions content part or tool call (pure).

Client block → internal part (`part_of`), for the blocks a chat model can read:

    text                         → text part (`cache_control` kept; citations stay behind)
    image, base64 or url source  → image_url part (base64 as a `data:` URL)
    document, base64 source      → file part with a `data:` URL; text source → text part
    tool_use                     → tool call (`tool_call_of`), input as compact JSON arguments
    anything else                → None: the block is carried, not converted (thinking,
                                   redacted_thinking, server-tool blocks, search results,
                                   file-id sources, types this module does not know)

Internal part → fresh block (`block_of`, `tool_use_of`) for parts a stage made or changed:
`proxy.translate.anthropic_blocks` does it, and a marker on the part stays on the block.
`without_marker` is the one comparison the render makes: equal but for `cache_control`.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from proxy.translate.anthropic_blocks import part_block, tool_use_block
from proxy.types import JSON

MARKER = "cache_control"


def part_of(block: Any) -> JSON | None:
    """The chat content part standing for `block`, or None when the block is carried only."""
    if not isinstance(block, dict):
        return None
    kind = block.get("type")
    part: JSON | None = None
    if kind == "text" and isinstance(block.get("text"), str):
        part = {"type": "text", "text": block["text"]}
    elif kind == "image":
        url = _source_url(block.get("source"))
        part = {"type": "image_url", "image_url": {"url": url}} if url else None
    elif kind == "document":
        part = _document_part(block)
    if part is not None and block.get(MARKER) is not None:
        part[MARKER] = block[MARKER]
    return part


def _source_url(source: Any) -> str | None:
    if not isinstance(source, dict):
        return None
    if source.get("type") == "base64" and isinstance(source.get("data"), str):
        return f"data:{source.get('media_type', '')};base64,{source['data']}"
    if source.get("type") == "url" and isinstance(source.get("url"), str):
        return str(source["url"])
    return None


def _document_part(block: JSON) -> JSON | None:
    source = block.get("source")
    if not isinstance(source, dict):
        return None
    if source.get("type") == "text" and isinstance(source.get("data"), str):
        return {"type": "text", "text": source["data"]}
    if source.get("type") == "base64" and isinstance(source.get("data"), str):
        url = f"data:{source.get('media_type', '')};base64,{source['data']}"
        name = block.get("title") if isinstance(block.get("title"), str) else "document"
        return {"type": "file", "file": {"file_data": url, "filename": name}}
    return None


def tool_call_of(block: JSON) -> JSON:
    """A `tool_use` block → a chat tool call; its `cache_control` rides on the call."""
    arguments = compact_json(block.get("input", {}))
    call: JSON = {
        "id": block.get("id", ""),
        "type": "function",
        "function": {"name": block.get("name", ""), "arguments": arguments},
    }
    if block.get(MARKER) is not None:
        call[MARKER] = block[MARKER]
    return call


def compact_json(value: Any) -> str:
    """`value` as compact JSON text, non-ASCII as is. orjson where it can (an integer beyond 64
    bits or a lone surrogate it refuses: the standard library then)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def block_of(part: Any) -> JSON | None:
    """A fresh block for an internal part (None for an empty text part: the API rejects it)."""
    return part_block(part)


def tool_use_of(call: JSON) -> JSON:
    """A fresh `tool_use` block for an internal tool call, its marker kept."""
    block = tool_use_block(call)
    if isinstance(call.get(MARKER), dict):
        block[MARKER] = call[MARKER]
    return block


def without_marker(value: Any) -> Any:
    """`value` without its own top-level `cache_control` key (a dict); anything else as is."""
    if isinstance(value, dict) and MARKER in value:
        return {k: v for k, v in value.items() if k != MARKER}
    return value
