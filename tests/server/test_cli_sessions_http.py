"""`ctxproxy sessions list | show` through a running proxy's `/v1/ctx/sessions` and
`/v1/ctx/events` views."""

from __future__ import annotations

import asyncio

import aiohttp
from rich.console import Console

from proxy.cli.sessions import run_list, run_show
from proxy.cli.source import HttpSource
from proxy.server.appkeys import LIFECYCLE
from proxy.server.keys import digest
from tests.server.conftest import MakeProxy
from tests.server.harness import Proxy


async def test_list_and_show_through_a_running_proxy(proxy: Proxy) -> None:
    async with proxy.client() as client:
        raw = await client.chat.completions.with_raw_response.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
        )
    await asyncio.gather(*list(proxy.app[LIFECYCLE].tasks))
    session = raw.headers["x-ctx-session"]
    source = HttpSource(str(proxy.server.make_url("/v1")), key="sk-client")
    console = Console(record=True, width=200, force_terminal=False, color_system=None)
    await run_list(source, console, limit=10)
    assert await run_show(source, console, session=session, tenant=None) == 0
    assert await run_show(source, console, session="unknown", tenant=None) == 1
    await source.close()
    text = console.export_text()
    assert session in text and "gpt-4o" in text and "Stored summaries: 0" in text


async def test_an_admin_key_of_no_tenant_shows_a_session_without_naming_its_tenant(
    make_proxy: MakeProxy,
) -> None:
    proxy = await make_proxy(
        tenant_extra=f'keys = ["{digest("sk-tenant")}"]\n',
        admin_keys=f'["{digest("sk-admin")}"]',
    )
    async with proxy.client(api_key="sk-tenant") as client:
        await client.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": "hi"}],
            extra_headers={"X-Ctx-Session": "seen-by-admin"},
        )
    await asyncio.gather(*list(proxy.app[LIFECYCLE].tasks))
    source = HttpSource(str(proxy.server.make_url("/v1")), key="sk-admin")
    console = Console(record=True, width=200, force_terminal=False, color_system=None)
    assert await run_show(source, console, session="seen-by-admin", tenant=None) == 0
    assert await run_show(source, console, session="unknown", tenant=None) == 1
    await source.close()
    assert "seen-by-admin" in console.export_text()


async def test_the_last_event_says_what_happened_over_a_running_proxy(proxy: Proxy) -> None:
    """Through the proxy's events view, as the Redis source reads the events stream."""
    async with proxy.client() as client:
        raw = await client.chat.completions.with_raw_response.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
        )
    await asyncio.gather(*list(proxy.app[LIFECYCLE].tasks))
    session = raw.headers["x-ctx-session"]
    source = HttpSource(str(proxy.server.make_url("/v1")), key="sk-client")
    console = Console(record=True, width=200, force_terminal=False, color_system=None)
    await run_list(source, console, limit=10)
    last_id, events = await source.events("", 0)
    assert [e["session"] for e in events] == [session]
    assert await source.events(last_id, 0) == (last_id, [])  # nothing new
    await source.close()
    row = next(line for line in console.export_text().splitlines() if session in line)
    assert "200 ok · " in row and " ms · " in row and "s ago" in row


async def test_the_events_view_refuses_a_bad_id(proxy: Proxy) -> None:
    url = str(proxy.server.make_url("/v1/ctx/events"))
    headers = {"Authorization": "Bearer k"}
    async with (
        aiohttp.ClientSession() as http,
        http.get(url, params={"after": "x"}, headers=headers) as r,
    ):
        assert r.status == 400 and (await r.json())["error"]["param"] == "after"
