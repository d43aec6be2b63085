"""Request bodies for the overhead benchmark: small (~2 KB), agentic (~200 KB), large (~2 MB).

The agentic and large bodies are cut from a real Claude Code session in ../shared/traces/ so that
they carry what agents really send: tool calls each followed by their results. Tool results are
repeated to reach the target size when the cut is smaller than that.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from benchmarks.common import TRACES

AGENTIC_TRACE = "claudecode-spotter__fa812bfe-seg1.json"
MODEL = "gpt-4o-mini"
SIZES = ("small", "agentic", "large")


def load_trace(name: str) -> dict[str, Any]:
    return json.loads((TRACES / name).read_text(encoding="utf-8"))


def closed_prefix(messages: list[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    """The shortest prefix of at least `count` messages whose tool calls all have results."""
    open_calls: set[str] = set()
    for index, message in enumerate(messages):
        for call in message.get("tool_calls") or []:
            open_calls.add(call["id"])
        open_calls.discard(message.get("tool_call_id", ""))
        if index + 1 >= count and not open_calls and message["role"] != "assistant":
            return messages[: index + 1]
    return messages


def grow_tool_results(messages: list[dict[str, Any]], target: int) -> list[dict[str, Any]]:
    """Repeat each string tool result until the serialised messages reach `target` bytes."""
    size = len(orjson.dumps(messages))
    tool_chars = sum(len(m["content"]) for m in messages
                     if m["role"] == "tool" and isinstance(m.get("content"), str))
    if size >= target or not tool_chars:
        return messages
    factor = 1 + (target - size) / tool_chars
    grown = []
    for message in messages:
        content = message.get("content")
        if message["role"] == "tool" and isinstance(content, str):
            wanted = int(len(content) * factor)
            content = (content * (wanted // max(len(content), 1) + 1))[:wanted]
            message = {**message, "content": content}
        grown.append(message)
    return grown


def body_for(size: str, *, stream: bool) -> dict[str, Any]:
    system = {"role": "system", "content": "You are a careful coding agent. Use the tools."}
    if size == "small":
        text = "Please review this function and suggest a fix. " * 40
        messages = [system, {"role": "user", "content": text[:1900]}]
    else:
        trace = load_trace(AGENTIC_TRACE)["messages"]
        count, target = (40, 200_000) if size == "agentic" else (120, 2_000_000)
        messages = [system, *grow_tool_results(closed_prefix(trace, count), target)]
    body: dict[str, Any] = {"model": MODEL, "messages": messages, "max_tokens": 256}
    if stream:
        body["stream"] = True
    return body


def encoded_bodies() -> dict[tuple[str, bool], bytes]:
    return {(size, stream): orjson.dumps(body_for(size, stream=stream))
            for size in SIZES for stream in (False, True)}
