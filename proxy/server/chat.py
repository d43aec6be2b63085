"""`POST /v1/chat/completions`, top to bottom: parse, find the session, load the turn, prepare
and forward (compact and retry once when the upstream says the context is too long; answer the
model's recall calls and ask again, `proxy.server.recall_loop`), relay, and record in the
background.

The request's facts and flags (the client's draft, whether it marked anything for the cache,
whether the store was down) live on its `Turn`, which the engine builds once; the handler hands
that one object down. For a stream, a slow preparation is kept alive (`KeepAlive`); once that
has sent a 200, errors are told in band.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from aiohttp import web

from proxy.engine.engine import ContextEngine
from proxy.engine.pipeline import draft_from_body
from proxy.engine.prepared import Prepared
from proxy.errors import CtxProxyError
from proxy.identity import explicit_session_id
from proxy.ports import Upstream, UpstreamReply
from proxy.recall.answer import OutputReader
from proxy.recall.tool import RecallSettings
from proxy.server.appkeys import SCOPE, Services, tenant_caller_of
from proxy.server.body import read_chat_body, with_usage_requested
from proxy.server.keepalive import KeepAlive, kept_alive
from proxy.server.observe.trace import Trace, notify
from proxy.server.recall_dialects import ChatDialect, Dialect
from proxy.server.recall_loop import RecallLoop
from proxy.server.relay import Relayed, end_in_band, relay_body, upstream_error
from proxy.server.stream_relay import relay_stream
from proxy.types import JSON, Turn

log = logging.getLogger(__name__)

OVERFLOW_MARKERS = (b"context_length_exceeded", b"prompt is too long", b"maximum context length")


class Forwarded(NamedTuple):
    """What `forward` sent and got: the prepared request, the answer, whether it was a
    compact-and-retry after an overflow, the time spent before the first send, and the recall
    loop when the request offered the tool (its tally is final once the answer is relayed)."""

    prepared: Prepared
    reply: UpstreamReply
    retried_overflow: bool
    prepare_s: float
    recall: RecallLoop[Any] | None = None


async def chat_completions(request: web.Request) -> web.StreamResponse:
    started = time.monotonic()
    scope = request[SCOPE]
    services = scope.services
    caller = tenant_caller_of(request)  # an unknown key is refused before the body is read
    body, marked = await read_chat_body(request, known=services.known_tools)
    engine = services.engine
    client = draft_from_body(body)
    session = explicit_session_id(request.headers, body)
    if session is None:
        session = engine.derived_session_id(caller.tenant, client)
    scope.session = session
    turn = await engine.load_turn(caller.tenant, session, client, marked=marked)
    tenant = services.settings.tenants[caller.tenant]
    api_key = caller.token if tenant.forward_client_key else None
    keepalive = KeepAlive(request, {"X-Ctx-Session": session}) if body.get("stream") else None
    try:
        sent = await forward(
            engine,
            services.upstreams[caller.tenant],
            body,
            turn,
            headers=request.headers,
            api_key=api_key,
            keepalive=keepalive,
            retry_overflow=tenant.compact.enabled,
            started=started,
            recall=(tenant.recall, services.store),
        )
    except CtxProxyError as exc:
        early = keepalive.response if keepalive is not None else None
        if early is None:
            raise
        await end_in_band(early, exc.to_body())  # the client already has a 200
        return early
    reply = sent.reply
    early = keepalive.response if keepalive is not None else None
    headers = answer_headers(sent)
    response, relayed = await relay(request, reply, headers, body, early, started=started)
    scope.usage = relayed.usage
    trace = traced(sent, relayed, messages_in=len(body["messages"]), started=started)
    services.lifecycle.spawn(after(services, trace))
    return response


def traced(sent: Forwarded, relayed: Relayed, *, messages_in: int, started: float) -> Trace:
    """What the request did, for the observers."""
    reply = sent.reply
    return Trace(
        stream=reply.stream is not None,
        status=reply.status,
        prepared=sent.prepared,
        relayed=relayed,
        messages_in=messages_in,
        prepare_s=sent.prepare_s,
        upstream_s=time.monotonic() - started - sent.prepare_s,
        retried_overflow=sent.retried_overflow,
        bytes_out=reply.sent_bytes,
        recall=sent.recall.tally if sent.recall is not None else None,
    )


async def forward(
    engine: ContextEngine,
    upstream: Upstream,
    body: JSON,
    turn: Turn,
    *,
    headers: Mapping[str, str],
    api_key: str | None,
    keepalive: KeepAlive | None,
    retry_overflow: bool,
    started: float,
    recall: tuple[RecallSettings, OutputReader] | None = None,
    dialect: Callable[[Prepared], Dialect[Any]] | None = None,
) -> Forwarded:
    """Prepare `body` and send it; when the upstream says the context is too long (and
    compaction is on), compact and send again, once, transparently. When the request offers
    the recall tool, the reply is the recall loop's (`recall`: the tenant's settings and where
    persisted outputs are read; `dialect`: the rounds' wire form for the prepared request, chat
    completions through `upstream` when None)."""
    looping = recall is not None  # else the tool is never offered: nobody would answer it
    prepared = await _prepare(engine, body, turn, api_key, keepalive, False, looping)
    prepare_s = time.monotonic() - started
    reply = await _send(engine, upstream, prepared, headers, api_key)
    overflow = retry_overflow and _is_overflow(reply)
    if overflow:
        await reply.release()
        prepared = await _prepare(engine, body, turn, api_key, keepalive, True, looping)
        reply = await _send(engine, upstream, prepared, headers, api_key)
    if recall is None or not prepared.recall.offered:
        return Forwarded(prepared, reply, overflow, prepare_s)
    settings, reader = recall
    rounds = (
        dialect(prepared)
        if dialect is not None
        else ChatDialect(upstream, prepared.body, settings, headers, api_key)
    )
    loop = RecallLoop(
        dialect=rounds, body=body, prepared=prepared, settings=settings, reader=reader
    )
    return Forwarded(prepared, await loop.rounds(reply), overflow, prepare_s, loop)


async def _prepare(
    engine: ContextEngine,
    body: JSON,
    turn: Turn,
    api_key: str | None,
    keepalive: KeepAlive | None,
    force_compact: bool,
    recall: bool,
) -> Prepared:
    """The engine's preparation, kept alive for a stream while it runs."""
    work = engine.prepare(
        body, turn=turn, api_key=api_key, force_compact=force_compact, recall=recall
    )
    return await kept_alive(keepalive, work)


