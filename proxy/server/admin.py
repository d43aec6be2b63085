"""Health, readiness, the metrics, persisted outputs, the sessions view and its events (scoped to
the caller's tenant)."""

from __future__ import annotations

import re
from collections.abc import Awaitable
from typing import TypeVar

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.exposition import generate_latest

from proxy.errors import BadRequest, NotFound, StoreUnavailable
from proxy.identity import SAFE_ID
from proxy.server.appkeys import LIFECYCLE, STORE, caller_of
from proxy.server.keys import Caller
from proxy.server.observe.metrics import METRICS
from proxy.server.observe.worker_metrics import (
    WORKER_SET,
    gathered_exposition,
    own_exposition,
)

T = TypeVar("T")

EVENT_ID = re.compile(r"^[0-9]{1,20}-[0-9]{1,20}$")


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    """200 while serving, with the store's health; 503 only while starting or draining."""
    phase = request.app[LIFECYCLE].phase
    if phase != "serving":
        return web.json_response({"status": phase}, status=503)
    ok = await request.app[STORE].ping()
    return web.json_response({"status": "serving", "store": "ok" if ok else "degraded"})


async def get_output(request: web.Request) -> web.Response:
    caller = caller_of(request)
    output_id = request.match_info["id"]
    if not SAFE_ID.match(output_id):
        raise NotFound("No such output.")
    text = await _store_call(request.app[STORE].get_output(caller.tenant, output_id))
    if text is None:
        raise NotFound("No such output.")
    return web.Response(text=text, content_type="text/plain")


async def list_sessions(request: web.Request) -> web.Response:
    """The caller's tenant's sessions; an admin key's with `?tenant=NAME` one tenant's, with
    `?all=1` every tenant's (`?tenant=` wins)."""
    limit = _limit(request.query.get("limit"))
    tenant = _listed_tenant(request, caller_of(request))
    rows = await _store_call(request.app[STORE].list_sessions(tenant, limit=limit))
    return web.json_response({"sessions": rows})


async def session_detail(request: web.Request) -> web.Response:
    caller: Caller = caller_of(request)
    tenant = _tenant_for(request, caller)
    session = request.match_info["id"]
    if not SAFE_ID.match(session):
        raise NotFound("No such session.")
    detail = await _store_call(request.app[STORE].session_detail(tenant, session))
    if detail is None:
        raise NotFound("No such session.")
    return web.json_response(detail)


async def list_events(request: web.Request) -> web.Response:
    """`GET /v1/ctx/events?after=ID&limit=N`: the events after `after` (default: the oldest kept),
    of the tenants `list_sessions` would list, and `last_id`, the id to ask after next (events of
    other tenants are skipped, not returned). Never waits."""
    caller = caller_of(request)
    after = request.query.get("after") or "0-0"
    if not EVENT_ID.match(after):
        raise BadRequest("'after' must be an event id such as 1700000000000-0.", param="after")
    tenant = _listed_tenant(request, caller)
    store = request.app[STORE]
    found = await _store_call(
        store.read_events(after, block_ms=0, count=_limit(request.query.get("limit")))
    )
    events = [e for _, e in found if tenant is None or e.get("tenant") == tenant]
    return web.json_response({"events": events, "last_id": found[-1][0] if found else after})


def _limit(asked: str | None) -> int:
    """`?limit=`: 100 when absent, at most 1,000; anything but a positive integer is refused
    (a zero would have Redis read every session to return none)."""
    if not asked:
        return 100
    if not (asked.isascii() and asked.isdigit()) or int(asked) < 1:  # no sign, space, "1e3"
        raise BadRequest("'limit' must be a positive integer.", param="limit")
    return min(int(asked), 1000)


def _listed_tenant(request: web.Request, caller: Caller) -> str | None:
    """The tenant whose sessions or events to list; None for every tenant (an admin's `?all=1`,
    unless `?tenant=` names one)."""
    if caller.admin and request.query.get("all") and not request.query.get("tenant"):
        return None
    return _tenant_for(request, caller)


def _tenant_for(request: web.Request, caller: Caller) -> str:
    """Admins may name another tenant with `?tenant=`; everyone else sees their own. An admin
    key that belongs to no tenant must name one (`BadRequest`)."""
    asked = request.query.get("tenant")
    if asked and caller.admin:
        return asked
    if not caller.tenant:
        raise BadRequest(
            "This admin key belongs to no tenant: name one with ?tenant=NAME "
            "(or list every tenant's sessions with ?all=1).",
            param="tenant",
        )
    return caller.tenant


async def _store_call(call: Awaitable[T]) -> T:
    """The store's answer; while it is down these views answer 503 (requests still flow)."""
    try:
        return await call
    except StoreUnavailable as exc:
        raise StoreUnavailable("The session store is unavailable; try again shortly.") from exc


async def metrics_endpoint(request: web.Request) -> web.Response:
    """`GET /metrics`: the app's registry; with workers, every worker's (`worker_metrics`)."""
    body = await own_metrics(request.app)
    workers = request.app.get(WORKER_SET)
    if workers is not None:
        body = await gathered_exposition(body, workers)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def own_metrics(app: web.Application) -> bytes:
    """This process's metrics in the text format (labelled with its worker number when it is
    one of several); the store health gauge is refreshed on each scrape."""
    metrics = app[METRICS]
    store = app.get(STORE)
    if store is not None:
        metrics.set_store_degraded(not await store.ping())
    workers = app.get(WORKER_SET)
    if workers is not None:
        return own_exposition(metrics.registry, workers)
    return generate_latest(metrics.registry)
