"""The real stages over an inbound edge's internal body, as the engine runs them but with no I/O
(a tenant's stack, a turn, no store), and a stored summary made as the engine would store it.
Shared by the Messages and Responses edges' through-the-stages tests."""

from __future__ import annotations

from typing import Any

from proxy.compaction.plan import plan_compaction
from proxy.compaction.stored import make_compaction
from proxy.engine.pipeline import build_stack, draft_from_body, run_stages
from proxy.history import history_salt, longest_matching
from proxy.settings import TenantSettings, UpstreamSettings
from proxy.types import Message, SessionState, StageReport, StoredCompaction, Turn, WorkspaceView

JSON = dict[str, Any]
WORKSPACE = WorkspaceView(
    files={"soul": ("You are Ada, a careful engineer.",), "user": ("The user is Sam.",)}
)


def run_pipeline(
    internal: JSON,
    *,
    tenant: TenantSettings,
    upstream: UpstreamSettings,
    state: SessionState | None = None,
    workspace: WorkspaceView | None = None,
) -> tuple[JSON, list[StageReport]]:
    """The prepared internal body and every stage's report; asserts that no stage failed."""
    stack = build_stack(tenant, upstream)
    client = draft_from_body(internal)
    state = state or SessionState()
    salt = history_salt(tenant.name, client.system.client)  # matched as the engine matches it
    turn = Turn(
        tenant=tenant.name,
        session="s1",
        model=str(internal.get("model")),
        now=1_000.0,
        state=state,
        workspace=workspace or WorkspaceView(),
        cache_style=upstream.cache_style,
        applied=longest_matching(client.messages, state.compactions, salt=salt),
    )
    draft, reports = run_stages(stack.before, client, turn)
    prepared, after = stack.finish(draft, turn, client_messages=internal["messages"])
    reports += after
    assert not [r.stage for r in reports if r.skipped]  # no stage failed (they fail open)
    return prepared, reports


def stored_summary(internal: JSON, summary: Message, *, keep_recent: int) -> StoredCompaction:
    """`summary` standing for all but the newest `keep_recent` messages of `internal`, stored
    for the default tenant."""
    client = draft_from_body(internal)
    plan = plan_compaction(client.messages, keep_recent=keep_recent)
    assert plan is not None
    salt = history_salt("default", client.system.client)
    return make_compaction(client.messages, plan, [summary], salt=salt)
