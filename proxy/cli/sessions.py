"""`ctxproxy sessions list | show ID | watch`: what the proxy is doing to each agent's context.

Two sources: Redis directly (`--redis URL [--prefix P]`, through `RedisStore`, refreshed from the
events stream) and a running proxy (`--url http://… --key TOKEN`, through `GET /v1/ctx/sessions`,
polled). Without either, the config decides: its Redis store, or the proxy it describes.
The sources are `proxy.cli.source`; rendering is `proxy.cli.view` (pure).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path

import aiohttp
from rich.console import Console
from rich.live import Live
from rich.table import Table

from proxy.cli.source import Event, HttpSource, RedisSource, SessionSource, where_to_read
from proxy.cli.view import SessionKey, session_detail_view, sessions_table
from proxy.errors import StoreUnavailable


def remember(last: dict[SessionKey, Event], events: list[Event]) -> None:
    """Keep the newest event of each session (events arrive oldest first)."""
    for event in events:
        last[(event.get("tenant", ""), event.get("session", ""))] = event


async def watch_frames(
    source: SessionSource,
    *,
    limit: int,
    interval_s: float,
    clock: Callable[[], float] = time.time,
    width: int | None = None,
) -> AsyncIterator[Table]:
    """A table now, then one after every batch of new events (or every `interval_s`), each
    within `width` columns."""
    last_events: dict[SessionKey, Event] = {}
    last_id, found = await source.events("", interval_s)
    while True:
        remember(last_events, found)
        rows = await source.sessions(limit)
        now = clock()
        yield sessions_table(rows, last_events=last_events, now=now, title=_title(now), width=width)
        last_id, found = await source.events(last_id, interval_s)


def _title(now: float) -> str:
    return f"ctxproxy sessions — {time.strftime('%H:%M:%S', time.localtime(now))} (Ctrl-C quits)"


async def run_list(source: SessionSource, console: Console, *, limit: int) -> int:
    last_events: dict[SessionKey, Event] = {}
    remember(last_events, (await source.events("", 0))[1])
    rows = await source.sessions(limit)
    table = sessions_table(rows, last_events=last_events, now=time.time(), width=console.width)
    console.print(table)
    return 0


async def run_show(
    source: SessionSource, console: Console, *, session: str, tenant: str | None
) -> int:
    detail = await source.detail(session, tenant)
    if detail is None:
        console.print(f"No session {session!r}.")
        return 1
    console.print(session_detail_view(detail, now=time.time()))
    return 0


async def run_watch(
    source: SessionSource, console: Console, *, limit: int, interval_s: float
) -> int:
    frames = watch_frames(source, limit=limit, interval_s=interval_s, width=console.width)
    if not console.is_terminal:  # a pipe or a log: one table after another
        async for frame in frames:
            console.print(frame)
    with Live(console=console, auto_refresh=False) as live:
        async for frame in frames:
            live.update(frame, refresh=True)
    return 0


def open_source(args: argparse.Namespace, *, environ: Mapping[str, str]) -> SessionSource:
    """Where the sessions are read (`where_to_read`)."""
    place = where_to_read(args, environ=environ)
    if place.redis:
        return RedisSource(place.url, prefix=place.prefix)
    return HttpSource(place.url, key=place.key)


def run_sessions(args: argparse.Namespace) -> int:
    async def main() -> int:
        source = open_source(args, environ=os.environ)
        console = Console()
        try:
            if args.sessions_command == "show":
                return await run_show(source, console, session=args.id, tenant=args.tenant)
            if args.sessions_command == "watch":
                return await run_watch(source, console, limit=args.limit, interval_s=args.interval)
            return await run_list(source, console, limit=args.limit)
        finally:
            await source.close()

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        return 0
    except (StoreUnavailable, aiohttp.ClientError, OSError) as exc:
        print(
            f"ctxproxy sessions: cannot read sessions: {type(exc).__name__}: {exc}", file=sys.stderr
        )
        return 1


def add_sessions_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument(
        "--redis",
        help="read Redis directly, e.g. redis://127.0.0.1:6379/0, redis+cluster://h:7000,h:7001 "
        "or redis+sentinel://h:26379/mymaster",
    )
    where.add_argument("--prefix", help="Redis key prefix (default: ctxproxy:)")
    where.add_argument("--url", help="a running proxy, e.g. http://127.0.0.1:8787")
    where.add_argument("--key", help="bearer token for --url (default: $CTXPROXY_KEY)")
    where.add_argument("--config", type=Path, help="config whose store or server to use")
    where.add_argument(
        "--limit", type=int, default=50, help="at most this many sessions, latest first (50)"
    )
    sessions = commands.add_parser("sessions", help="see sessions: list, show ID, watch")
    sub = sessions.add_subparsers(dest="sessions_command", required=True)
    sub.add_parser("list", parents=[where], help="a table of recent sessions")
    show = sub.add_parser("show", parents=[where], help="one session: state, summaries, archive")
    show.add_argument("id", help="the session id (as in the list)")
    show.add_argument("--tenant", help="the session's tenant (default: found by id)")
    watch = sub.add_parser("watch", parents=[where], help="a live table, refreshed by events")
    watch.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes")
    sessions.set_defaults(run=run_sessions)
