"""Stored compactions: made from a finished summary, applied to the requests that follow (DESIGN §3
Compaction, §4 Sessions). Pure.

A stored compaction replaces the first `covers` messages of the client's own history (before
budgets and pruning: its key is the chained hash of exactly those messages as the client sent
them, `proxy.history`). `stored_compaction` makes one from a compaction's cut; `run` is the stage
"apply stored compaction": the engine matches the session's stored compactions against the
client's history once per request (`Turn.applied`), and the stage puts the replacement in place.
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from proxy.compaction.plan import CompactionPlan
from proxy.compaction.policy import CompactSettings
from proxy.history import history_salt, prefix_hash
from proxy.types import Draft, Message, StageReport, StoredCompaction, Turn


def make_compaction(
    history: Sequence[Message],
    plan: CompactionPlan,
    replacement: Sequence[Message],
    *,
    salt: str,
    created_at: float = 0.0,
    archive_id: str = "",
) -> StoredCompaction:
    """A stored compaction replacing the client's `history[:plan.split]` by `replacement`.

    `plan.split` must be in client-history coordinates (see `proxy.compaction.job`)."""
    return StoredCompaction(
        prefix_hash=prefix_hash(history, plan.split, salt=salt),
        covers=plan.split,
        replacement=tuple(replacement),
        created_at=created_at,
        archive_id=archive_id,
        saved_chars=json_chars(history[: plan.split]) - json_chars(replacement),
    )


def stored_compaction(
    client_history: Sequence[Message],
    client_system: Sequence[Message],
    *,
    tenant: str,
    covers: int,
    replacement: Sequence[Message],
    created_at: float,
    archive_id: str,
) -> StoredCompaction:
    """The compaction to store: `replacement` stands for the client's `history[:covers]`; the
    salt is the conversation's (its tenant and the client's system messages)."""
    return make_compaction(
        client_history,
        CompactionPlan(split=covers),
        replacement,
        salt=history_salt(tenant, client_system),
        created_at=created_at,
        archive_id=archive_id,
    )


def json_chars(messages: Sequence[Message]) -> int:
    """The size of `messages` as JSON (bytes: characters for ASCII text)."""
    return len(orjson.dumps(list(messages)))


def run(draft: Draft, turn: Turn, *, settings: CompactSettings) -> tuple[Draft, StageReport]:
    """Apply stored compaction: replace the prefix of the client's history that `turn.applied`
    covers by its summary; the draft is returned unchanged when disabled or when none applies."""
    before = len(draft.messages)
    found = turn.applied if settings.enabled else None
    if found is not None:
        messages = (*found.replacement, *draft.messages[found.covers :])
        draft = Draft(body=draft.body, system=draft.system, messages=messages)
    after, applied = len(draft.messages), int(found is not None)
    counters = {"messages_before": before, "messages_after": after, "applied": applied}
    if found is not None:
        counters["chars_removed"] = found.saved_chars
    return draft, StageReport(stage="compact", counters=counters)
