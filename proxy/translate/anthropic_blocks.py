"""Chat-completions message content → Anthropic content blocks (pure; for the request translator).

    text part / string          → `text` block (empty strings are dropped: the API rejects them)
    image_url `data:` URL       → `image` block with a base64 source; http(s) URL → url source
    file part with a data: URL  → `document` block with a base64 source (PDF and the like)
    refusal part (assistant)    → `text` block
    any other part              → passed through unchanged (it may already be an Anthropic block)
    tool_calls                  → `tool_use` blocks; arguments parsed from their JSON string
    tool message                → one `tool_result` block

`cache_control` on a part stays on its block; on a message it goes to the message's last block.
"""

from __future__ import annotations

import json
from typing import Any

from proxy.exact_json import copy_json, json_text
from proxy.types import JSON, Message

RAW_ARGUMENTS_KEY = "raw_arguments"
"""Tool-call arguments that are not a JSON object are sent as `{RAW_ARGUMENTS_KEY: text}`."""


def text_block(text: str, cache_control: Any = None) -> JSON:
    block: JSON = {"type": "text", "text": text}
    if cache_control:
        block["cache_control"] = copy_json(cache_control)
    return block


def content_blocks(content: Any) -> list[JSON]:
    """Blocks for a user or tool message's `content` (a string, a list of parts, or None)."""
    if content is None:
        return []
    if isinstance(content, str):
        return [text_block(content)] if content else []
    if isinstance(content, list):
        blocks = (part_block(part) for part in content)
        return [block for block in blocks if block is not None]
    return [text_block(json_text(content))]


def part_block(part: Any) -> JSON | None:
    """One content part as a block; None for an empty text part."""
    if isinstance(part, str):
        return text_block(part) if part else None
    if not isinstance(part, dict):
        return text_block(json_text(part))
    kind = part.get("type")
    cache_control = part.get("cache_control")
    block: JSON | None
    if kind in ("text", "refusal"):
        text = part.get(kind) or ""
        return text_block(text, cache_control) if text else None
    if kind == "image_url":
        block = _media_block("image", _url_of(part.get("image_url")))
    elif kind == "file" and isinstance(part.get("file"), dict):
        block = _media_block("document", str(part["file"].get("file_data") or ""))
    else:
        return copy_json(part)
    if cache_control:
        block["cache_control"] = copy_json(cache_control)
    return block


def _url_of(image_url: Any) -> str:
    if isinstance(image_url, dict):
        return str(image_url.get("url") or "")
    return str(image_url or "")


def _media_block(kind: str, url: str) -> JSON:
    """An image/document block: `data:` URLs become base64 sources, anything else a url source."""
    if url.startswith("data:"):
        header, _, data = url[len("data:") :].partition(",")
        media_type = header.split(";")[0]
        source: JSON = {"type": "base64", "media_type": media_type, "data": data}
    else:
        source = {"type": "url", "url": url}
    return {"type": kind, "source": source}


def tool_use_block(call: JSON) -> JSON:
    """An OpenAI tool call → a `tool_use` block with its arguments parsed to an object."""
    function = call.get("function") or {}
    return {
        "type": "tool_use",
        "id": call.get("id", ""),
        "name": function.get("name", ""),
        "input": parse_arguments(function.get("arguments")),
    }


def parse_arguments(arguments: Any) -> JSON:
    """The arguments JSON string as an object; `{}` when empty; wrapped when not an object."""
    if isinstance(arguments, dict):
        return copy_json(arguments)
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return {}
    try:
        parsed = json.loads(arguments)
    except (TypeError, ValueError):
        return {RAW_ARGUMENTS_KEY: str(arguments)}
    return parsed if isinstance(parsed, dict) else {RAW_ARGUMENTS_KEY: str(arguments)}


def assistant_blocks(message: Message) -> list[JSON]:
    """Text blocks of an assistant message followed by one `tool_use` block per tool call."""
    blocks = content_blocks(message.get("content"))
    blocks += [tool_use_block(call) for call in message.get("tool_calls") or []]
    return with_message_cache_control(blocks, message.get("cache_control"))


def tool_result_block(message: Message) -> JSON:
    """A `tool` message → a `tool_result` block (content omitted when empty)."""
    block: JSON = {"type": "tool_result", "tool_use_id": message.get("tool_call_id", "")}
    content = message.get("content")
    if isinstance(content, str):
        if content:
            block["content"] = content
    elif content is not None:
        parts = content_blocks(content)
        if parts:
            block["content"] = parts
    if message.get("cache_control"):
        block["cache_control"] = copy_json(message["cache_control"])
    return block


def with_message_cache_control(blocks: list[JSON], cache_control: Any) -> list[JSON]:
    """Put a message-level `cache_control` on its last block (a new block; inputs untouched)."""
    if not cache_control or not blocks:
        return blocks
    last = {**blocks[-1], "cache_control": copy_json(cache_control)}
    return [*blocks[:-1], last]
