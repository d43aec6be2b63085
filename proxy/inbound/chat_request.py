"""The prepared internal body → the request for an OpenAI-compatible upstream (pure).

The internal body already is a chat-completions request; a few things are done for the upstream:
- `cache_control` markers are removed (on messages, parts, tool calls, tools and the body),
  unless `keep_markers` (an upstream with `cache_style = "anthropic"`, a gateway passing them
  to Claude, takes them);
- a content that is only plain text parts is sent as one string, its parts joined by newlines:
  some OpenAI-compatible servers take a list of parts for user messages only;
- with `max_output_tokens`, a larger `max_completion_tokens` is lowered to it (a Messages client
  may ask for more than the model can write: Claude Code asks for 32,000);
- with `images` (the images of the client's tool results, `proxy.inbound.result_images`), they
  go in a `user` message after the tool messages, a note in each tool message
  (`proxy.translate.tool_images`; a chat `tool` message holds text only), without markers.
Everything else goes as it is. What the internal body never holds never reaches a chat upstream,
and is counted nowhere: `thinking` and `redacted_thinking` blocks and Responses `reasoning` items
(the other provider's signed or encrypted data, which no chat model can read), server-tool
blocks. `estimate_input_tokens` is the count a `count_tokens` request gets when the upstream
cannot count (characters of the messages and tools / 4).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from proxy.inbound.messages_blocks import MARKER, without_marker
from proxy.translate.tool_images import move_tool_images
from proxy.types import JSON, Message

CHARS_PER_TOKEN = 4


def chat_request(
    chat_body: JSON,
    *,
    keep_markers: bool = False,
    max_output_tokens: int | None = None,
    images: Mapping[int, Sequence[JSON]] | None = None,
) -> JSON:
    """The upstream request for `chat_body` (see the module docstring); input not mutated.
    `images`: image parts by the index of the tool message they came with."""
    out = dict(chat_body)
    asked = out.get("max_completion_tokens")
    if max_output_tokens is not None and type(asked) is int and asked > max_output_tokens:
        out["max_completion_tokens"] = max_output_tokens
    if not keep_markers:
        out.pop(MARKER, None)
    if isinstance(out.get("messages"), list):
        out["messages"] = [_message(m, keep_markers) for m in out["messages"]]
        if images:
            plain = {i: [without_marker(part) for part in found] for i, found in images.items()}
            out["messages"] = move_tool_images(out["messages"], plain)
    if isinstance(out.get("tools"), list) and not keep_markers:
        out["tools"] = [without_marker(tool) for tool in out["tools"]]
    return out


def _message(message: Message, keep_markers: bool) -> Message:
    out = dict(message)
    if not keep_markers:
        out.pop(MARKER, None)
    content = out.get("content")
    if isinstance(content, list):
        parts = content if keep_markers else [without_marker(part) for part in content]
        out["content"] = _joined(parts)
    if isinstance(out.get("tool_calls"), list) and not keep_markers:
        out["tool_calls"] = [without_marker(call) for call in out["tool_calls"]]
    return out


def _joined(parts: list[Any]) -> Any:
    """One string for plain text parts (nothing but `type` and `text`); else the parts."""
    texts: list[str] = []
    for part in parts:
        if not (isinstance(part, dict) and part.keys() == {"type", "text"}):
            return parts
        if part["type"] != "text" or not isinstance(part["text"], str):
            return parts
        texts.append(part["text"])
    return "\n".join(texts) if texts else parts


def estimate_input_tokens(chat_body: JSON) -> int:
    """Input tokens of `chat_body`, estimated: JSON characters of messages and tools / 4."""
    counted = {key: chat_body[key] for key in ("messages", "tools") if key in chat_body}
    return len(orjson.dumps(counted)) // CHARS_PER_TOKEN
