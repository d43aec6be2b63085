"""The context pipeline: a tenant's ordered list of pure stages, built once at start-up from its
settings (`build_stack`, STYLE rule 4), and the runner.

A request flows: `draft_from_body` → stages before compaction (stored summary, tool-result
budgets, pruning) → compaction (async, `proxy.compaction`, driven by the engine) → stages after
(bootstrap) → `render` (cache layout, to an OpenAI-format body) → `validate` (pre-flight). A stage
that raises is skipped and reported (fail-open): the user's request never fails because a context
stage did. Each tenant's `Stack` also holds its memos (`proxy.engine.memo`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

from proxy.compaction import stored as compact
from proxy.content import MarkerPath, system_lead
from proxy.engine.memo import LineageMemo, MatchMemo, SystemDigests
from proxy.settings import TenantSettings, UpstreamSettings
from proxy.stages import bootstrap, budgets, cache, prune
from proxy.stages.error_pattern import ErrorMemo
from proxy.stages.validate import validate_request
from proxy.types import JSON, Draft, Message, StageReport, SystemPrompt, Turn

log = logging.getLogger(__name__)

Stage = Callable[[Draft, Turn], tuple[Draft, StageReport]]
"""A pure transform of the draft; `functools.partial(module.run, settings=...)` in practice."""


def draft_from_body(body: JSON) -> Draft:
    """Split the client's leading system/developer messages from the history. Copies nothing."""
    messages: list[Message] = body["messages"]
    lead = system_lead(messages)
    rest = dict(body)
    del rest["messages"]
    return Draft(rest, SystemPrompt("", tuple(messages[:lead])), tuple(messages[lead:]))


def run_stages(
    stages: Sequence[tuple[str, Stage]], draft: Draft, turn: Turn
) -> tuple[Draft, list[StageReport]]:
    """Run each stage in order; a stage that raises is skipped and reported, never fatal."""
    reports: list[StageReport] = []
    for name, stage in stages:
        try:
            draft, report = stage(draft, turn)
        except Exception as exc:  # fail-open by contract (DESIGN §Standards)
            log.warning("stage %s skipped: %s", name, type(exc).__name__)
            report = StageReport(stage=name, skipped=type(exc).__name__)
        reports.append(report)
    return draft, reports


@dataclass(frozen=True, slots=True)
class Stack:
    tenant: TenantSettings
    before: tuple[tuple[str, Stage], ...]
    after: tuple[tuple[str, Stage], ...]
    before_degraded: tuple[tuple[str, Stage], ...] = ()
    """`before` for a request served while the store is down: budgets persist nothing."""
    lineages: LineageMemo = field(default_factory=LineageMemo, compare=False)
    """The tenant's conversations' lineages (see `proxy.history.lineage`), remembered."""
    matches: MatchMemo = field(default_factory=MatchMemo, compare=False)
    """Which stored compaction a history starts with, remembered (`ContextEngine.prepare` asks)."""

    def render(self, draft: Draft, turn: Turn) -> tuple[JSON, StageReport]:
        """The outgoing body of a finished draft (cache layout)."""
        return cache.render_request(draft, turn, settings=self.tenant.cache)

    def finish(
        self,
        draft: Draft,
        turn: Turn,
        *,
        client_messages: Sequence[Message],
        client_marked: bool = True,
    ) -> tuple[JSON, list[StageReport]]:
        """After-compaction stages, render and validation against what the client sent
        (`client_messages`); fail-open at every step. `client_marked=False`: no object of
        `draft` has a `cache_control` key (the client sent none, no stored summary was used)."""
        draft, reports = run_stages(self.after, draft, turn)
        markers = None
        try:
            body, report, markers = cache.render_with_markers(
                draft, turn, settings=self.tenant.cache, client_marked=client_marked
            )
        except Exception as exc:  # fail-open: send the plain assembly instead
            body, report = plain_body(draft), StageReport("cache", skipped=type(exc).__name__)
        reports.append(report)
        body, check = validate(
            body, client_messages=client_messages, style=turn.cache_style, markers=markers
        )
        reports.append(check)
        return body, reports

    def prefix_body(self, draft: Draft, turn: Turn, messages: Sequence[Message]) -> JSON:
        """What the upstream would be sent for `messages`: for a summarizer reusing the cache."""
        prefix = Draft(body=draft.body, system=draft.system, messages=tuple(messages))
        prefix, _ = run_stages(self.after, prefix, turn)
        body, _ = self.render(prefix, turn)
        return body


