"""Events: one entry per request and one per compaction in the store's `events` stream (DESIGN §5).

Fields are flat `str → str` (a Redis stream entry): ids, counts, timings, outcomes and what each
stage did — never message content, a key or a header. `request_event` and `compaction_event` are
pure; `EventEmitter` is the observer that writes them, swallowing store failures (an event is
never worth failing or slowing a request).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import orjson

from proxy.compaction.job import CompactionJob, CompactionOutcome
from proxy.cost.pricing import Cost
from proxy.errors import StoreUnavailable
from proxy.ports import EventStore
from proxy.server.observe.stage_tokens import stage_tokens
from proxy.server.observe.trace import Bill, Trace
from proxy.usage import Usage, usage_from

log = logging.getLogger(__name__)


def request_event(trace: Trace, *, now: float) -> dict[str, str]:
    """The `kind=request` entry: tokens (reported, and estimated before and after each stage
    that changed the prompt's size), what they cost, per-stage counters, compaction outcome,
    latency."""
    prepared, relayed = trace.prepared, trace.relayed
    compaction = prepared.compaction
    prepare_s, upstream_s = trace.prepare_s, trace.upstream_s
    event = {
        "kind": "request",
        "ts": f"{now:.3f}",
        "tenant": trace.tenant,
        "session": trace.session,
        "model": trace.model,
        "stream": "1" if trace.stream else "0",
        "status": str(trace.status),
        "outcome": _outcome(trace),
        "messages_in": str(trace.messages_in),
        "messages_out": str(len(prepared.body.get("messages") or ())),
        "bytes_out": str(trace.bytes_out),
        "threshold_tokens": str(prepared.threshold),
        "stages": stage_summary(trace),
        "compaction": compaction.status if compaction else "",
        "latency_ms": f"{(prepare_s + upstream_s) * 1000:.1f}",  # as `_ms`, inline
        "prepare_ms": f"{prepare_s * 1000:.1f}",
        "upstream_ms": f"{upstream_s * 1000:.1f}",
        "store": "degraded" if trace.store_degraded else "ok",
    }
    if relayed.first_byte_s is not None:
        event["first_byte_ms"] = _ms(relayed.first_byte_s)
    usage = relayed.usage
    if usage is not None:
        event["prompt_tokens"] = str(usage.prompt_tokens)
        event["cached_tokens"] = str(usage.cached_tokens)
        event["cache_creation_tokens"] = str(usage.cache_creation_tokens)
        event["completion_tokens"] = str(usage.completion_tokens)
        if usage.provider_miss:  # the provider's own reason, beside ours (`cache_miss`)
            event["cache_miss_provider"] = usage.provider_miss
    if trace.bill is not None:
        event.update(bill_fields(trace.bill))
    if trace.miss is not None:
        event["cache_miss"] = trace.miss
    if trace.retried_overflow:
        event["retried_overflow"] = "1"
    event.update(recall_fields(trace))
    tokens = stage_tokens(trace)
    if tokens:
        event["tokens"] = orjson.dumps(tokens).decode()
    return event


def recall_fields(trace: Trace) -> dict[str, str]:
    """`recalls` (calls the proxy answered) and `recall_rounds` (upstream rounds) when the request
    offered the recall tool; `recall_withheld` (why not) when a cut request was not offered it."""
    offer, tally = trace.prepared.recall, trace.recall
    if tally is not None:
        return {"recalls": str(tally.recalls), "recall_rounds": str(tally.rounds)}
    return {"recall_withheld": offer.reason} if offer.reason else {}


def bill_fields(bill: Bill) -> dict[str, str]:
    """`cost_usd` (or `unpriced`) and the estimated `cost_saved_usd`, in USD to 8 decimals."""
    if bill.cost is None:
        return {"unpriced": "1"}
    fields = {"cost_usd": f"{bill.cost.total:.8f}"}
    if bill.saved is not None:
        fields["cost_saved_usd"] = f"{bill.saved:.8f}"
    return fields


def compaction_event(trace: Trace, *, now: float) -> dict[str, str] | None:
    """The `kind=compaction` entry, or None when the request did not try to compact."""
    outcome = trace.prepared.compaction
    if outcome is None:
        return None
    event = {
        "kind": "compaction",
        "ts": f"{now:.3f}",
        "tenant": trace.tenant,
        "session": trace.session,
        "model": trace.model,
        "outcome": outcome.status,
        "reason": outcome.reason,
        "messages_in": str(trace.messages_in),
        "messages_out": str(len(trace.prepared.body.get("messages") or [])),
        "prepare_ms": _ms(trace.prepare_s),
    }
    return _with_compaction(event, outcome)


def _with_compaction(event: dict[str, str], outcome: CompactionOutcome) -> dict[str, str]:
    """What the compaction covered, the summarizer call's tokens (when it reported them), and
    the facts it learned (when it was asked for some)."""
    if outcome.compaction is not None:
        event["covers"] = str(outcome.compaction.covers)
    usage = usage_from({"usage": outcome.usage})
    if usage is not None:
        event["summary_prompt_tokens"] = str(usage.prompt_tokens)
        event["summary_cached_tokens"] = str(usage.cached_tokens)
        event["summary_completion_tokens"] = str(usage.completion_tokens)
    if outcome.memory:
        event["memory"] = outcome.memory
        event["facts_added"] = str(outcome.facts_added)
    return event


def stage_summary(trace: Trace) -> str:
    """Compact JSON `{stage: {counter: n}}` with zero counters left out; a skipped stage shows
    `{"skipped": "<exception type>"}`."""
    tally = trace.prepared.tally
    if not tally.skipped:
        return orjson.dumps(tally.stages).decode()
    summary = {
        stage: {**counters, "skipped": tally.skipped[stage]} if stage in tally.skipped else counters
        for stage, counters in tally.stages.items()
    }
    return orjson.dumps(summary).decode()


def _outcome(trace: Trace) -> str:
    if trace.status >= 400:
        return "upstream_error"
    return "ok" if trace.relayed.completed else "interrupted"


def _ms(seconds: float) -> str:
    """Milliseconds to one decimal: the same text as `str(round(ms, 1))` below 1e16 ms."""
    return f"{seconds * 1000:.1f}"


class EventEmitter:
    """Builds a chat request's events, which go with its session record (`entries`: one store
    call), and writes a background compaction's to `store_of()` (looked up late: the store is
    app-scoped)."""

    def __init__(
        self, store_of: Callable[[], EventStore], *, clock: Callable[[], float] = time.time
    ) -> None:
        self._store_of = store_of
        self._clock = clock

    async def on_background(self, job: CompactionJob, outcome: CompactionOutcome) -> None:
        """Emit the event of a background compaction (the engine's `on_background` hook)."""
        event = background_compaction_event(job.tenant, job.session, outcome, now=self._clock())
        await self._emit(event)

    async def on_prewarm(
        self,
        tenant: str,
        session: str,
        outcome: str,
        reason: str,
        usage: Usage | None,
        cost: Cost | None,
    ) -> None:
        """Emit the `kind=prewarm` entry of a cache prewarm (`proxy.server.prewarm`): its
        outcome and reason, the tokens it read and wrote, and its cost when priced."""
        event = {"kind": "prewarm", "ts": f"{self._clock():.3f}", "tenant": tenant,
                 "session": session, "outcome": outcome, "reason": reason}  # fmt: skip
        if usage is not None:
            event["cached_tokens"] = str(usage.cached_tokens)
            event["cache_creation_tokens"] = str(usage.cache_creation_tokens)
        if cost is not None:
            event["cost_usd"] = f"{cost.total:.8f}"
        await self._emit(event)

    async def on_client_compaction(
        self, tenant: str, session: str, outcome: CompactionOutcome, *, asked: str, model: str
    ) -> None:
        """Emit the event of a compaction a client asked for (`client_compaction_event`)."""
        event = client_compaction_event(tenant, session, outcome, asked=asked, model=model)
        await self._emit({**event, "ts": f"{self._clock():.3f}"})

    async def _emit(self, event: dict[str, str]) -> None:
        try:
            await self._store_of().emit_event(event)
        except StoreUnavailable:
            log.debug("event dropped: store unavailable")
        except Exception as exc:
            log.warning("event dropped: %s", type(exc).__name__)

    def entries(self, trace: Trace) -> list[dict[str, str]]:
        """The request's events in order: its compaction's, if it tried one, then its own (the
        request event closes the request)."""
        now = self._clock()
        compaction = compaction_event(trace, now=now)
        request = request_event(trace, now=now)
        return [request] if compaction is None else [compaction, request]


def background_compaction_event(
    tenant: str, session: str, outcome: CompactionOutcome, *, now: float
) -> dict[str, str]:
    """The `kind=compaction` entry of a compaction that ran in the background (async mode)."""
    event = {
        "kind": "compaction",
        "ts": f"{now:.3f}",
        "tenant": tenant,
        "session": session,
        "outcome": outcome.status,
        "reason": outcome.reason,
        "background": "1",
        "messages_out": str(len(outcome.messages)),
    }
    return _with_compaction(event, outcome)


def client_compaction_event(
    tenant: str, session: str, outcome: CompactionOutcome, *, asked: str, model: str
) -> dict[str, str]:
    """The `kind=compaction` entry of a compaction a client asked for itself (the Responses
    API's): `client` is `compact` (`/v1/responses/compact`) or `trigger` (a request ending with
    a `compaction_trigger` item). No `ts`: the emitter stamps it."""
    event = {
        "kind": "compaction",
        "tenant": tenant,
        "session": session,
        "model": model,
        "outcome": outcome.status,
        "reason": outcome.reason,
        "client": asked,
        "messages_out": str(len(outcome.messages)),
    }
    return _with_compaction(event, outcome)
