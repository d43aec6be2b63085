"""Where `ctxproxy sessions` reads from: the `SessionSource` port and its two adapters.

`RedisSource` reads the store directly through `RedisStore` (sessions, one session's detail, and
the events stream, caught up to `CATCH_UP_PAGES` pages at the start); `HttpSource` asks a running
proxy's admin views (`GET /v1/ctx/sessions[/{id}]`, `GET /v1/ctx/events`), catching up the same
way; there its `events` waits, then asks, and the caller polls. Errors pass through as their
transport raised them (`StoreUnavailable`, `aiohttp.ClientError`, `OSError`): the CLI reports
them. `close` releases the connection.

`where_to_read` picks where a command reads (`ctxproxy sessions`, and `ctxproxy memory` with its
own pair of adapters): `--redis`, else `--url`, else what the config describes.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

import aiohttp

from proxy.adapters.redis.store import RedisStore
from proxy.adapters.upstream.transport import unreachable
from proxy.config import cli_key, load_settings
from proxy.settings import Settings

Event = dict[str, str]
CATCH_UP_PAGES = 20


class Place(NamedTuple):
    """Where a command reads: a Redis store (`redis`: its `prefix`, and the `settings` when the
    config named it), else a running proxy's admin views (with the admin `key`)."""

    url: str
    redis: bool
    prefix: str = ""
    settings: Settings | None = None
    key: str | None = None


def where_to_read(args: argparse.Namespace, *, environ: Mapping[str, str]) -> Place:
    """`--redis`, else `--url`, else the config's: its Redis store, or with an embedded store the
    running proxy it describes (a wildcard host asked at 127.0.0.1). `environ` gives the config
    and `CTXPROXY_KEY` (see `proxy.config`); the command line passes `os.environ`."""
    if args.redis:
        return Place(args.redis, redis=True, prefix=args.prefix or "ctxproxy:")
    if args.url:
        return Place(args.url, redis=False, key=cli_key(args.key, environ=environ))
    settings = load_settings(args.config, environ=environ)
    if not settings.store.url.startswith("memory://"):
        prefix = args.prefix or settings.store.key_prefix
        return Place(settings.store.url, redis=True, prefix=prefix, settings=settings)
    host = "127.0.0.1" if settings.server.host in ("0.0.0.0", "::") else settings.server.host
    url = f"http://{host}:{settings.server.port}"
    return Place(url, redis=False, key=cli_key(args.key, environ=environ))


class SessionSource(Protocol):
    async def sessions(self, limit: int) -> list[dict[str, str]]: ...

    async def detail(self, session: str, tenant: str | None) -> dict[str, Any] | None: ...

    async def events(self, last_id: str, wait_s: float) -> tuple[str, list[Event]]:
        """Events after `last_id` ("" = catch up on the stream so far) and the new last id."""
        ...

    async def close(self) -> None: ...


class RedisSource:
    def __init__(self, url: str, *, prefix: str) -> None:
        self.store = RedisStore(url, key_prefix=prefix, op_timeout_s=5.0)

    async def sessions(self, limit: int) -> list[dict[str, str]]:
        return await self.store.list_sessions(None, limit=limit)

    async def detail(self, session: str, tenant: str | None) -> dict[str, Any] | None:
        if tenant is None:  # find the tenant of the most recent session with this id
            rows = await self.store.list_sessions(None, limit=1000)
            tenant = next((r["tenant"] for r in rows if r.get("session") == session), "default")
        return await self.store.session_detail(tenant, session)

    async def events(self, last_id: str, wait_s: float) -> tuple[str, list[Event]]:
        if last_id:
            found = await self.store.read_events(last_id, block_ms=int(wait_s * 1000), count=500)
            return (found[-1][0] if found else last_id), [e for _, e in found]
        last, seen = "0-0", []
        for _ in range(CATCH_UP_PAGES):
            page = await self.store.read_events(last, block_ms=0, count=1000)
            if not page:
                break
            last = page[-1][0]
            seen += [e for _, e in page]
        return last, seen

    async def close(self) -> None:
        await self.store.close()


class HttpSource:
    """A running proxy's admin views; `key` is a tenant or admin bearer token."""

    def __init__(self, url: str, *, key: str | None) -> None:
        self._url = url.rstrip("/").removesuffix("/v1")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = aiohttp.ClientSession(headers=headers, trust_env=False)

    async def _get(self, path: str, params: dict[str, str]) -> Any:
        try:
            async with self._http.get(self._url + path, params=params) as response:
                if response.status == 404:
                    return None
                response.raise_for_status()
                return await response.json()
        except aiohttp.ClientConnectorError as exc:  # named by its address, not aiohttp's text
            raise ConnectionError(unreachable(self._url, exc, what="proxy")) from exc

    async def sessions(self, limit: int) -> list[dict[str, str]]:
        found = await self._get("/v1/ctx/sessions", {"all": "1", "limit": str(limit)})
        return list((found or {}).get("sessions", []))

    async def detail(self, session: str, tenant: str | None) -> dict[str, Any] | None:
        if tenant is None:  # the tenant of the most recent session with this id (an admin key
            rows = await self.sessions(1000)  # must name one; a tenant key sees only its own)
            tenant = next((r["tenant"] for r in rows if r.get("session") == session), None)
            if tenant is None:
                return None
        params = {"tenant": tenant}
        found: dict[str, Any] | None = await self._get(f"/v1/ctx/sessions/{session}", params)
        return found

    async def events(self, last_id: str, wait_s: float) -> tuple[str, list[Event]]:
        if last_id:  # the proxy's events view never blocks: wait here, then ask
            await asyncio.sleep(wait_s)
            return await self._events_after(last_id)
        last, seen = "0-0", []
        for _ in range(CATCH_UP_PAGES):
            after, page = await self._events_after(last)
            seen += page
            if after == last:
                break
            last = after
        return last, seen

    async def _events_after(self, last_id: str) -> tuple[str, list[Event]]:
        params = {"after": last_id, "limit": "1000", "all": "1"}
        found = await self._get("/v1/ctx/events", params)
        if not isinstance(found, dict):  # a proxy without the view: no events, only the table
            return last_id, []
        return str(found.get("last_id") or last_id), list(found.get("events", []))

    async def close(self) -> None:
        await self._http.close()
