"""Prometheus metrics: one `CollectorRegistry` per app, fed by an observer and a middleware.

`Metrics.on_request` reads a `Trace` after each chat request; `count_requests` (outermost
middleware) counts every HTTP request, also those that fail before a trace exists (401, 400, 413).
Labels are bounded sets only: the tenant (from the config), the route *pattern*, the status, a
stage name, a compaction outcome and reason. Never a session id, a key, a model name (client-chosen)
or content. `GET /metrics` renders the registry in the Prometheus text format.
"""

from __future__ import annotations

from typing import Any, TypeVar

from aiohttp import web
from aiohttp.typedefs import Handler
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics import MetricWrapperBase

from proxy.engine import count
from proxy.errors import CtxProxyError
from proxy.server.appkeys import ENGINE, KEYRING
from proxy.server.observe import Trace

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
SUMMARIZER_REASONS = frozenset(
    {"no_summarizer", "render", "timeout", "summarizer", "empty_summary"}
)
_M = TypeVar("_M", bound=MetricWrapperBase)


class Metrics:
    """The proxy's metrics in a registry of their own (no global registry: one per app)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self._children: dict[tuple[Any, tuple[str, ...]], Any] = {}
        count, hist, t = self._counter, self._histogram, "tenant"
        self.requests = count("http_requests", "HTTP requests.", t, "route", "status")
        self.upstream_s = hist("upstream_seconds", "Upstream send to end of relay.", t, "stream")
        self.added_s = hist("proxy_added_seconds", "Pipeline, store, compaction.", t)
        self.first_byte_s = hist("stream_first_byte_seconds", "Streams: request to first byte.", t)
        self.tokens = count(
            "tokens", "Upstream-reported tokens (prompt, cached, cache_creation, completion).",
            t, "kind",
        )  # fmt: skip
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
        self.stream_errors = count("stream_interrupted", "Streams cut or left idle.", t)
        self.degraded_requests = count("store_degraded_requests", "Served without state.", t)
        self.store_degraded = Gauge(
            "ctxproxy_store_degraded", "1 while the state store is unreachable.",
            registry=self.registry,
        )  # fmt: skip

    def _counter(self, name: str, doc: str, *labels: str) -> Counter:
        return Counter("ctxproxy_" + name, doc, labels, registry=self.registry)

    def _histogram(self, name: str, doc: str, *labels: str) -> Histogram:
        return Histogram(
            "ctxproxy_" + name, doc, labels, buckets=LATENCY_BUCKETS, registry=self.registry
        )

    def labelled(self, metric: _M, *labels: str) -> _M:
        """`metric.labels(*labels)`, looked up once: label sets are bounded (module doc)."""
        key = (metric, labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    async def on_request(self, trace: Trace) -> None:
        """Update every metric from one request's trace."""
        tenant = trace.tenant
        self.labelled(self.upstream_s, tenant, str(trace.stream).lower()).observe(trace.upstream_s)
        self.labelled(self.added_s, tenant).observe(trace.prepare_s)
        relayed = trace.relayed
        if trace.stream and relayed.first_byte_s is not None:
            self.labelled(self.first_byte_s, tenant).observe(relayed.first_byte_s)
        if trace.stream and relayed.error:
            self.labelled(self.stream_errors, tenant).inc()
        if relayed.usage is not None:
            usage = relayed.usage
            for kind, value in (
                ("prompt", usage.prompt_tokens), ("cached", usage.cached_tokens),
                ("cache_creation", usage.cache_creation_tokens),
                ("completion", usage.completion_tokens),
            ):  # fmt: skip
                self.labelled(self.tokens, tenant, kind).inc(value)
        self._stages(trace)
        self._compaction(trace)
        if trace.retried_overflow:
            self.labelled(self.overflow_retries, tenant).inc()
        if trace.store_degraded:
            self.labelled(self.degraded_requests, tenant).inc()
        self.store_degraded.set(int(trace.store_degraded))

    def _stages(self, trace: Trace) -> None:
        tenant, reports = trace.tenant, trace.prepared.reports
        self.labelled(self.chars, tenant, "prune").inc(count(reports, "chars_pruned"))
        budgets = [r for r in reports if r.stage == "budgets"]
        saved = sum(r.counters.get("chars_saved", 0) for r in budgets)
        self.labelled(self.chars, tenant, "budgets").inc(saved)
        persisted = sum(len(text) for r in reports for text in r.outputs.values())
        self.labelled(self.persisted_chars, tenant).inc(persisted)
        for action in ("pruned", "replayed", "persisted", "truncated"):
            self.labelled(self.tool_results, tenant, action).inc(count(reports, action))
        validate = [r for r in reports if r.stage == "validate"]
        self.labelled(self.repairs, tenant).inc(sum(r.counters.get("repairs", 0) for r in validate))
        violations = sum(r.counters.get("client_violations", 0) for r in validate)
        self.labelled(self.client_violations, tenant).inc(violations)
        for report in reports:
            if report.skipped:
                self.labelled(self.skipped, report.stage).inc()

    def _compaction(self, trace: Trace) -> None:
        outcome = trace.prepared.compaction
        if outcome is None:
            return
        self.labelled(self.compactions, trace.tenant, outcome.status, outcome.reason).inc()
        self.labelled(self.compaction_s, trace.tenant, outcome.status).observe(trace.prepare_s)
        if outcome.status == "failed" and outcome.reason in SUMMARIZER_REASONS:
            self.labelled(self.summarizer_failures, trace.tenant, outcome.reason).inc()


METRICS = web.AppKey("metrics", Metrics)


@web.middleware
async def count_requests(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Count every request by tenant, route pattern and final status (place it outermost)."""
    status = 500
    try:
        response = await handler(request)
        status = response.status
        return response
    except web.HTTPException as exc:
        status = exc.status
        raise
    except BaseException:
        status = 499  # the client went away (or the handler failed outside the error boundary)
        raise
    finally:
        route = request.match_info.route.resource
        pattern = route.canonical if route is not None else "unmatched"
        metrics = request.app[METRICS]
        metrics.labelled(metrics.requests, _tenant_of(request), pattern, str(status)).inc()


def _tenant_of(request: web.Request) -> str:
    """The caller's tenant, or `-` when the request carries no valid key."""
    try:
        return request.app[KEYRING].identify(request.headers.get("Authorization")).tenant or "-"
    except CtxProxyError:
        return "-"


async def metrics_endpoint(request: web.Request) -> web.Response:
    """`GET /metrics`: the app's registry; the store health gauge is refreshed on each scrape."""
    metrics = request.app[METRICS]
    engine = request.app.get(ENGINE)
    if engine is not None:
        metrics.store_degraded.set(0 if await engine.store.ping() else 1)
    body = generate_latest(metrics.registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
