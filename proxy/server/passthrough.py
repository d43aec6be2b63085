"""Every other `/v1/*` path goes to the tenant's upstream untouched, in both directions.

Bodies are never decoded (`Content-Encoding` crosses as it came); only the credential is replaced
and hop-by-hop headers are dropped. The request body is read whole, bounded by `max_body_bytes`
(larger ones get 413), so that a stale pooled connection can be retried with the same bytes; the
response streams back as it arrives.
"""

from __future__ import annotations

from aiohttp import web

from proxy.adapters.upstream.headers import client_response_headers, upstream_request_headers
from proxy.adapters.upstream.transport import iter_body, open_response, timeouts_of
from proxy.server.appkeys import HTTP, SERVICES, SETTINGS, caller_of
from proxy.settings import UpstreamSettings


def upstream_url(upstream: UpstreamSettings, tail: str, query: str) -> str:
    base = upstream.base_url.rstrip("/")
    if upstream.kind == "anthropic" and not base.endswith("/v1"):
        base += "/v1"
    return f"{base}/{tail}" + (f"?{query}" if query else "")


async def passthrough(request: web.Request) -> web.StreamResponse:
    settings = request.app[SETTINGS]
    caller = caller_of(request)
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
        upstream_url(upstream, request.match_info["tail"], request.query_string),
        headers=headers,
        data=data,
        timeouts=timeouts,
        decompress=False,
    )
    try:
        response = web.StreamResponse(
            status=reply.status, headers=client_response_headers(reply.headers, decoded_body=False)
        )
        await response.prepare(request)
        async for chunk in iter_body(reply, idle_s=timeouts.idle_s):
            await response.write(chunk)
        await response.write_eof()
        return response
    finally:
        reply.close()
