"""`GET` and `DELETE /v1/ctx/memory`: the caller's tenant's facts (an admin's: any tenant's), and
`ctxproxy memory` through a running proxy (the embedded store's facts live in its process)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from proxy.cli.memory import HttpFacts, ProxyRefused, WrongTenant
from proxy.server.appkeys import STORE
from proxy.server.keys import digest
from tests.redis_server import free_port
from tests.server.conftest import MakeProxy
from tests.server.harness import Proxy

FACTS = ("- 2026-12-01: Sync moves to Wednesdays.", "- 2026-12-02: Rides a gravel bike.")
TENANTS = f"""
keys = ["{digest("team-key")}"]
[tenants.other]
upstream = "fake"
keys = ["{digest("other-key")}"]
[tenants.other.memory]
scope = "session"
"""


@pytest.fixture
async def proxy(make_proxy: MakeProxy) -> AsyncIterator[Proxy]:
    proxy = await make_proxy(tenant_extra=TENANTS, admin_keys=f'["{digest("admin")}"]')
    store = proxy.app[STORE]
    await store.add_facts("default", None, FACTS, max_lines=200)
    await store.add_facts("other", "s1", ["- 2026-12-03: Own fact."], max_lines=200)
    yield proxy


async def call(proxy: Proxy, method: str, key: str, **params: str) -> tuple[int, Any]:
    url = proxy.server.make_url("/v1/ctx/memory")
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        aiohttp.ClientSession() as http,
        http.request(method, url, params=params, headers=headers) as response,
    ):
        return response.status, await response.json()


async def test_a_tenant_sees_its_own_facts_and_settings(proxy: Proxy) -> None:
    status, body = await call(proxy, "GET", "team-key")
    assert status == 200
    assert body == {"tenant": "default", "session": None, "scope": "tenant", "enabled": True,
                    "max_lines": 200, "facts": list(FACTS)}  # fmt: skip
    status, body = await call(proxy, "GET", "team-key", tenant="other")  # not an admin
    assert body["tenant"] == "default"


async def test_a_session_sees_its_own_facts_only_with_session_scope(proxy: Proxy) -> None:
    _, body = await call(proxy, "GET", "other-key", session="s1")
    assert (body["scope"], body["session"], body["facts"]) == (
        "session",
        "s1",
        ["- 2026-12-03: Own fact."],
    )
    _, body = await call(proxy, "GET", "team-key", session="s1")
    assert (body["session"], body["facts"]) == (None, list(FACTS))  # scope tenant


async def test_an_admin_names_any_tenant_and_an_unknown_one_is_404(proxy: Proxy) -> None:
    _, body = await call(proxy, "GET", "admin", tenant="other", session="s1")
    assert body["facts"] == ["- 2026-12-03: Own fact."]
    status, body = await call(proxy, "GET", "admin", tenant="nobody")
    assert status == 404 and body["error"]["code"] == "not_found"


async def test_delete_forgets_what_the_pattern_matches(proxy: Proxy) -> None:
    assert await call(proxy, "DELETE", "team-key", pattern="GRAVEL") == (200, {"forgotten": 1})
    assert (await call(proxy, "GET", "team-key"))[1]["facts"] == [FACTS[0]]
    status, body = await call(proxy, "DELETE", "team-key")
    assert status == 400 and body["error"]["param"] == "pattern"


async def test_a_bad_session_id_or_key_is_refused(proxy: Proxy) -> None:
    status, body = await call(proxy, "GET", "team-key", session="../../etc")
    assert status == 400 and body["error"]["param"] == "session"
    status, _ = await call(proxy, "GET", "wrong-key")
    assert status == 401


async def test_the_cli_source_reads_and_forgets_through_the_proxy(proxy: Proxy) -> None:
    source = HttpFacts(str(proxy.server.make_url("/v1")), key="admin")
    try:
        assert await source.facts("default", None) == FACTS
        assert await source.facts("other", "s1") == ("- 2026-12-03: Own fact.",)
        assert await source.forget("default", None, "wednesdays") == 1
        assert await source.facts("default", None) == (FACTS[1],)
    finally:
        await source.close()
    tenant_key = HttpFacts(str(proxy.server.make_url("")), key="team-key")
    try:
        with pytest.raises(WrongTenant, match="admin key"):
            await tenant_key.facts("other", None)
    finally:
        await tenant_key.close()


async def test_the_view_answers_503_while_redis_is_down(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(store_url=f"redis://127.0.0.1:{free_port()}/0")
    status, body = await call(proxy, "GET", "k")
    assert status == 503 and body["error"]["code"] == "store_unavailable"


async def test_a_forget_the_workspace_cannot_keep_answers_an_error_and_forgets_nothing(
    proxy: Proxy,
) -> None:
    blocker = proxy.workspace / "memory" / "learned.md.tmp"  # the file cannot be replaced
    blocker.mkdir(parents=True)
    status, body = await call(proxy, "DELETE", "team-key", pattern="gravel")
    assert status == 500
    assert body["error"]["code"] == "memory_write_failed"
    assert "nothing was forgotten" in body["error"]["message"]
    assert str(proxy.workspace) not in body["error"]["message"]  # no server path to a tenant
    assert (await call(proxy, "GET", "team-key"))[1]["facts"] == list(FACTS)
    blocker.rmdir()
    assert await call(proxy, "DELETE", "team-key", pattern="gravel") == (200, {"forgotten": 1})
    assert "gravel" not in (proxy.workspace / "memory" / "learned.md").read_text()


async def test_the_cli_says_what_the_proxy_answered_when_a_forget_fails(proxy: Proxy) -> None:
    (proxy.workspace / "memory" / "learned.md.tmp").mkdir(parents=True)
    source = HttpFacts(str(proxy.server.make_url("/v1")), key="team-key")
    try:
        with pytest.raises(ProxyRefused, match=r"500.*nothing was forgotten"):
            await source.forget("default", None, "gravel")
    finally:
        await source.close()
