"""Every other `/v1/*` path goes to the tenant's upstream untouched, in both directions.

Bodies are never decoded (`Content-Encoding` crosses as it came); only the credential is replaced
and hop-by-hop headers are dropped. The request body is read whole, bounded by `max_body_bytes`
(larger ones get 413), so that a stale pooled connection can be retried with the same bytes; the
response streams back as it arrives.

The path after `/v1/` is appended to the upstream's base URL exactly as the client encoded it, and
never resolved: a path that could leave the base path under any reading (dot segments, encoded or
not, once or several times; `\\` taken as `/`) is refused with 400 before anything is sent, since
the request would carry the proxy's own upstream key.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from urllib.parse import unquote

from aiohttp import web
from yarl import URL

from proxy.adapters.upstream.headers import client_response_headers, upstream_request_headers
from proxy.adapters.upstream.transport import CUT_ERRORS, iter_body, open_response, timeouts_of
from proxy.errors import BadRequest
from proxy.server.appkeys import HTTP, SCOPE, SERVICES, SETTINGS, key_caller_of
from proxy.server.relay import ClientGone, start_client_response, write_to_client
from proxy.settings import UpstreamSettings

log = logging.getLogger(__name__)

PREFIX = "/v1/"
MAX_DECODES = 3
"""Percent-decodings tried on a path; one still encoded after them is refused."""
_SEPARATORS = re.compile(r"[/\\]")


def checked_tail(raw_path: str) -> str:
    """The part of `raw_path` (percent-encoded, as received) after `/v1/`, unchanged.

    `BadRequest` if any segment is `.` or `..` (also with `;params`) in the path as sent or after
    one to `MAX_DECODES` percent-decodings (`%2e%2e`, `..%2f`, `%252e%252e`), `/` and `\\` both
    counting as separators; if the path does not decode as UTF-8 (`%c0%ae`, an overlong dot); or
    if it does not begin with `/v1/` as sent."""
    if not raw_path.startswith(PREFIX):
        raise BadRequest("The path must begin with /v1/ as sent.", code="invalid_path")
    tail = text = raw_path[len(PREFIX) :]
    for _ in range(MAX_DECODES + 1):
        if any(s.split(";", 1)[0] in (".", "..") for s in _SEPARATORS.split(text)):
            raise BadRequest("The path may not contain . or .. segments.", code="invalid_path")
        try:
            decoded = unquote(text, errors="strict")
        except UnicodeDecodeError:
            raise BadRequest("The path is not valid UTF-8.", code="invalid_path") from None
        if decoded == text:
            return tail
        text = decoded
    raise BadRequest("The path is percent-encoded too many times.", code="invalid_path")


def upstream_url(upstream: UpstreamSettings, tail: str, query: str) -> URL:
    """The base URL, then `tail` and `query` as they were encoded: `encoded=True` keeps yarl
    from resolving or re-quoting anything (`checked_tail` has refused every escape)."""
    base = str(URL(upstream.base_url.rstrip("/")))
    if upstream.kind == "anthropic" and not base.endswith("/v1"):
        base += "/v1"
    return URL(f"{base}/{tail}" + (f"?{query}" if query else ""), encoded=True)


async def passthrough(request: web.Request) -> web.StreamResponse:
    settings = request.app[SETTINGS]
    caller, _ = key_caller_of(request)  # an Anthropic client's key comes as x-api-key
    raw_path = request.rel_url.raw_path
    try:
        tail = checked_tail(raw_path)
    except BadRequest:
        log.warning("pass-through path refused: %r", raw_path[:200])
        raise
    tenant = settings.tenants[caller.tenant]
    upstream = settings.upstreams[tenant.upstream]
    via = request.app[SERVICES].instance
    headers = upstream_request_headers(request.headers, rebuilt_body=False, via=via)
    key = caller.token if tenant.forward_client_key and caller.token else upstream.api_key
    if key and upstream.kind == "anthropic":
        headers["x-api-key"] = key
    elif key:
        headers["Authorization"] = f"Bearer {key}"
    timeouts = timeouts_of(upstream)
    data = await request.read() if request.body_exists else None
    reply = await open_response(
        request.app[HTTP],
        request.method,
        upstream_url(upstream, tail, request.rel_url.raw_query_string),
        headers=headers,
        data=data,
        timeouts=timeouts,
        decompress=False,
    )
    response = web.StreamResponse(
        status=reply.status, headers=client_response_headers(reply.headers, decoded_body=False)
    )
    try:
        await _relay_body(request, response, iter_body(reply, idle_s=timeouts.idle_s))
    finally:
        reply.close()
    return response


async def _relay_body(
    request: web.Request, response: web.StreamResponse, body: AsyncIterator[bytes]
) -> None:
    """The upstream's body to the client as it arrives. A client that leaves is a 499; an
    upstream that fails mid-body is logged, and the client's connection is closed before the
    body's end so that it cannot take the part it got for the whole."""
    try:
        await start_client_response(response, request)
        async for chunk in body:
            await write_to_client(response, chunk)
        await write_to_client(response, end=True)
    except ClientGone:
        request[SCOPE].client_left = True
    except CUT_ERRORS as exc:  # a read from the upstream: writes fail as ClientGone
        log.warning("pass-through upstream body cut: %s", type(exc).__name__)
        if request.transport is not None:
            request.transport.close()
