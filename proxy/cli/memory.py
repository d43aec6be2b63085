"""`ctxproxy memory show | forget PATTERN | export`: the facts compactions learned (issue 19).

Read where `ctxproxy sessions` reads: Redis directly (`--redis URL [--prefix P]`, through
`RedisStore`), or a running proxy (`--url http://… --key TOKEN`, its `GET` and `DELETE
/v1/ctx/memory`); without either, the config decides (its Redis store, or the proxy it
describes: the embedded store's facts live in that process). `--session S` names what session
S sees: its own facts when the tenant's memory scope is `session` (by the config; with
`--redis` alone, always its own), else the tenant's. `export` prints the facts as Markdown lines
to append to the workspace's `memory/MEMORY.md`; nothing else goes to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import aiohttp

from proxy.adapters.redis.store import RedisStore
from proxy.adapters.upstream.transport import unreachable
from proxy.cli.source import where_to_read
from proxy.errors import StoreUnavailable
from proxy.memory.index import export_markdown
from proxy.settings import Settings


class FactSource(Protocol):
    async def facts(self, tenant: str, session: str | None) -> tuple[str, ...]: ...

    async def forget(self, tenant: str, session: str | None, pattern: str) -> int: ...

    async def close(self) -> None: ...


class RedisFacts:
    """The store's facts, directly; `settings` (when a config is known) tells each tenant's
    scope."""

    def __init__(self, url: str, *, prefix: str, settings: Settings | None = None) -> None:
        self._store = RedisStore(url, key_prefix=prefix, op_timeout_s=5.0)
        self._settings = settings

    def _owner(self, tenant: str, session: str | None) -> str | None:
        found = self._settings.tenants.get(tenant) if self._settings else None
        if session is None or found is None:
            return session
        return found.memory.owner(session)

    async def facts(self, tenant: str, session: str | None) -> tuple[str, ...]:
        return await self._store.read_facts(tenant, self._owner(tenant, session))

    async def forget(self, tenant: str, session: str | None, pattern: str) -> int:
        return await self._store.forget_facts(tenant, self._owner(tenant, session), pattern)

    async def close(self) -> None:
        await self._store.close()


class WrongTenant(Exception):
    """The proxy answered for another tenant than asked: the key is not an admin key."""


class ProxyRefused(Exception):
    """The proxy answered with an error: its status and message."""


class HttpFacts:
    """A running proxy's `/v1/ctx/memory`; `key` is a tenant or admin bearer token."""

    def __init__(self, url: str, *, key: str | None) -> None:
        self._url = url.rstrip("/").removesuffix("/v1") + "/v1/ctx/memory"
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = aiohttp.ClientSession(headers=headers, trust_env=False)

    async def _call(self, method: str, tenant: str, params: dict[str, str]) -> Any:
        try:
            async with self._http.request(method, self._url, params=params) as response:
                if response.status >= 400:
                    said = _message(await response.text())
                    raise ProxyRefused(f"the proxy answered {response.status}: {said}")
                found = await response.json()
        except aiohttp.ClientConnectorError as exc:  # named by its address, not aiohttp's text
            raise ConnectionError(unreachable(self._url, exc, what="proxy")) from exc
        if found.get("tenant", tenant) != tenant:
            raise WrongTenant(f"the key is tenant {found['tenant']!r}'s; use an admin key")
        return found

    @staticmethod
    def _params(tenant: str, session: str | None, **more: str) -> dict[str, str]:
        return {"tenant": tenant, **({"session": session} if session else {}), **more}

    async def facts(self, tenant: str, session: str | None) -> tuple[str, ...]:
        found = await self._call("GET", tenant, self._params(tenant, session))
        return tuple(found.get("facts", ()))

    async def forget(self, tenant: str, session: str | None, pattern: str) -> int:
        params = self._params(tenant, session, pattern=pattern)
        return int((await self._call("DELETE", tenant, params)).get("forgotten", 0))

    async def close(self) -> None:
        await self._http.close()


def _message(text: str) -> str:
    """The message of an error body in the OpenAI shape, else the body as it came."""
    try:
        error = json.loads(text).get("error")
    except (ValueError, AttributeError):
        return text.strip()[:200]
    return str(error.get("message")) if isinstance(error, dict) else text.strip()[:200]


def open_facts(args: argparse.Namespace, *, environ: Mapping[str, str]) -> FactSource:
    """Where the facts are read (`proxy.cli.source.where_to_read`, as `ctxproxy sessions`)."""
    place = where_to_read(args, environ=environ)
    if place.redis:
        return RedisFacts(place.url, prefix=place.prefix, settings=place.settings)
    return HttpFacts(place.url, key=place.key)


async def run_command(source: FactSource, args: argparse.Namespace) -> int:
    tenant, session = args.tenant, args.session
    if args.memory_command == "forget":
        forgotten = await source.forget(tenant, session, args.pattern)
        print(f"forgot {forgotten} fact{'s' * (forgotten != 1)} of tenant {tenant}")
        return 0 if forgotten else 1
    facts = await source.facts(tenant, session)
    if args.memory_command == "export":
        sys.stdout.write(export_markdown(facts))
        return 0
    whose = f"tenant {tenant}" + (f", as session {session} sees them" if session else "")
    print(f"{len(facts)} learned fact{'s' * (len(facts) != 1)} of {whose} (oldest first)")
    for line in facts:
        print(line)
    return 0


def run_memory(args: argparse.Namespace) -> int:
    if args.memory_command == "forget" and not args.pattern.strip():
        print("ctxproxy memory forget: PATTERN must not be empty", file=sys.stderr)
        return 2

    async def main() -> int:
        source = open_facts(args, environ=os.environ)
        try:
            return await run_command(source, args)
        finally:
            await source.close()

    try:
        return asyncio.run(main())
    except (WrongTenant, ProxyRefused) as exc:
        print(f"ctxproxy memory: {exc}", file=sys.stderr)
        return 2
    except (StoreUnavailable, aiohttp.ClientError, OSError) as exc:
        print(f"ctxproxy memory: cannot reach the facts: {type(exc).__name__}: {exc}",
              file=sys.stderr)  # fmt: skip
        return 1


def add_memory_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument("--tenant", required=True, help="whose facts")
    where.add_argument("--session", help="what this session sees (its own, with scope session)")
    where.add_argument("--redis", help="read Redis directly, e.g. redis://127.0.0.1:6379/0")
    where.add_argument("--prefix", help="Redis key prefix (default: ctxproxy:)")
    where.add_argument("--url", help="a running proxy, e.g. http://127.0.0.1:8787")
    where.add_argument("--key", help="bearer token for --url (default: $CTXPROXY_KEY)")
    where.add_argument("--config", type=Path, help="config whose store or server to use")
    memory = commands.add_parser(
        "memory", help="facts learned at compactions: show, forget, export"
    )
    sub = memory.add_subparsers(dest="memory_command", required=True)
    sub.add_parser("show", parents=[where], help="the facts, oldest first")
    forget = sub.add_parser("forget", parents=[where], help="remove the facts PATTERN matches")
    forget.add_argument("pattern", help="text the facts to forget hold (any case)")
    sub.add_parser("export", parents=[where], help="Markdown lines for memory/MEMORY.md")
    memory.set_defaults(run=run_memory)
