"""Tiny builders of chat-completions messages, drafts and turns for tests."""

from __future__ import annotations

import json
from typing import Any

from proxy.pipeline import draft_from_body
from proxy.types import Draft, Message, SessionState, Turn, WorkspaceView


def system(text: str) -> Message:
    return {"role": "system", "content": text}


def user(text: str) -> Message:
    return {"role": "user", "content": text}


def assistant(text: str | None = None, *calls: Message) -> Message:
    message: Message = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = list(calls)
    return message


def call(call_id: str, name: str = "bash", arguments: dict[str, Any] | None = None) -> Message:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments or {})},
    }


def tool(call_id: str, content: Any) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def exchange(call_id: str, content: Any, *, name: str = "bash") -> list[Message]:
    """An assistant turn with one tool call followed by its result."""
    return [assistant(None, call(call_id, name)), tool(call_id, content)]


def draft(messages: list[Message], **body: Any) -> Draft:
    return draft_from_body({"model": "gpt-4o", "messages": messages, **body})


def turn(
    *,
    state: SessionState | None = None,
    workspace: WorkspaceView | None = None,
    now: float = 1_000_000.0,
    **kw: Any,
) -> Turn:
    return Turn(
        tenant=kw.pop("tenant", "default"),
        session=kw.pop("session", "s1"),
        model=kw.pop("model", "gpt-4o"),
        now=now,
        state=state or SessionState(),
        workspace=workspace or WorkspaceView(),
        **kw,
    )