NEVER = 1 << 62  # a size no tool result reaches
MEMO_BUDGET = 96_000_000
"""Bytes all tenants' memos may hold together (an app divides it among its tenants)."""
TENANT_MEMO_BYTES = 24_000_000
"""A tenant's share when it is the only one (or when the caller does not say)."""


def memo_bytes_per_tenant(tenants: int) -> int:
    """A tenant's share of `MEMO_BUDGET`: at most `TENANT_MEMO_BYTES`, at least 1 MB."""
    return max(1_000_000, min(TENANT_MEMO_BYTES, MEMO_BUDGET // max(1, tenants)))


def build_stack(
    tenant: TenantSettings, upstream: UpstreamSettings, *, memo_bytes: int = TENANT_MEMO_BYTES
) -> Stack:
    """The tenant's stages; the upstream decides whether a `prompt_cache_key` is sent.

    `memo_bytes` bounds what the tenant's memos hold: two thirds for stored-compaction matching,
    a sixth each for lineages and error answers (characters of tool results)."""
    if upstream.send_prompt_cache_key and not tenant.cache.send_prompt_cache_key:
        tenant = replace(tenant, cache=replace(tenant.cache, send_prompt_cache_key=True))
    tenant = with_recall_markers(tenant)
    before: list[tuple[str, Stage]] = []
    systems = SystemDigests()  # one request asks the session id, lineage and match memos
    matches = MatchMemo(max_bytes=memo_bytes * 2 // 3, systems=systems)
    if tenant.compact.enabled:
        before.append(("compact", partial(compact.run, settings=tenant.compact)))
    degraded = list(before)
    if tenant.budgets.enabled:
        memo = ErrorMemo(max_chars=memo_bytes // 6)  # by pattern and text: both variants share it
        before.append(("budgets", partial(budgets.run, settings=tenant.budgets, memo=memo)))
        no_persist = replace(tenant.budgets, persist_over_chars=NEVER, per_turn_max_chars=NEVER)
        degraded.append(("budgets", partial(budgets.run, settings=no_persist, memo=memo)))
    if tenant.prune.enabled:
        before.append(("prune", partial(prune.run, settings=tenant.prune)))
        degraded.append(before[-1])
    after: list[tuple[str, Stage]] = []
    if tenant.bootstrap.enabled:
        assembly = bootstrap.AssemblyCache()
        after.append(
            ("bootstrap", partial(bootstrap.run, settings=tenant.bootstrap, cache=assembly))
        )
    return Stack(
        tenant,
        tuple(before),
        tuple(after),
        before_degraded=tuple(degraded),
        lineages=LineageMemo(max_bytes=memo_bytes // 6, systems=systems),
        matches=matches,
    )


def with_recall_markers(tenant: TenantSettings) -> TenantSettings:
    """With recall on, the stages that cut name the recall tool in their markers (and bootstrap
    says so in its notice); with it off, `tenant` as it is."""
    if not tenant.recall.enabled:
        return tenant
    name = tenant.recall.tool_name
    return replace(
        tenant,
        budgets=replace(tenant.budgets, recall_tool=name),
        prune=replace(tenant.prune, recall_tool=name),
        bootstrap=replace(tenant.bootstrap, recall_tool=name),
        compact=replace(tenant.compact, recall_tool=name),
    )


def validate(
    body: JSON,
    *,
    client_messages: Sequence[Message],
    style: str,
    markers: list[MarkerPath] | None = None,
) -> tuple[JSON, StageReport]:
    try:
        return validate_request(
            body,
            client_messages=client_messages,
            allow_cache_control=style == "anthropic",
            markers=markers,
        )
    except Exception as exc:  # fail-open
        return body, StageReport("validate", skipped=type(exc).__name__)


def plain_body(draft: Draft) -> JSON:
    system = [*draft.system.client]
    return {**draft.body, "messages": [*system, *draft.messages]}
