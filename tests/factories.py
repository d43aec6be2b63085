"""Tiny builders of chat-completions messages, drafts and turns for tests."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from proxy.compaction.job import CompactionJob, CompactionOutcome
from proxy.compaction.plan import plan_compaction
from proxy.compaction.policy import CompactSettings
from proxy.engine.pipeline import draft_from_body
from proxy.engine.prepared import Prepared, tally
from proxy.history import history_salt, longest_matching
from proxy.server.observe.trace import Trace
from proxy.server.relay import Relayed
from proxy.types import JSON, Draft, Message, SessionState, StageReport, Turn, WorkspaceView
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


def matched_turn(client: Draft, state: SessionState, **kw: Any) -> Turn:
    """A turn of `state` whose `applied` is the stored compaction `client` begins with, as the
    engine matches it before the stages run."""
    tenant = kw.pop("tenant", "default")
    salt = history_salt(tenant, client.system.client)
    applied = longest_matching(client.messages, state.compactions, salt=salt)
    return turn(state=state, tenant=tenant, applied=applied, **kw)


def compaction_job(
    client: Draft,
    *,
    settings: CompactSettings,
    working: Sequence[Message] | None = None,
    prefix_body_for: Callable[[Sequence[Message]], JSON] | None = None,
    **kw: Any,
) -> CompactionJob:
    """The job the engine would build for `client` (its working history `working`, the client's
    own by default): the plan by `settings`, the prefix body by `prefix_body_for`."""
    history = tuple(working if working is not None else client.messages)
    plan = plan_compaction(
        history, keep_recent=settings.keep_recent, keep_first_user=settings.keep_first_user
    )
    use_transcript = kw.pop("use_transcript", False)
    render = plan is not None and prefix_body_for is not None and not use_transcript
    return CompactionJob(
        tenant=kw.pop("tenant", "default"),
        session=kw.pop("session", "s1"),
        client_history=client.messages,
        client_system=client.system.client,
        working=history,
        plan=plan,
        prefix_body=prefix_body_for(history[: plan.split]) if render and plan else None,
        model=kw.pop("model", "gpt-4o"),
        api_key=kw.pop("api_key", None),
        use_transcript=use_transcript,
        settings=settings,
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
        stream=False,
        status=200,
        prepared=prepared,
        relayed=Relayed(usage=usage, completed=True),
        messages_in=1,
        prepare_s=prepare_s,
        upstream_s=upstream_s,
        bytes_out=bytes_out,
    )
