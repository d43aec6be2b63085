"""A scripted agent for end-to-end tests: it keeps the full history the way a real client does,
sends it through the proxy with the official openai SDK, and checks every upstream request."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import openai
from aiohttp import web

from benchmarks.validity import problems
from proxy.server.appkeys import ENGINE, LIFECYCLE

Message = dict[str, Any]


def tool_call(call_id: str, name: str = "bash", **arguments: Any) -> dict[str, Any]:
    """A tool call as the fake upstream returns it (and the SDK hands back)."""
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


@dataclass
class Agent:
    """A client that resends its full, uncompacted history on every turn."""

    client: openai.AsyncOpenAI
    app: web.Application
    system: str | Message = "You are a careful coding agent."
    """The client's system prompt: its text, or a whole system message."""
    model: str = "gpt-4o"
    history: list[Message] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    @property
    def messages(self) -> list[Message]:
        system = self.system
        return [system if isinstance(system, dict) else {"role": "system", "content": system},
                *self.history]  # fmt: skip

    def add(self, *messages: Message) -> None:
        self.history.extend(messages)

    async def turn(self, **extra: Any) -> Message:
        """Send the history, append the assistant's answer, wait for the proxy's bookkeeping."""
        raw = await self.client.chat.completions.with_raw_response.create(
            model=self.model, messages=self.messages, **extra
        )
        self.headers.append(dict(raw.headers))
        answer = raw.parse().choices[0].message.model_dump(exclude_none=True)
        answer.pop("refusal", None)
        self.history.append(answer)
        await settled(self.app)
        return answer

    def header(self, name: str, request: int = -1) -> str:
        return self.headers[request][name.lower()]


async def settled(app: web.Application) -> None:
    """Wait until the proxy wrote back what the last request did (state, events)."""
    while tasks := list(app[LIFECYCLE].tasks):
        await asyncio.gather(*tasks)


async def background_compactions_done(app: web.Application) -> None:
    """Wait for the async-mode summaries the compactor has in flight."""
    tasks = list(app[ENGINE]._compactor._tasks)
    await asyncio.gather(*tasks)


def assert_all_valid(bodies: Iterable[dict[str, Any]]) -> None:
    for number, body in enumerate(bodies):
        assert problems(body) == [], f"upstream request {number} invalid"


def text_of(message: Message) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""
