"""The access line: one per HTTP request, at INFO on the `proxy.access` logger, written when the
request is over (a stream once it has ended, an error once it is rendered, a client gone as 499).

It says the method, the path, the status, the tenant, the session, the latency and the tokens the
upstream reported (prompt+completion), and never content, a query string or a key. Below INFO
(`--log-level WARNING`, or that logger's own level) it costs one check and says nothing.
"""

from __future__ import annotations

import logging

from aiohttp import web

from proxy.server.appkeys import RequestScope

log = logging.getLogger("proxy.access")

MAX_PATH_CHARS = 200


def log_access(request: web.Request, scope: RequestScope, status: int, *, elapsed_s: float) -> None:
    """Log one request; `-` stands for a tenant or session not known (a refused key, a 404)."""
    if not log.isEnabledFor(logging.INFO):
        return
    caller, usage = scope.caller, scope.usage
    path = request.path
    if len(path) > MAX_PATH_CHARS:
        path = path[:MAX_PATH_CHARS] + "…"
    fields: dict[str, object] = {
        "method": request.method,
        "path": path,
        "status": status,
        "tenant": caller.tenant if caller is not None and caller.tenant else "-",
        "session": scope.session or "-",
        "latency_ms": round(elapsed_s * 1000, 1),
    }
    tokens = "-"
    if usage is not None:
        fields["prompt_tokens"] = usage.prompt_tokens
        fields["completion_tokens"] = usage.completion_tokens
        fields["cached_tokens"] = usage.cached_tokens
        tokens = f"{usage.prompt_tokens}+{usage.completion_tokens}"
    log.info(
        "%s %s %d tenant=%s session=%s %.0f ms tokens=%s",
        fields["method"],
        path,
        status,
        fields["tenant"],
        fields["session"],
        fields["latency_ms"],
        tokens,
        extra={"fields": fields},
    )
