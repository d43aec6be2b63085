"""`GET /v1/ctx/memory` and `DELETE /v1/ctx/memory?pattern=…`: the facts compactions learned
(issue 19), of the caller's tenant; an admin key names another with `?tenant=`.

`?session=S` asks for what session S sees: its own facts when the tenant's memory scope is
`session`, else the tenant's. `GET` answers `{"tenant", "session", "scope", "enabled",
"max_lines", "facts": ["- YYYY-MM-DD: …", …]}` (oldest first); `DELETE` removes the facts whose
line holds `pattern` (ignoring case) and answers `{"forgotten": n}`. While the store is down
both answer 503; when the embedded store cannot write the facts file, `DELETE` answers 500
`memory_write_failed` and nothing is forgotten (neither in memory nor on disk).
"""

from __future__ import annotations

from aiohttp import web

from proxy.errors import BadRequest, CtxProxyError, NotFound, StoreUnavailable
from proxy.identity import SAFE_ID
from proxy.memory.ledger import MemorySettings
from proxy.server.appkeys import SETTINGS, STORE, caller_of


def _whose(request: web.Request) -> tuple[str, str | None, MemorySettings]:
    """(tenant, owner of the facts: None the tenant's, else a session id, the tenant's memory
    settings), from the caller and the query."""
    caller = caller_of(request)
    asked = request.query.get("tenant")
    tenant = asked if asked and caller.admin else caller.tenant
    found = request.app[SETTINGS].tenants.get(tenant)
    if found is None:
        raise NotFound("No such tenant.")
    session = request.query.get("session") or None
    if session is not None and not SAFE_ID.match(session):
        raise BadRequest("'session' must be a session id.", param="session")
    memory = found.memory
    return tenant, memory.owner(session) if session else None, memory


async def show_memory(request: web.Request) -> web.Response:
    tenant, owner, memory = _whose(request)
    try:
        facts = await request.app[STORE].read_facts(tenant, owner)
    except StoreUnavailable as exc:
        raise StoreUnavailable("The memory store is unavailable; try again shortly.") from exc
    return web.json_response(
        {
            "tenant": tenant,
            "session": owner,
            "scope": memory.scope,
            "enabled": memory.enabled,
            "max_lines": memory.max_lines,
            "facts": list(facts),
        }
    )


async def forget_memory(request: web.Request) -> web.Response:
    pattern = request.query.get("pattern", "")
    if not pattern.strip():
        raise BadRequest("'pattern' must be some text the facts to forget hold.", param="pattern")
    tenant, owner, _ = _whose(request)
    try:
        forgotten = await request.app[STORE].forget_facts(tenant, owner, pattern)
    except StoreUnavailable as exc:
        raise StoreUnavailable("The memory store is unavailable; try again shortly.") from exc
    except OSError as exc:  # the embedded store's file (the path is logged, not told)
        message = (
            f"The facts file could not be written ({type(exc).__name__}); nothing was "
            "forgotten. Make the workspace's memory folder writable and try again."
        )
        raise CtxProxyError(message, code="memory_write_failed") from exc
    return web.json_response({"forgotten": forgotten})
