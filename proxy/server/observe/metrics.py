"""Prometheus metrics: one `CollectorRegistry` per app, fed by an observer and a middleware.

`Metrics.on_request` reads a `Trace` after each chat request; the error boundary counts every HTTP
request (`proxy.server.middlewares`), also those that fail before a trace exists (401, 400, 413).
Labels are bounded sets only: the tenant (from the config), the route *pattern*, the status, a
stage name, a compaction outcome and reason. Never a session id, a key, a model name (client-chosen)
or content. `GET /metrics` renders the registry in the Prometheus text format.

Where one request's usage and stage counters land: `TenantSeries`, the series of one tenant that
`Metrics.on_request` adds to on every request (created at the tenant's first request, the token
series at its first request with usage), and `stage_totals`, a request's `Tally` summed into the
counter names those series are keyed by. Recording is plain arithmetic on the event loop
(`proxy.server.observe.series`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from aiohttp import web
from prometheus_client import CollectorRegistry

from proxy.compaction.job import CompactionOutcome
from proxy.cost.pricing import COST_KINDS, Cost
from proxy.engine.prepared import Tally
from proxy.server.observe.series import Counter, CounterSeries, Families, Histogram
from proxy.server.observe.trace import Bill, Trace
from proxy.usage import Usage

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
SUMMARIZER_REASONS = frozenset(
    {"no_summarizer", "render", "timeout", "summarizer", "empty_summary"}
)


class Metrics:
    """The proxy's metrics, exported through a registry of their own (no global registry: one per
    app) by one collector; recording is plain arithmetic on the event loop (`metric_series`)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        """Every family, declared in the order `GET /metrics` lists them."""
        self.registry = registry or CollectorRegistry()
        self._families = Families()
        self._add_request_series()
        self._add_context_series()
        count, t = self._counter, "tenant"  # the health of streams and of the store
        self.stream_errors = count("stream_interrupted", "Streams cut or left idle.", t)
        self.degraded_requests = count("store_degraded_requests", "Served without state.", t)
        self.store_degraded = self._families.gauge(
            "ctxproxy_store_degraded", "1 while the state store is unreachable."
        )
        self.registry.register(self._families)
        self._tenants: dict[str, TenantSeries] = {}

    def _add_request_series(self) -> None:
        """What each request took (HTTP, upstream, proxy time), used and cost."""
        count, hist, t = self._counter, self._histogram, "tenant"
        self.requests = count("http_requests", "HTTP requests.", t, "route", "status")
        self.upstream_s = hist("upstream_seconds", "Upstream send to end of relay.", t, "stream")
        self.added_s = hist("proxy_added_seconds", "Pipeline, store, compaction.", t)
        self.first_byte_s = hist("stream_first_byte_seconds", "Streams: request to first byte.", t)
        self.tokens = count(
            "tokens", "Upstream-reported tokens (prompt, cached, cache_creation, completion).",
            t, "kind",
        )  # fmt: skip
        self.cost = count(
            "cost_usd", "USD the answers' usage cost at the price table's prices "
            "(input, cache_read, cache_write, output; prewarm: the cache prewarms).", t, "kind",
        )  # fmt: skip
        self.unpriced = count("unpriced_requests", "Answers of a model with no price.", t)
        self.saved = count(
            "cost_saved_usd", "Estimated USD saved against the client's own body going direct "
            "(requests where ctxproxy saved).", t,
        )  # fmt: skip
        self.extra = count(
            "cost_extra_usd", "Estimated USD above the client's own body going direct "
            "(requests where ctxproxy cost more).", t,
        )  # fmt: skip
        self.prewarms = count(
            "prewarms", "Cache prewarms after background compactions (done, failed, "
            "skipped).", t, "outcome",
        )  # fmt: skip
        self.misses = count(
            "cache_misses", "Requests whose cache reads fell against the session's previous "
            "request, by cause (client, prune, compaction, bootstrap, ttl, unknown).", t, "cause",
        )  # fmt: skip

    def _add_context_series(self) -> None:
        """What the proxy did to the context: stages, compactions, recall, the facts learned."""
        count, hist, t = self._counter, self._histogram, "tenant"
        self.chars = count(
            "tool_result_chars_removed", "Characters cut from tool results by stage "
            "(prune: chars_pruned, replays included; budgets: chars_saved).", t, "stage",
        )  # fmt: skip
        self.persisted_chars = count("persisted_chars", "Tool output characters persisted.", t)
        self.tool_results = count(
            "tool_results_cut", "Tool results cut (pruned, replayed, persisted, truncated).",
            t, "action",
        )  # fmt: skip
        self.compactions = count("compactions", "Compactions.", t, "outcome", "reason")
        self.compaction_s = hist(
            "compaction_request_prepare_seconds", "Before forwarding, for requests that tried to "
            "compact (the summarizer call dominates).", t, "outcome",
        )  # fmt: skip
        self.summarizer_failures = count("summarizer_failures", "Failed summaries.", t, "reason")
        self.repairs = count("validation_repairs", "Proxy-caused violations repaired.", t)
        self.client_violations = count("client_violations", "Client violations passed on.", t)
        self.skipped = count("stage_skipped", "Stages that raised and were skipped.", "stage")
        self.overflow_retries = count("overflow_retries", "Compact-and-retry on overflow.", t)
        self.recalls = count(
            "recalls", "Recall calls the proxy answered (kind ref, query or invalid; hit or miss).",
            t, "kind", "outcome",
        )  # fmt: skip
        self.recall_withheld = count(
            "recall_withheld", "Cut requests not offered the recall tool, by reason.", t, "reason"
        )
        self.memory_writes = count(
            "memory_writes", "Facts asked of compactions: written, duplicate, none, malformed, "
            "no_answer, failed, timeout.", t, "outcome",
        )  # fmt: skip

    def _counter(self, name: str, doc: str, *labels: str) -> Counter:
        return self._families.counter("ctxproxy_" + name, doc, *labels)

    def _histogram(self, name: str, doc: str, *labels: str) -> Histogram:
        return self._families.histogram("ctxproxy_" + name, doc, *labels, bounds=LATENCY_BUCKETS)

    def count_memory_write(self, tenant: str, outcome: str) -> None:
        """One compaction's facts (`proxy.compaction.writeback`), background ones included."""
        self.memory_writes.labels(tenant, outcome).value += 1

    def count_prewarm(self, tenant: str, outcome: str, cost: Cost | None) -> None:
        """One prewarm (`proxy.server.prewarm`), its cost as `kind="prewarm"` when priced."""
        self.prewarms.labels(tenant, outcome).value += 1
        if cost is not None:
            self.cost.labels(tenant, "prewarm").value += cost.total

    def set_store_degraded(self, degraded: bool) -> None:
        """The store health gauge: 1 while the store is unreachable."""
        self.store_degraded.value = 1.0 if degraded else 0.0

    async def on_request(self, trace: Trace) -> None:
        """Update every metric from one request's trace; zero amounts are not added, but every
        series a request touches is created (so it is exported, at 0, from then on)."""
        tenant, relayed, stream = trace.tenant, trace.relayed, trace.stream
        per_tenant = self._tenants.get(tenant) or self._add_tenant(tenant)
        self.upstream_s.labels(tenant, "true" if stream else "false").observe(trace.upstream_s)
        per_tenant.added_s.observe(trace.prepare_s)
        if stream and relayed.first_byte_s is not None:
            self.first_byte_s.labels(tenant).observe(relayed.first_byte_s)
        if stream and relayed.error:
            self.stream_errors.labels(tenant).value += 1
        if relayed.usage is not None:
            per_tenant.add_tokens(relayed.usage)
        if trace.bill is not None:
            self._bill(tenant, trace.bill)
        if trace.miss is not None:
            self.misses.labels(tenant, trace.miss).value += 1
        self._stages(per_tenant, trace.prepared.tally)
        if trace.prepared.compaction is not None:
            self._compaction(trace, trace.prepared.compaction)
        if trace.retried_overflow:
            self.overflow_retries.labels(tenant).value += 1
        if trace.recall is not None or trace.prepared.recall.reason:
            self._recall(trace)
        if trace.store_degraded:
            self.degraded_requests.labels(tenant).value += 1
        self.set_store_degraded(trace.store_degraded)

    def _bill(self, tenant: str, bill: Bill) -> None:
        if bill.cost is None:
            self.unpriced.labels(tenant).value += 1
            return
        for kind in COST_KINDS:
            self.cost.labels(tenant, kind).value += getattr(bill.cost, kind)
        if bill.saved is not None:  # a counter never goes down: a loss is counted apart
            (self.saved if bill.saved >= 0 else self.extra).labels(tenant).value += abs(bill.saved)

    def _add_tenant(self, tenant: str) -> TenantSeries:
        series = self._tenants[tenant] = TenantSeries(self, tenant)
        return series

    def _stages(self, per_tenant: TenantSeries, tally: Tally) -> None:
        counters = per_tenant.stage_counters
        for name, amount in stage_totals(tally).items():
            if amount > 0:  # a counter never goes down (prometheus_client raised on one)
                counters[name].value += amount
        for stage in tally.skipped:
            self.skipped.labels(stage).value += 1

    def _recall(self, trace: Trace) -> None:
        tenant, tally = trace.tenant, trace.recall
        if tally is None:
            self.recall_withheld.labels(tenant, trace.prepared.recall.reason).value += 1
            return
        for (kind, outcome), calls in tally.counts.items():
            self.recalls.labels(tenant, kind, outcome).value += calls

    def _compaction(self, trace: Trace, outcome: CompactionOutcome) -> None:
        self.count_compaction(trace.tenant, outcome)
        self.compaction_s.labels(trace.tenant, outcome.status).observe(trace.prepare_s)

    def count_compaction(self, tenant: str, outcome: CompactionOutcome) -> None:
        """One compaction by outcome and reason (and a failed summary by why); a client's own
        (the Responses API's) is counted here directly, having no request trace."""
        status, reason = outcome.status, outcome.reason
        self.compactions.labels(tenant, status, reason).value += 1
        if status == "failed" and reason in SUMMARIZER_REASONS:
            self.summarizer_failures.labels(tenant, reason).value += 1


METRICS = web.AppKey("metrics", Metrics)


TOKEN_KINDS = ("prompt", "cached", "cache_creation", "completion")
CUT_ACTIONS = ("pruned", "replayed", "persisted", "truncated")
SUMMED = frozenset({"chars_pruned", *CUT_ACTIONS})
"""Counters summed over every stage's report (as `Tally.chars_pruned` is)."""
OWN_COUNTERS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "budgets": SUMMED | {"chars_saved"},
        "validate": SUMMED | {"repairs", "client_violations"},
    }
)
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
