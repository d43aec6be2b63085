"""Reading a Responses request, shared by `POST /v1/responses` and its compaction endpoint: the
body (checked as the chat route checks its own), `previous_response_id` expanded, the shape the
edge relies on (`proxy.inbound.responses_check`), and the request's `Turn`.
"""

from __future__ import annotations

from aiohttp import web

from proxy.engine.pipeline import draft_from_body
from proxy.errors import BadRequest
from proxy.inbound.responses_check import request_problem
from proxy.inbound.responses_errors import request_error
from proxy.inbound.responses_session import responses_session_id
from proxy.server.appkeys import SCOPE, Services
from proxy.server.body import ROUTING_KEYS, KnownTools, read_json_object
from proxy.server.responses_records import Records, refusal
from proxy.types import JSON, Turn


def records_of(services: Services, tenant: str) -> Records:
    """`tenant`'s Responses records, for one request."""
    ttl_s = services.settings.store.session_ttl_s
    return Records(services.store, services.handle_secret, tenant, ttl_s=ttl_s)


async def read_responses_body(
    request: web.Request, *, known: KnownTools | None = None
) -> tuple[JSON, bool]:
    """The JSON object sent, without routing keys, and whether it holds a `cache_control` key;
    `BadRequest` for invalid JSON, another value or one nested too deeply."""
    body, found = await read_json_object(request, known=known)
    return {k: v for k, v in body.items() if k not in ROUTING_KEYS}, found.marked


async def expanded_body(body: JSON, records: Records, *, pass_unknown: bool) -> JSON:
    """`body` with `previous_response_id` expanded (`Records.expanded`), checked: a 400 saying
    what to fix when the edge cannot take it."""
    out = await records.expanded(body, pass_unknown=pass_unknown)
    problem = request_problem(out)
    if problem is not None:
        raise refusal(request_error(problem))
    return out


async def responses_turn(
    request: web.Request, tenant: str, body: JSON, internal: JSON, *, marked: bool
) -> Turn:
    """The request's `Turn`: its session (the ids a Responses client names, else derived from
    the internal form) and what the engine loads for it."""
    if not internal["messages"]:
        raise BadRequest(
            "input: Field required (the request holds no conversation).", param="input"
        )
    scope = request[SCOPE]
    engine = scope.services.engine
    client = draft_from_body(internal)
    session = responses_session_id(request.headers, body)
    if session is None:
        session = engine.derived_session_id(tenant, client)
    scope.session = session
    return await engine.load_turn(tenant, session, client, marked=marked)
