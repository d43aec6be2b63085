"""A SIMULATED upstream for `ctxproxy demo`: a scripted stand-in for an LLM, no network, no key.

It speaks the OpenAI chat-completions wire format (non-streaming) and answers from a script of
steps: `Say(text)` (``{name}`` becomes the user's name, read from the system prompt the proxy
assembled, so the greeting shows bootstrap at work; ``{memory}`` the newest line of its memory
index) or `Call(tool, arguments)`. A request whose last user message asks for a `<summary>` is
the proxy's summarizer call and is answered with a summary of the transcript it was sent, and,
when asked for one, a `<memory>` block of what the user said "By the way: …". Usage is simulated
too: `prompt_tokens` is the characters of the received messages / 4, and `cached_tokens` the part
of them that repeats the previous request's prefix (as a provider's prompt cache would serve it).
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from proxy.usage import estimated_tokens

NAME = re.compile(r"Call (?:her|him|them) (\w+)|Name: (\w+)")
BY_THE_WAY = re.compile(r"By the way: ([^\n]+?\.)(?:\s|$)")
MEMORY_INDEX = re.compile(r"<memory_index>\n(.*?)\n</memory_index>", re.DOTALL)
CACHE_MIN_CHARS = 4096  # providers cache prefixes of 1,024+ tokens


@dataclass(frozen=True, slots=True)
class Say:
    text: str


@dataclass(frozen=True, slots=True)
class Call:
    tool: str
    arguments: dict[str, Any]


@dataclass
class SimulatedUpstream:
    """The scripted model; `received` keeps every chat body (summarizer calls excluded)."""

    script: deque[Say | Call] = field(default_factory=deque)
    received: list[dict[str, Any]] = field(default_factory=list)
    summaries: int = 0
    _previous: bytes = b""

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 << 20)
        app.router.add_post("/v1/chat/completions", self.chat_completions)
        return app

    async def chat_completions(self, request: web.Request) -> web.Response:
        body: dict[str, Any] = orjson.loads(await request.read())
        messages = body.get("messages") or []
        if is_summary_call(messages):
            self.summaries += 1
            message: dict[str, Any] = {"role": "assistant", "content": summarize(messages)}
        else:
            self.received.append(body)
            message = self._next(messages)
        return web.json_response(completion(body, message, self._usage(messages)))

    def _next(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        step = self.script.popleft() if self.script else Say("(the simulation has no more lines)")
        if isinstance(step, Say):
            text = step.text.format(name=user_name(messages), memory=newest_memory(messages))
            return {"role": "assistant", "content": text}
        call_id = f"call_{len(self.received)}"
        function = {"name": step.tool, "arguments": orjson.dumps(step.arguments).decode()}
        call = {"id": call_id, "type": "function", "function": function}
        return {"role": "assistant", "content": None, "tool_calls": [call]}

    def _usage(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        sent = orjson.dumps(messages)
        shared = common_prefix(sent, self._previous)
        self._previous = sent
        cached = estimated_tokens(shared) if shared >= CACHE_MIN_CHARS else 0
        prompt = estimated_tokens(len(sent))
        return {
            "prompt_tokens": prompt,
            "completion_tokens": 40,
            "total_tokens": prompt + 40,
            "prompt_tokens_details": {"cached_tokens": cached},
        }


def is_summary_call(messages: list[dict[str, Any]]) -> bool:
    last = messages[-1] if messages else {}
    content = last.get("content")
    return last.get("role") == "user" and isinstance(content, str) and "<summary>" in content


def user_name(messages: list[dict[str, Any]]) -> str:
    """The name the bootstrapped user profile gives, or `there` without one."""
    found = _in_system(messages, NAME)
    return (found.group(1) or found.group(2)) if found else "there"


def newest_memory(messages: list[dict[str, Any]]) -> str:
    """The last line of the system prompt's memory index, without its date (`nothing yet`)."""
    found = _in_system(messages, MEMORY_INDEX)
    if not found:
        return "nothing yet"
    text = re.sub(r"^- \d{4}-\d{2}-\d{2}: ", "", found.group(1).splitlines()[-1])
    return text[:1].lower() + text[1:]


def _in_system(messages: list[dict[str, Any]], pattern: re.Pattern[str]) -> re.Match[str] | None:
    """The first match of `pattern` in a system message's text, in order."""
    for message in messages:
        content = message.get("content")
        if message.get("role") == "system" and isinstance(content, str):
            found = pattern.search(content)
            if found:
                return found
    return None


def summarize(messages: list[dict[str, Any]]) -> str:
    """A summary of what the transcript shows: who, which files were read, what was asked;
    and, when the instruction asks for a `<memory>` block, what the user said by the way."""
    files = [
        orjson.loads(call["function"]["arguments"]).get("path", "?")
        for m in messages
        for call in m.get("tool_calls") or ()
    ]
    asks = [
        m["content"].splitlines()[0][:90]
        for m in messages[:-1]
        if m.get("role") == "user" and isinstance(m.get("content"), str)
    ]
    lines = [
        f"- User: {user_name(messages)}.",
        f"- Files read so far: {', '.join(files) or 'none'}.",
        *(f"- Asked: {ask}" for ask in asks[-4:]),
        "- Open task: prepare the weekly sync summary.",
    ]
    summary = "<analysis>Keep names, files and open tasks.</analysis>\n<summary>\n" + (
        "\n".join(lines) + "\n</summary>"
    )
    if "<memory>" not in str(messages[-1].get("content")):
        return summary
    said = [
        found.group(1)
        for m in messages[:-1]
        if m.get("role") == "user" and isinstance(m.get("content"), str)
        for found in BY_THE_WAY.finditer(m["content"])
    ]
    facts = "".join(f"- {text[:1].upper()}{text[1:]}\n" for text in said)
    return f"{summary}\n<memory>\n{facts}</memory>"


def common_prefix(a: bytes, b: bytes) -> int:
    size = min(len(a), len(b))
    index = 0
    while index < size and a[index] == b[index]:
        index += 1
    return index


def completion(body: dict[str, Any], message: dict[str, Any], usage: dict[str, Any]) -> Any:
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return {
        "id": "chatcmpl-simulated",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "simulated"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }
