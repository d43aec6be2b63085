"""HTTP concerns only: a request id, a bound on header size, a request that looped back to this
proxy refused (508, `proxy.adapters.upstream.headers.came_back`), and one error boundary rendering
OpenAI-shaped errors (Anthropic-shaped on the Messages API's paths, `/v1/messages…`), counting
each request and writing its access line."""

from __future__ import annotations

import itertools
import logging
import secrets
import time
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from aiohttp.web_protocol import RequestPayloadError

from proxy.adapters.upstream.headers import VIA, came_back
from proxy.errors import BodyTooLarge, CtxProxyError, LoopDetected, error_body
from proxy.inbound.messages_errors import messages_error
from proxy.logs import LOG_REQUEST_ID
from proxy.server.access import log_access
from proxy.server.appkeys import SCOPE, RequestScope, Services, caller_of
from proxy.server.parser_errors import client_fault, reason_of
from proxy.server.relay import CLIENT_WRITE_ERRORS, ClientGone

log = logging.getLogger(__name__)

# aiohttp refuses one header line over 8 KiB; this bounds them all together (nginx: 32 KiB,
# Envoy: 60 KiB), so a client cannot make every hop carry megabytes of headers.
MAX_HEADER_BYTES = 64 * 1024


def error_boundary(services: Services) -> Middleware:
    """The one middleware, for the app of `services`: a request id and the request's scope,
    errors rendered, and every request counted and logged once it is over."""
    lifecycle = services.lifecycle
    new_request_id = RequestIds()

    @web.middleware
    async def boundary(request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.monotonic()
        scope = request[SCOPE] = RequestScope(new_request_id(), services)
        LOG_REQUEST_ID.set(scope.id)  # every log line of this request carries it
        status = 499  # unless an answer comes back: the client went away
        lifecycle.in_flight += 1
        try:
            response = await _answer(request, handler)
            status = 499 if scope.client_left else response.status
        except web.HTTPException as exc:  # a redirect, passed on
            status = exc.status
            raise
        finally:
            lifecycle.in_flight -= 1
            count_request(request, scope, status)
            log_access(request, scope, status, elapsed_s=time.monotonic() - started)
        return response

    return boundary


class RequestIds:
    """Request ids of one app: a random prefix and a counter, unique across replicas without a
    random draw (a system call) per request."""

    __slots__ = ("_counter", "_prefix")

    def __init__(self) -> None:
        self._prefix = secrets.token_hex(4)
        self._counter = itertools.count()

    def __call__(self) -> str:
        return f"{self._prefix}{next(self._counter) & 0xFFFFFFFF:08x}"


def count_request(request: web.Request, scope: RequestScope, status: int) -> None:
    """Count one HTTP request by tenant, route pattern and final status (the error boundary
    calls this last, so errors it rendered count with their status)."""
    route = request.match_info.route.resource
    pattern = route.canonical if route is not None else "unmatched"
    tenant = _tenant_of(request)
    scope.services.metrics.requests.labels(tenant, pattern, str(status)).value += 1


def _tenant_of(request: web.Request) -> str:
    """The caller's tenant, or `-` when the request carries no valid key."""
    try:
        return caller_of(request).tenant or "-"
    except CtxProxyError:
        return "-"


async def stamp_ids(request: web.Request, response: web.StreamResponse) -> None:
    """`on_response_prepare`: every answer carries its request id (`X-Ctx-Request-Id`, and
    `X-Request-Id` unless the upstream sent its own), and its session once known,
    set just before its headers go out — streams and keep-alive answers too, which are sent
    before the handler returns."""
    scope = request.get(SCOPE)
    if scope is None:  # an answer aiohttp made before the middleware ran
        return
    headers = response.headers
    headers["X-Ctx-Request-Id"] = scope.id  # ours always, under a name of our own
    headers.setdefault("X-Request-Id", scope.id)  # an upstream's own id is relayed
    if scope.session is not None:
        headers.setdefault("X-Ctx-Session", scope.session)


async def _answer(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The handler's response, or the OpenAI-shaped error it raised."""
    raw = request.raw_headers  # (name, value) pairs: their bytes summed in C, 4 per line more
    if sum(map(len, itertools.chain.from_iterable(raw))) + 4 * len(raw) > MAX_HEADER_BYTES:
        body = error_body("Request headers are too large.", "invalid_request_error")
        return _error(request, 431, body)
    if VIA in request.headers and came_back(request.headers, request[SCOPE].services.instance):
        where = request.method, request.path
        log.warning("%s %s came back to this proxy: its upstream leads to itself", *where)
        return _error(request, 508, LoopDetected(LOOP_MESSAGE).to_body())
    try:
        return await handler(request)
    except CtxProxyError as exc:
        log.info("%s %s -> %d %s", request.method, request.path, exc.status, exc.error_type)
        return _error(request, exc.status, exc.to_body())
    except RequestPayloadError as exc:  # a body aiohttp could not decode (or a cut one)
        fault = client_fault(exc)
        reason = reason_of(fault) if fault is not None else "the body ended early"
        log.warning("%s %s -> 400 unreadable body: %s", request.method, request.path,
                    type(fault or exc).__name__)  # fmt: skip
        body = error_body(f"The request body could not be read: {reason}.", "invalid_request_error")
        return _error(request, 400, body)
    except web.HTTPRequestEntityTooLarge:
        exc2 = BodyTooLarge("Request body is larger than the proxy's max_body_bytes.")
        return _error(request, 413, exc2.to_body())
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        code = "not_found" if exc.status == 404 else None
        return _error(
            request, exc.status, error_body(exc.reason, "invalid_request_error", code=code)
        )
    except Exception as exc:
        if isinstance(exc, ClientGone) or (
            isinstance(exc, CLIENT_WRITE_ERRORS) and request.transport is None
        ):  # a client that went away is no error of ours: nothing can reach it now
            log.debug("%s %s: the client went away", request.method, request.path)
            request[SCOPE].client_left = True
            return web.Response(status=499)
        log.exception("unhandled error on %s %s", request.method, request.path)
        return _error(request, 500, error_body("Internal proxy error.", "server_error"))


LOOP_MESSAGE = (
    "ctxproxy loop: this request came back to the proxy that sent it upstream; its upstream"
    " base_url (or OPENAI_BASE_URL) leads back to the proxy itself."
)


MESSAGES_PATHS = "/v1/messages"
"""Paths of the Messages API (`proxy.server.messages`, and the pass-through beyond it): its
clients read errors in Anthropic's shape."""


def _error(request: web.Request, status: int, body: dict[str, Any]) -> web.Response:
    """The error answer: `body` (OpenAI-shaped) as it is, or in Anthropic's shape and with
    Anthropic's error type for its status on the Messages API's paths."""
    if request.path.startswith(MESSAGES_PATHS):
        status, body = messages_error(status, str(body["error"]["message"]))
    return web.json_response(body, status=status)
