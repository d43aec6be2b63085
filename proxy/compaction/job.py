"""What one compaction is given (`CompactionJob`), the history it yields (`compacted_history`),
and what it ends in (`CompactionOutcome`).

Index mapping. The plan is computed on the *working* history (after the stored compaction was
applied, budgets and pruning), but a stored compaction covers a prefix of the *client's* history.
Budgets and pruning edit tool contents, never the number or order of messages, so when a stored
compaction `applied` (covering `c` client messages with a replacement of `r` messages) was used,
`working == replacement + client[c:]` message by message, and `working[:split]` stands for
`client[:c + split - r]`. Without one, `working[i]` is `client[i]`. A split inside the replacement
(`split <= r`) would only re-summarize the summary: nothing to do.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from proxy.compaction.plan import (
    CompactionPlan,
    preserved_tool_content,
    splice_summary,
    summary_frame,
)
from proxy.compaction.policy import CompactSettings
from proxy.exact_json import copy_json
from proxy.memory.ledger import MemorySettings
from proxy.types import JSON, Message, StoredCompaction

Status = Literal["done", "skipped", "failed"]


@dataclass(frozen=True, slots=True)
class CompactionOutcome:
    """`done`: `messages` is the compacted working history and `compaction` was stored; it
    saved `saved_chars` of the request (JSON, may be negative) by summarizing `folded_chars` that
    no earlier summary held (`proxy.compaction.plan.folded_chars`).
    `skipped` / `failed` (with a `reason`, never content): `messages` is the working history.
    `memory`: what became of the facts the summarizer was asked for (`proxy.compaction.writeback`;
    "" when none were asked for), `facts_added` how many were new. `usage`: the summarizer
    call's, in the chat-completions shape, when it answered with one."""

    status: Status
    reason: str
    messages: tuple[Message, ...]
    compaction: StoredCompaction | None = None
    saved_chars: int = 0
    folded_chars: int = 0
    memory: str = ""
    facts_added: int = 0
    usage: JSON | None = None


@dataclass(frozen=True, slots=True)
class Sending:
    """How the session's requests go upstream beyond what the job's body holds, for the prewarm
    (`proxy.compaction.prewarm`). `same_key`: whether `CompactionJob.api_key` is their
    credential (not with an OAuth bearer on `/v1/messages`: only the request holds it);
    `thinking`: whether they ask the model to think in a key the internal body does not hold
    (a Messages body's `thinking`, carried by the route). To an Anthropic upstream from
    `/v1/messages`: `messages`, the client's Messages body as sent (the prewarm converts and
    renders it as the route does, thinking blocks and signatures kept), with its `anthropic-*`
    `headers` and its `query`."""

    same_key: bool = True
    thinking: bool = False
    messages: JSON | None = None
    headers: tuple[tuple[str, str], ...] = ()
    query: str = ""


@dataclass(frozen=True, slots=True)
class CompactionJob:
    """Everything one compaction needs.

    `client_history` / `client_system`: the client's messages as sent (history = after the
    leading system messages); `working`: the history after the stored compaction `applied`,
    budgets and pruning; `plan`: where `working` is cut (None: nothing to summarize);
    `prefix_body`: the body the upstream would be sent for `working[:plan.split]` (system
    content, tools, cache layout), which the summary request reuses so a provider cache serves
    it, or None with `use_transcript` (the plain-transcript prompt, for upstreams without prompt
    caching); `upstream` names the tenant's upstream, used when `settings.summarizer_upstream`
    is unset; `efficiency` is how well the session's last compaction compressed
    (`proxy.compaction.policy.compaction_efficiency`); `forced` (the upstream said the context
    is too long) compacts even when little can be saved. With `memory`, the summarizer is also
    asked for durable facts, which are kept unless `known_facts` (the memory index the model
    already has, as lines) holds them. `client_body`: the client's body without `messages`
    (model, tools, every other key), for the request that warms the provider cache after a
    background compaction (`proxy.compaction.prewarm`), and `sending`, what else that request
    must match.
    """

    tenant: str
    session: str
    client_history: tuple[Message, ...]
    client_system: tuple[Message, ...]
    working: tuple[Message, ...]
    plan: CompactionPlan | None
    prefix_body: JSON | None
    model: str
    api_key: str | None
    applied: StoredCompaction | None = None
    upstream: str | None = None
    use_transcript: bool = False
    settings: CompactSettings = CompactSettings()  # noqa: RUF009 (frozen: one shared default)
    efficiency: float = 1.0
    forced: bool = False
    memory: MemorySettings | None = None
    known_facts: tuple[str, ...] = ()
    client_body: JSON | None = None
    sending: Sending = Sending()

    def detached(self) -> CompactionJob:
        """A deep copy of the messages and the prefix body, for a task that outlives the
        request."""
        return replace(
            self,
            client_history=tuple(copy_json(list(self.client_history))),
            client_system=tuple(copy_json(list(self.client_system))),
            working=tuple(copy_json(list(self.working))),
            prefix_body=copy_json(self.prefix_body),
            client_body=copy_json(self.client_body),
            sending=replace(self.sending, messages=copy_json(self.sending.messages)),
        )


def client_covers(
    split: int, *, applied: StoredCompaction | None, working_len: int, client_len: int
) -> int | None:
    """How many client messages `working[:split]` stands for (see the module docstring); None
    when the split falls inside the applied replacement or the two lists do not line up."""
    replaced = len(applied.replacement) if applied else 0
    covered = applied.covers if applied else 0
    if split <= replaced or working_len - replaced != client_len - covered:
        return None
    return covered + split - replaced


def compacted_history(
    job: CompactionJob, plan: CompactionPlan, covers: int, summary: str
) -> list[Message]:
    """The first user message (`keep_first_user`), the summary (with recall on, its last line
    naming the client messages it stands for), preserved tool content (taken from the client's
    unpruned messages), kept part."""
    settings = job.settings
    if job.applied is not None:
        source = [*job.applied.replacement, *job.client_history[job.applied.covers : covers]]
    else:
        source = list(job.client_history[:covers])
    preserved = preserved_tool_content(source, settings=settings)
    first, line = summary_frame(job.client_history, covers, settings=settings)
    return splice_summary(
        job.working, plan, summary, preserved=preserved, first_user=first, last_line=line
    )


def compaction_fields(outcome: CompactionOutcome) -> dict[str, str | int | float]:
    """What a done compaction leaves in its session's state for the next one to weigh
    (`proxy.compaction.policy.last_compaction_efficiency` reads them back)."""
    return {
        "compaction_saved_chars": outcome.saved_chars,
        "compaction_folded_chars": outcome.folded_chars,
    }
