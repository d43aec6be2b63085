"""The `CompactionJob` a request hands the compactor: where its working history is cut, the body
the upstream would be sent for the part summarized (rendered here, so the compactor never calls
back into the pipeline), and the facts the request's model already knows. Pure: no I/O.
"""

from __future__ import annotations

from proxy.compaction.job import CompactionJob, Sending
from proxy.compaction.plan import CompactionPlan, plan_compaction
from proxy.compaction.policy import last_compaction_efficiency
from proxy.engine.offer import prefix_with_tool
from proxy.engine.pipeline import Stack
from proxy.types import JSON, Draft, Turn


def compaction_job(
    stack: Stack,
    draft: Draft,
    turn: Turn,
    api_key: str | None,
    *,
    forced: bool = False,
    whole: bool = False,
    sending: Sending | None = None,
) -> CompactionJob:
    """The `CompactionJob` for this request's working history (`prepare` builds it only when a
    compaction starts); `forced`: the upstream said the context is too long; `whole`: every
    message is summarized; `sending`: what the session's requests go with beyond the body
    (`CompactionJob.sending`). No prefix body when the upstream caches no prompt (the summary is
    asked over a plain transcript)."""
    settings = stack.tenant.compact
    if whole:
        plan: CompactionPlan | None = CompactionPlan(split=len(draft.messages))
    else:
        plan = plan_compaction(
            draft.messages,
            keep_recent=settings.keep_recent,
            keep_first_user=settings.keep_first_user,
        )
    use_transcript = turn.cache_style == "none"
    return CompactionJob(
        tenant=turn.tenant,
        session=turn.session,
        client_history=turn.client.messages,
        client_system=turn.client.system.client,
        working=draft.messages,
        plan=plan,
        prefix_body=(
            None if plan is None or use_transcript else summarized_prefix(stack, draft, turn, plan)
        ),
        model=turn.model,
        api_key=api_key,
        applied=turn.applied,
        upstream=stack.tenant.upstream,
        use_transcript=use_transcript,
        settings=settings,
        efficiency=last_compaction_efficiency(turn.state),
        forced=forced,
        memory=stack.tenant.memory if stack.tenant.memory.enabled else None,
        known_facts=known_facts(turn),
        client_body=dict(turn.client.body),
        sending=sending or Sending(),
    )


def summarized_prefix(stack: Stack, draft: Draft, turn: Turn, plan: CompactionPlan) -> JSON | None:
    """The body the upstream would be sent for the messages `plan` summarizes, with the recall
    tool when the session's requests carry it (so a provider cache serves the summary); None
    when it cannot be rendered (the compactor reports that: failed, `render`)."""
    try:
        prefix = stack.prefix_body(draft, turn, draft.messages[: plan.split])
        return prefix_with_tool(prefix, draft.body, settings=stack.tenant.recall, state=turn.state)
    except Exception:  # a render failure fails the compaction, never the request
        return None


def known_facts(turn: Turn) -> tuple[str, ...]:
    """The memory the request's model already has: the workspace's memory files (their lines)
    and the learned facts, which a compaction need not learn again."""
    view = turn.workspace
    texts = [*view.files.get("memory", ()), view.session_files.get("memory", "")]
    return (*(line for text in texts for line in text.splitlines()), *turn.state.memory)
