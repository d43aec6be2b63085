"""`POST /v1/messages` and `POST /v1/messages/count_tokens`: the Anthropic Messages API inbound.

Top to bottom, as `proxy.server.chat` does it: the caller (its key in `x-api-key`, or a bearer),
the body (`proxy.inbound.messages_request` checks what the conversion needs), the internal form
and its carrier, the session (`proxy.inbound.messages_session`, else derived), the turn, prepare
and send (`proxy.server.messages_forward`: to an Anthropic upstream the Messages body rendered
around the client's, to another a chat request; the overflow retry; the recall loop), relay
(`proxy.server.messages_relay`: an Anthropic upstream's answer untouched, another's translated
to the Messages API's), and record in the background.

The client's `cache_control` markers on messages stay out of the stages unless the tenant sets
`messages_markers_stop_pruning` (`TenantSettings`): they come back on their blocks as sent, and
pruning may act on a client that marks its newest turn on every request. The proxy's own errors
are Anthropic-shaped (the error boundary, by path); an Anthropic upstream's pass through as they
came. `count_tokens` prepares the request the same way and counts what would be sent.
"""

from __future__ import annotations

import time
from typing import Any

import orjson
from aiohttp import web

from proxy.adapters.upstream.anthropic_messages import AnthropicUpstream
from proxy.engine.pipeline import draft_from_body
from proxy.engine.prepared import Prepared
from proxy.errors import BadRequest, CtxProxyError
from proxy.inbound.chat_request import chat_request, estimate_input_tokens
from proxy.inbound.client_usage import prompt_chars, usage_scale, with_client_input
from proxy.inbound.messages_request import messages_to_internal, request_problem
from proxy.inbound.messages_session import messages_session_id
from proxy.server.appkeys import SCOPE, Services, key_caller_of
from proxy.server.body import KnownTools, read_json
from proxy.server.chat import after, answer_headers, ctx_headers, traced
from proxy.server.keepalive import KeepAlive
from proxy.server.messages_forward import (
    Inbound,
    client_key,
    forward,
    looping,
    sending,
    summarizer_key,
    upstream_body,
)
from proxy.server.messages_relay import Passed, Translated, end_with_error, relay_messages
from proxy.server.relay import with_ours
from proxy.types import JSON

COUNT_ENDPOINT = "messages/count_tokens"


async def messages(request: web.Request) -> web.StreamResponse:
    started = time.monotonic()
    services = request[SCOPE].services
    inbound = await read_inbound(request, services)
    upstream = services.upstreams[inbound.caller.tenant]
    stream = inbound.body.get("stream") is True
    keepalive = KeepAlive(request, {"X-Ctx-Session": inbound.turn.session}) if stream else None
    try:
        sent = await forward(
            services.engine,
            upstream,
            inbound,
            request,
            keepalive,
            started=started,
            reader=services.store,
        )
    except CtxProxyError as exc:
        early = keepalive.response if keepalive is not None else None
        if early is None:
            raise
        await end_with_error(early, exc.status, exc.message)  # the client already has a 200
        return early
    scale = _scale(inbound, sent.prepared)
    translated = None if isinstance(upstream, AnthropicUpstream) else inbound.body["model"]
    headers = answer_headers(sent)
    response, relayed = await relay_messages(
        request,
        sent.reply,
        headers=headers,
        events=Passed(scale) if translated is None else Translated(translated, scale),
        translated_model=translated,
        scale=scale,
        started=started,
        response=keepalive.response if keepalive is not None else None,
    )
    request[SCOPE].usage = relayed.usage
    trace = traced(sent, relayed, messages_in=len(inbound.internal["messages"]), started=started)
    services.lifecycle.spawn(after(services, trace))
    return response


async def count_tokens(request: web.Request) -> web.Response:
    """The input tokens of what the proxy would send for this request: the Anthropic upstream's
    own count of the prepared request, an estimate (`estimate_input_tokens`) for others;
    rescaled to the client's history with `report_usage = "client"`."""
    services = request[SCOPE].services
    inbound = await read_inbound(request, services)
    upstream = services.upstreams[inbound.caller.tenant]
    engine = services.engine
    prepared = await engine.prepare(
        inbound.internal,
        turn=inbound.turn,
        api_key=summarizer_key(inbound),
        recall=looping(inbound),  # what would be sent: the recall tool too, when offered
        sending=sending(upstream, inbound, request),
    )
    scale = _scale(inbound, prepared)
    headers = {"Content-Type": "application/json", **ctx_headers(prepared)}
    if not isinstance(upstream, AnthropicUpstream):
        counted: Any = {"input_tokens": estimate_input_tokens(chat_request(prepared.body))}
        body = orjson.dumps(with_client_input(counted, scale) if scale is not None else counted)
        return web.Response(body=body, headers=headers)
    reply = await upstream.send_messages(
        upstream_body(upstream, inbound, prepared),
        headers=request.headers,
        api_key=client_key(inbound),
        as_bearer=inbound.as_bearer,
        endpoint=COUNT_ENDPOINT,
        query=request.rel_url.raw_query_string,
    )
    body = reply.body or b""
    if scale is not None and reply.status == 200:
        body = orjson.dumps(with_client_input(orjson.loads(body), scale))
    return web.Response(status=reply.status, body=body, headers=with_ours(reply.headers, headers))


async def read_inbound(request: web.Request, services: Services) -> Inbound:
    """The caller, the checked body, its internal form, the session and the turn."""
    caller, as_bearer = key_caller_of(request)
    body, marked = await read_messages_body(request, known=services.known_tools)
    tenant = services.settings.tenants[caller.tenant]
    hide = not tenant.messages_markers_stop_pruning
    internal, carrier = messages_to_internal(body, hide_message_markers=hide)
    client = draft_from_body(internal)
    engine = services.engine
    session = messages_session_id(request.headers, body)
    if session is None:
        session = engine.derived_session_id(caller.tenant, client)
    request[SCOPE].session = session
    turn = await engine.load_turn(caller.tenant, session, client, marked=marked)
    cap = services.settings.upstreams[tenant.upstream].max_output_tokens
    return Inbound(body, internal, carrier, caller, tenant, turn, as_bearer, cap)


async def read_messages_body(
    request: web.Request, *, known: KnownTools | None = None
) -> tuple[JSON, bool]:
    """The JSON body, checked for what the conversion needs (`BadRequest` names what is wrong),
    and whether any object in it has a `cache_control` key."""
    body, found = await read_json(request, known=known)
    problem = request_problem(body)
    if problem:
        raise BadRequest(problem)
    return body, found.marked if found is not None else True


def _scale(inbound: Inbound, prepared: Prepared) -> float | None:
    """With `report_usage = "client"`: how much larger the client's history is than what was
    sent (`proxy.inbound.client_usage`); else None."""
    if inbound.tenant.report_usage != "client":
        return None
    return usage_scale(prompt_chars(inbound.internal), prompt_chars(prepared.body))
