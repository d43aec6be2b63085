"""`POST /v1/chat/completions`: parse, build the turn, run the pipeline, forward, relay."""

from __future__ import annotations

import logging
import time

from aiohttp import web

from proxy.engine.pipeline import draft_from_body
from proxy.engine.prepared import Prepared
from proxy.errors import CtxProxyError
from proxy.identity import explicit_session_id
from proxy.ports import UpstreamReply
from proxy.server.appkeys import SCOPE, RequestScope, Services, tenant_caller_of
from proxy.server.body import read_chat_body, with_usage_requested
from proxy.server.exchange import Exchange
from proxy.server.keepalive import KeepAlive, end_in_band, upstream_error
from proxy.server.observe.trace import Trace, notify
from proxy.server.relay import Relayed, relay_body
from proxy.server.stream_relay import relay_stream
from proxy.types import JSON

log = logging.getLogger(__name__)


async def chat_completions(request: web.Request) -> web.StreamResponse:
    started = time.monotonic()
    scope = request[SCOPE]
    tenant_caller_of(request)  # an unknown key is refused before the body is read
    body, marked = await read_chat_body(request, known=scope.services.known_tools)
    exchange = await _exchange(request, scope, body, started, marked=marked)
    try:
        prepared, reply, overflow = await exchange.forward()
    except CtxProxyError as exc:
        if exchange.early is None:
            raise
        await end_in_band(exchange.early, exc.to_body())  # the client already has a 200
        return exchange.early
    session = exchange.turn.session
    headers = ctx_headers(prepared, session, degraded=exchange.degraded)
    response, relayed = await _relay(
        request, reply, headers, drop=_added_usage(body), t0=started, early=exchange.early
    )
    scope.usage = relayed.usage
    trace = Trace(
        tenant=exchange.turn.tenant,
        session=session,
        model=exchange.turn.model,
        stream=reply.stream is not None,
        status=reply.status,
        prepared=prepared,
        relayed=relayed,
        messages_in=len(body["messages"]),
        prepare_s=exchange.prepare_s,
        upstream_s=time.monotonic() - started - exchange.prepare_s,
        store_degraded=exchange.degraded,
        retried_overflow=overflow,
        bytes_out=reply.sent_bytes,
    )
    services = scope.services
    services.lifecycle.spawn(_after(services, trace))
    return response


async def _exchange(
    request: web.Request, scope: RequestScope, body: JSON, started: float, *, marked: bool
) -> Exchange:
    """Who asks, in which session, with what state: the request's way to the upstream."""
    caller = tenant_caller_of(request)
    services = scope.services
    engine = services.engine
    client = draft_from_body(body)
    session = explicit_session_id(request.headers, body)
    if session is None:
        session = engine.derived_session_id(caller.tenant, client)
    scope.session = session
    turn, degraded = await engine.load_turn(caller.tenant, session, str(body.get("model", "")))
    tenant = services.settings.tenants[caller.tenant]
    return Exchange(
        request,
        engine,
        services.upstreams[caller.tenant],
        body=body,
        client=client,
        turn=turn,
        api_key=caller.token if tenant.forward_client_key else None,
        degraded=degraded,
        keepalive=KeepAlive(request, {"X-Ctx-Session": session}) if body.get("stream") else None,
        compact_on_overflow=tenant.compact.enabled,
        started=started,
        client_marked=marked,
    )


async def _relay(
    request: web.Request,
    reply: UpstreamReply,
    headers: dict[str, str],
    *,
    drop: bool,
    t0: float,
    early: web.StreamResponse | None,
) -> tuple[web.StreamResponse, Relayed]:
    """Relay the answer (stream or body), then release the upstream whatever happened."""
    try:
        if reply.stream is not None:
            return await relay_stream(
                request, reply, headers=headers, drop_usage_chunk=drop, started=t0, response=early
            )
        if early is not None:  # a stream was started: the upstream's error goes in band
            await end_in_band(early, upstream_error(reply.status, reply.body))
            return early, Relayed(usage=None, completed=False, error="upstream_error")
        return await relay_body(request, reply, headers=headers)
    finally:
        await reply.release()


def _added_usage(body: JSON) -> bool:
    return with_usage_requested(body)[1]


async def _after(services: Services, trace: Trace) -> None:
    """After the answer: the session state with the request's events (one store call), then
    the metrics."""
    try:
        events = services.events.entries(trace)
    except Exception as exc:  # observability never costs the session its record
        log.warning("request events not built: %s", type(exc).__name__)
        events = []
    await services.engine.record(
        trace.prepared,
        usage=trace.relayed.usage,
        completed=trace.relayed.completed,
        messages_in=trace.messages_in,
        events=events,
    )
    await notify(services.observers, trace)


def ctx_headers(prepared: Prepared, session: str, *, degraded: bool) -> dict[str, str]:
    """What each mechanism did, for the client to see (DESIGN §5)."""
    state = prepared.turn.state
    done = prepared.compaction is not None and prepared.compaction.status == "done"
    headers = {
        "X-Ctx-Session": session,
        "X-Ctx-Compacted": "1" if done else "0",
        "X-Ctx-Pruned-Chars": str(prepared.tally.chars_pruned),
        "X-Ctx-Last-Prompt-Tokens": str(state.int_field("last_prompt_tokens")),
        "X-Ctx-Cached-Tokens": str(state.int_field("last_cached_tokens")),
    }
    if degraded:
        headers["X-Ctx-Store"] = "degraded"
    return headers
