"""`POST /v1/responses`, top to bottom: read the body, expand `previous_response_id` from the
store, check it, answer a compaction request (`proxy.server.responses_compact`), open the
compaction handles it carries, convert it to the internal form (`proxy.inbound`), find the
session, load the turn, prepare and forward as the chat route does (`proxy.server.chat.forward`:
the overflow retry, the keep-alive), relay the answer, and keep the response and the session's
record in the background.

The upstream is sent what it speaks (`Sender`): a Responses upstream (`api = "responses"`) the
Responses body rendered from the prepared one (what no stage touched, as the client sent it);
any other the prepared chat body (translated to Messages by the Anthropic adapter).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from proxy.engine.prepared import Prepared
from proxy.errors import CtxProxyError
from proxy.inbound.chat_request import chat_request
from proxy.inbound.responses_carrier import Carrier
from proxy.inbound.responses_compaction import is_compaction_request, without_trigger
from proxy.inbound.responses_render import internal_to_responses
from proxy.inbound.responses_request import responses_to_internal
from proxy.inbound.responses_response import response_id_for
from proxy.inbound.result_images import responses_result_images
from proxy.inbound.usage_report import history_scale
from proxy.ports import ResponsesUpstream, Upstream, UpstreamReply
from proxy.server.appkeys import SCOPE, Services, tenant_caller_of
from proxy.server.chat import Forwarded, after, answer_headers, forward, traced
from proxy.server.keepalive import KeepAlive
from proxy.server.observe.trace import Trace
from proxy.server.recall_dialects import ResponsesDialect
from proxy.server.responses_body import (
    expanded_body,
    read_responses_body,
    records_of,
    responses_turn,
)
from proxy.server.responses_compact import answer_compaction
from proxy.server.responses_records import Records
from proxy.server.responses_relay import end_with_error, relay_answer
from proxy.server.responses_streams import Answer
from proxy.settings import TenantSettings
from proxy.translate.tool_images import keep_tool_images
from proxy.types import JSON, Turn


async def create_response(request: web.Request) -> web.StreamResponse:
    started = time.monotonic()
    scope = request[SCOPE]
    services = scope.services
    caller = tenant_caller_of(request)  # an unknown key is refused before the body is read
    sent_body, marked = await read_responses_body(request, known=services.known_tools)
    native = services.responses_upstreams.get(caller.tenant)
    records = records_of(services, caller.tenant)
    body = await expanded_body(sent_body, records, pass_unknown=native is not None)
    if is_compaction_request(body):
        conversation = without_trigger(body)
        return await answer_compaction(request, caller, sent_body, conversation, records)
    internal, carrier = responses_to_internal(body, summaries=await records.summaries(body))
    turn = await responses_turn(request, caller.tenant, body, internal, marked=marked)
    tenant = services.settings.tenants[caller.tenant]
    keepalive = KeepAlive(request, {"X-Ctx-Session": turn.session}) if body.get("stream") else None
    try:
        sent = await _forward(request, Sender(services, caller.tenant, carrier, native), internal,
                              turn, tenant=tenant, token=caller.token, keepalive=keepalive,
                              started=started)  # fmt: skip
    except CtxProxyError as exc:
        early = keepalive.response if keepalive is not None else None
        if early is None:
            raise
        await end_with_error(early, exc.to_body())  # the client already has a 200
        return early
    scale = history_scale(internal, sent.prepared.body) if tenant.report_usage == "client" else None
    answer = Answer(sent_body, response_id_for(scope.id), int(time.time()), scale)
    headers = answer_headers(sent)
    response, served = await relay_answer(
        request,
        sent.reply,
        headers=headers,
        early=keepalive.response if keepalive is not None else None,
        native=native is not None,
        answer=answer,
        started=started,
    )
    scope.usage = served.relayed.usage
    trace = traced(sent, served.relayed, messages_in=len(internal["messages"]), started=started)
    services.lifecycle.spawn(_after(services, trace, records, body, served.response))
    return response


async def _forward(
    request: web.Request,
    sender: Sender,
    internal: JSON,
    turn: Turn,
    *,
    tenant: TenantSettings,
    token: str | None,
    keepalive: KeepAlive | None,
    started: float,
) -> Forwarded:
    """`forward` as this route uses it: the client's key upstream when the tenant forwards it,
    the overflow retry when it compacts, the recall loop (in the Responses API's form when the
    upstream is native)."""
    services = request[SCOPE].services
    api_key = token if tenant.forward_client_key else None
    dialect = None
    if sender.native is not None:
        dialect = functools.partial(
            sender.recall_dialect,
            headers=request.headers,
            api_key=api_key,
            tool_name=tenant.recall.tool_name,
        )
    return await forward(
        services.engine,
        sender,
        internal,
        turn,
        headers=request.headers,
        api_key=api_key,
        keepalive=keepalive,
        retry_overflow=tenant.compact.enabled,
        started=started,
        recall=(tenant.recall, services.store),
        dialect=dialect,
    )


class Sender:
    """`forward`'s upstream for one Responses request: the prepared internal body, rendered for
    what the tenant's upstream speaks."""

    def __init__(
        self,
        services: Services,
        tenant: str,
        carrier: Carrier,
        native: ResponsesUpstream | None,
    ) -> None:
        self._chat: Upstream = services.upstreams[tenant]
        upstream = services.settings.upstreams[services.settings.tenants[tenant].upstream]
        self._anthropic = upstream.kind == "anthropic"
        self._keep_markers = upstream.cache_style == "anthropic"
        self._carrier = carrier
        self.native = native

    async def send_chat(
        self,
        body: JSON,
        *,
        headers: Mapping[str, str],
        api_key: str | None,
        previous_id: str | None = None,
    ) -> UpstreamReply:
        if self.native is not None:
            rendered = internal_to_responses(body, self._carrier)
            return await self.native.send_responses(rendered, headers=headers, api_key=api_key)
        images = responses_result_images(body.get("messages") or [], self._carrier)
        if self._anthropic:  # the adapter translates; a tool_result holds its images
            body = {**body, "messages": keep_tool_images(body.get("messages") or [], images)}
        else:
            body = chat_request(body, keep_markers=self._keep_markers, images=images)
        return await self._chat.send_chat(
            body, headers=headers, api_key=api_key, previous_id=previous_id
        )

    def recall_dialect(
        self,
        prepared: Prepared,
        *,
        headers: Mapping[str, str],
        api_key: str | None,
        tool_name: str,
    ) -> ResponsesDialect:
        """The recall rounds in the Responses API's form, continuing what `send_chat` sent the
        native upstream for `prepared`."""
        assert self.native is not None
        send = functools.partial(self.native.send_responses, headers=headers, api_key=api_key)
        first = internal_to_responses(prepared.body, self._carrier)
        return ResponsesDialect(send, first, tool_name)


async def _after(
    services: Services,
    trace: Trace,
    records: Records,
    body: JSON,
    response: dict[str, Any] | None,
) -> None:
    """The session's record and the observers (as for a chat request), then the response
    kept for a later `previous_response_id`."""
    await after(services, trace)
    if response is not None:
        await records.keep_response(body, response)
