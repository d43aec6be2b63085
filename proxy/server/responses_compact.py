"""The compaction contract of the Responses API: `POST /v1/responses/compact`, and a
`POST /v1/responses` whose input ends with a `compaction_trigger` item (Codex).

Either way the conversation (expanded: `previous_response_id`, earlier compaction items) is
summarized by ctxproxy's own summarizer, whatever the upstream (`ContextEngine.summarize_all`:
the stages before compaction, then one summarizer call), the summary kept in the store, and the
answer holds exactly one `compaction` item whose `encrypted_content` is a handle to it, signed
and bound to the tenant and the conversation it covers (`Records.keep_summary`), and the
summarizer call's usage (the Responses API's `usage`: what the compaction cost). Each is
counted in `ctxproxy_compactions_total` and written as a `kind=compaction` event (`client`:
`compact` or `trigger`), as the compactions of other requests are:

    /v1/responses/compact        a `response.compaction` object, JSON
    a trigger, streamed          the Response's whole event sequence, ending with
                                 `response.completed` (what Codex requires)
    a trigger, not streamed      the Response, JSON

A summary that cannot be made is a 502 (in band, as an `error` event, once a stream started):
the client keeps its history and may try again.
"""

from __future__ import annotations

import time

from aiohttp import web

from proxy.compaction.job import CompactionOutcome
from proxy.errors import CtxProxyError
from proxy.history import prefix_hashes
from proxy.inbound.responses_compaction import (
    compacted_response,
    compaction_item,
    compaction_response,
)
from proxy.inbound.responses_events import replay_response
from proxy.inbound.responses_request import responses_to_internal
from proxy.inbound.responses_response import response_id_for
from proxy.server.appkeys import SCOPE, tenant_caller_of
from proxy.server.keepalive import SSE_HEADERS, KeepAlive, kept_alive
from proxy.server.keys import Caller
from proxy.server.relay import start_client_response, write_to_client
from proxy.server.responses_body import (
    expanded_body,
    read_responses_body,
    records_of,
    responses_turn,
)
from proxy.server.responses_records import Records
from proxy.server.responses_relay import end_with_error
from proxy.types import JSON, Turn


class CompactionFailed(CtxProxyError):
    """502: the summarizer gave no summary; nothing was kept."""

    status = 502
    code = "compaction_failed"


async def compact_endpoint(request: web.Request) -> web.StreamResponse:
    """`POST /v1/responses/compact`: an `previous_response_id` must be one the proxy kept (the
    conversation is summarized here, whatever the upstream)."""
    scope = request[SCOPE]
    caller = tenant_caller_of(request)
    sent_body, _ = await read_responses_body(request, known=scope.services.known_tools)
    records = records_of(scope.services, caller.tenant)
    body = await expanded_body(sent_body, records, pass_unknown=False)
    return await answer_compaction(request, caller, sent_body, body, records, endpoint=True)


async def answer_compaction(
    request: web.Request,
    caller: Caller,
    sent_body: JSON,
    conversation: JSON,
    records: Records,
    *,
    endpoint: bool = False,
) -> web.StreamResponse:
    """Summarize `conversation` and answer with its one compaction item (module docstring);
    `sent_body` is the request as the client sent it (the Response echoes it)."""
    summaries = await records.summaries(conversation)
    internal, _ = responses_to_internal(conversation, summaries=summaries)
    turn = await responses_turn(request, caller.tenant, conversation, internal, marked=False)
    stream = bool(sent_body.get("stream")) and not endpoint
    headers = {"X-Ctx-Session": turn.session}
    keepalive = KeepAlive(request, headers) if stream else None
    try:
        asked = "compact" if endpoint else "trigger"
        outcome, early = await _summarized(request, caller, turn, keepalive, asked=asked)
        covered = prefix_hashes(internal["messages"], salt=f"responses:{caller.tenant}")[-1]
        handle = await records.keep_summary(outcome.messages, prefix_hash=covered)
    except CtxProxyError as exc:
        if keepalive is None or keepalive.response is None:
            raise
        await end_with_error(keepalive.response, exc.to_body())
        return keepalive.response
    headers["X-Ctx-Compacted"] = "1"
    answer = _answer(request, sent_body, handle, outcome.usage, endpoint=endpoint)
    if not stream:
        return web.json_response(answer, headers=headers)
    response = early or web.StreamResponse(status=200, headers={**SSE_HEADERS, **headers})
    await start_client_response(response, request)
    await write_to_client(response, replay_response(answer), end=True)
    return response


async def _summarized(
    request: web.Request, caller: Caller, turn: Turn, keepalive: KeepAlive | None, *, asked: str
) -> tuple[CompactionOutcome, web.StreamResponse | None]:
    """The summarizer's outcome (the keep-alive running meanwhile, when given) and the early
    response the keep-alive started, if it did; counted and evented like other compactions
    (`asked`: `compact` or `trigger`). Raises `CompactionFailed` when no summary came."""
    services = request[SCOPE].services
    forward = services.settings.tenants[caller.tenant].forward_client_key
    work = services.engine.summarize_all(turn, api_key=caller.token if forward else None)
    outcome = await kept_alive(keepalive, work)
    early = keepalive.response if keepalive is not None else None
    services.metrics.count_compaction(caller.tenant, outcome)
    event = services.events.on_client_compaction(
        caller.tenant, turn.session, outcome, asked=asked, model=turn.model
    )
    services.lifecycle.spawn(event)
    if outcome.status != "done":
        raise CompactionFailed(f"The conversation could not be summarized: {outcome.reason}.")
    return outcome, early


def _answer(
    request: web.Request, sent_body: JSON, handle: str, usage: JSON | None, *, endpoint: bool
) -> JSON:
    """The `response.compaction` object (`endpoint`), else the Response, holding the one
    compaction item for `handle` and the summarizer call's `usage`."""
    response_id = response_id_for(request[SCOPE].id)
    item = compaction_item(handle, response_id=response_id)
    created_at = int(time.time())
    if endpoint:
        return compacted_response(
            item=item, response_id=response_id, created_at=created_at, usage=usage
        )
    return compaction_response(
        sent_body, item=item, response_id=response_id, created_at=created_at, usage=usage
    )
