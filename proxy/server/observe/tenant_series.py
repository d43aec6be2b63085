"""Where one request's usage and stage counters land: a tenant's series, and the sums they add.

`TenantSeries` holds the series of one tenant that `Metrics.on_request` adds to on every request,
created at the tenant's first request (the token series at its first request with usage);
`stage_totals` sums a request's `Tally` into the counter names `TenantSeries.stage_counters` is
keyed by. Recording is plain arithmetic on the event loop (`metric_series`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from proxy.engine.tally import Tally
from proxy.server.observe.series import CounterSeries
from proxy.usage import Usage

if TYPE_CHECKING:
    from proxy.server.observe.metrics import Metrics

TOKEN_KINDS = ("prompt", "cached", "cache_creation", "completion")
CUT_ACTIONS = ("pruned", "replayed", "persisted", "truncated")
SUMMED = frozenset({"chars_pruned", *CUT_ACTIONS})
"""Counters summed over every stage's report (as `Tally.chars_pruned` is)."""
OWN_COUNTERS: Mapping[str, frozenset[str]] = {
    "budgets": SUMMED | {"chars_saved"},
    "validate": SUMMED | {"repairs", "client_violations"},
}
"""Counters read from one stage's report only, by stage."""


class TenantSeries:
    """A tenant's series that every request touches, created at its first request; the token
    series at its first request with usage."""

    __slots__ = ("_tenant", "_token_kinds", "_tokens", "added_s", "stage_counters")

    def __init__(self, metrics: Metrics, tenant: str) -> None:
        self._tenant = tenant
        self._tokens = metrics.tokens
        self._token_kinds: tuple[CounterSeries, ...] = ()
        self.added_s = metrics.added_s.labels(tenant)
        self.stage_counters: dict[str, CounterSeries] = {
            "chars_pruned": metrics.chars.labels(tenant, "prune"),
            "chars_saved": metrics.chars.labels(tenant, "budgets"),
            "persisted_chars": metrics.persisted_chars.labels(tenant),
            **{action: metrics.tool_results.labels(tenant, action) for action in CUT_ACTIONS},
            "repairs": metrics.repairs.labels(tenant),
            "client_violations": metrics.client_violations.labels(tenant),
        }

    def add_tokens(self, usage: Usage) -> None:
        if not self._token_kinds:
            self._token_kinds = tuple(self._tokens.labels(self._tenant, k) for k in TOKEN_KINDS)
        prompt, cached, creation, completion = self._token_kinds
        # Usage counts are never negative (`usage._int`); zero ones are not added.
        if usage.prompt_tokens:
            prompt.value += usage.prompt_tokens
        if usage.cached_tokens:
            cached.value += usage.cached_tokens
        if usage.cache_creation_tokens:
            creation.value += usage.cache_creation_tokens
        if usage.completion_tokens:
            completion.value += usage.completion_tokens


def stage_totals(tally: Tally) -> dict[str, int]:
    """The non-zero stage counters the metrics add up: `SUMMED` over every stage,
    `OWN_COUNTERS` from their stage only, and `persisted_chars` (the length of every persisted
    output)."""
    totals: dict[str, int] = {}
    for stage, counters in tally.stages.items():
        if counters:
            wanted = OWN_COUNTERS.get(stage, SUMMED)
            for name, value in counters.items():
                if name in wanted:
                    totals[name] = totals.get(name, 0) + value
    if tally.outputs:
        persisted = sum(map(len, tally.outputs.values()))
        if persisted:
            totals["persisted_chars"] = persisted
    return totals
