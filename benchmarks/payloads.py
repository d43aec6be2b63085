"""Request bodies for the overhead benchmark: small (~2 KB), agentic (~200 KB), large (~2 MB)
and coding (~180 KB).

The agentic and large bodies are cut from a real Claude Code session in ../shared/traces/ so that
they carry what agents really send: tool calls each followed by their results. Tool results are
repeated to reach the target size when the cut is smaller than that.

The coding body is what a coding agent such as Claude Code sends on a turn well into a task: a
28 KB system prompt of many sections (`data/coding_system.md`), 25 tool definitions with their
JSON schemas (`data/coding_tools.json`, 36 KB), and the first 51 messages of another real Claude
Code session, unchanged but for the non-standard `reasoning_content` (dropped: this body is plain
chat-completions). The traces do not record their agent's system prompt or tool schemas, so those
two files were written for this benchmark in the shape of Claude Code's, naming the tools the
session calls; the system prompt's project section matches the session's project.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson

from benchmarks.common import TRACES

AGENTIC_TRACE = "claudecode-spotter__fa812bfe-seg1.json"
CODING_TRACE = "claudecode-spotter__258c7280-seg1.json"
DATA = Path(__file__).resolve().parent / "data"
MODEL = "gpt-4o-mini"
SIZES = ("small", "agentic", "large", "coding")


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
    tool_chars = sum(
        len(m["content"])
        for m in messages
        if m["role"] == "tool" and isinstance(m.get("content"), str)
    )
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
    """The request body of `size` (one of `SIZES`); the same bytes every run once encoded."""
    if size == "coding":
        body = coding_body()
    else:
        body = {"model": MODEL, "messages": trace_messages(size), "max_tokens": 256}
    if stream:
        body["stream"] = True
    return body


def trace_messages(size: str) -> list[dict[str, Any]]:
    system = {"role": "system", "content": "You are a careful coding agent. Use the tools."}
    if size == "small":
        text = "Please review this function and suggest a fix. " * 40
        return [system, {"role": "user", "content": text[:1900]}]
    if size not in ("agentic", "large"):
        raise ValueError(f"unknown payload size {size!r} (one of {', '.join(SIZES)})")
    trace = load_trace(AGENTIC_TRACE)["messages"]
    count, target = (40, 200_000) if size == "agentic" else (120, 2_000_000)
    return [system, *grow_tool_results(closed_prefix(trace, count), target)]


def coding_body() -> dict[str, Any]:
    """A coding agent's request: long system prompt, 25 tools, 51 messages of a real session."""
    system = (DATA / "coding_system.md").read_text(encoding="utf-8")
    tools = json.loads((DATA / "coding_tools.json").read_text(encoding="utf-8"))
    history = closed_prefix(load_trace(CODING_TRACE)["messages"], 50)
    messages = [
        {"role": "system", "content": system},
        *({k: v for k, v in m.items() if k != "reasoning_content"} for m in history),
    ]
    return {"model": MODEL, "messages": messages, "tools": tools, "max_tokens": 256}


def encoded_bodies() -> dict[tuple[str, bool], bytes]:
    return {
        (size, stream): orjson.dumps(body_for(size, stream=stream))
        for size in SIZES
        for stream in (False, True)
    }