async def _send(
    engine: ContextEngine,
    upstream: Upstream,
    prepared: Prepared,
    headers: Mapping[str, str],
    api_key: str | None,
) -> UpstreamReply:
    """Store the outputs budgets persisted, then send (a stream asks for its usage)."""
    await engine.persist_outputs(prepared)
    outgoing, _ = with_usage_requested(prepared.body)
    previous = str(prepared.turn.state.fields.get("answer_id") or "") or None
    return await upstream.send_chat(
        outgoing, headers=headers, api_key=api_key, previous_id=previous
    )


async def relay(
    request: web.Request,
    reply: UpstreamReply,
    headers: dict[str, str],
    body: JSON,
    early: web.StreamResponse | None,
    *,
    started: float,
) -> tuple[web.StreamResponse, Relayed]:
    """Relay the answer (stream or body) into `early` when the keep-alive started one; then
    release the upstream whatever happened."""
    try:
        if reply.stream is not None:
            drop = with_usage_requested(body)[1]  # the usage chunk is ours to drop
            return await relay_stream(
                request,
                reply,
                headers=headers,
                drop_usage_chunk=drop,
                started=started,
                response=early,
            )
        if early is not None:  # a stream was started: the upstream's error goes in band
            await end_in_band(early, upstream_error(reply.status, reply.body))
            return early, Relayed(usage=None, completed=False, error="upstream_error")
        return await relay_body(request, reply, headers=headers)
    finally:
        await reply.release()


async def after(services: Services, trace: Trace) -> None:
    """After the answer: the request's bill and cache miss, the session state with the
    request's events (one store call), then the metrics."""
    relayed, miss, recall = trace.relayed, None, trace.recall
    usage = relayed.usage
    rounds = recall is not None and recall.rounds > 1 and usage is not None
    try:  # with recall rounds, the cache served the first (the client's request as sent)
        first = recall.first_usage if rounds and recall is not None else usage
        miss = services.engine.cache_miss(trace.prepared, usage=first, completed=relayed.completed)
        trace = trace._replace(bill=services.biller.bill(trace), miss=miss.cause)
    except Exception as exc:  # a price or a miss never costs the session its record
        log.warning("request not billed or classified: %s", type(exc).__name__)
    try:
        events = services.events.entries(trace)
    except Exception as exc:  # observability never costs the session its record
        log.warning("request events not built: %s", type(exc).__name__)
        events = []
    if rounds and recall is not None:
        usage = recall.last_usage  # the context the upstream holds: the last round's
    await services.engine.record(
        trace.prepared,
        usage=usage,
        completed=trace.relayed.completed,
        messages_in=trace.messages_in,
        events=events,
        miss=miss,
    )
    await notify(services.observers, trace)


def ctx_headers(prepared: Prepared) -> dict[str, str]:
    """What each mechanism did, for the client to see (DESIGN §5)."""
    turn = prepared.turn
    state = turn.state
    done = prepared.compaction is not None and prepared.compaction.status == "done"
    headers = {
        "X-Ctx-Session": turn.session,
        "X-Ctx-Compacted": "1" if done else "0",
        "X-Ctx-Pruned-Chars": str(prepared.tally.chars_pruned),
        "X-Ctx-Last-Prompt-Tokens": str(state.int_field("last_prompt_tokens")),
        "X-Ctx-Cached-Tokens": str(state.int_field("last_cached_tokens")),
    }
    if turn.degraded:
        headers["X-Ctx-Store"] = "degraded"
    return headers


def answer_headers(sent: Forwarded) -> dict[str, str]:
    """`ctx_headers`, and for a whole answer how many recall calls the loop answered
    (`X-Ctx-Recalls`; a stream's headers leave before the loop is over)."""
    headers = ctx_headers(sent.prepared)
    if sent.reply.stream is None:
        headers["X-Ctx-Recalls"] = str(sent.recall.tally.recalls if sent.recall else 0)
    return headers


def _is_overflow(reply: UpstreamReply) -> bool:
    return reply.status in (400, 413) and any(m in (reply.body or b"") for m in OVERFLOW_MARKERS)
