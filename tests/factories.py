"""Tiny builders of chat-completions messages, drafts and turns for tests."""

from __future__ import annotations

import json
from typing import Any

from proxy.compaction.job import CompactionOutcome
from proxy.engine.pipeline import draft_from_body
from proxy.engine.prepared import Prepared
from proxy.engine.tally import tally
from proxy.server.observe.trace import Trace
from proxy.server.relay import Relayed
from proxy.types import Draft, Message, SessionState, StageReport, Turn, WorkspaceView
from proxy.usage import Usage


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


def make_trace(
    *reports: StageReport,
    tenant: str = "t",
    usage: Usage | None = None,
    prepare_s: float = 0.0,
    upstream_s: float = 0.0,
    bytes_out: int = 0,
    compaction: CompactionOutcome | None = None,
) -> Trace:
    """The trace of one answered, non-streamed request of session `s` whose stages reported
    `reports` (for the events, metrics and token estimates built from it)."""
    prepared = Prepared(
        turn=Turn(tenant, "s", "m", now=0.0),
        body={"messages": []},
        reports=reports,
        lineage="",
        threshold=0,
        covers=0,
        tally=tally(reports),
        compaction=compaction,
    )
    return Trace(
        tenant=tenant,
        session="s",
        model="m",
        stream=False,
        status=200,
        prepared=prepared,
        relayed=Relayed(usage=usage, completed=True),
        messages_in=1,
        prepare_s=prepare_s,
        upstream_s=upstream_s,
        store_degraded=False,
        bytes_out=bytes_out,
    )
