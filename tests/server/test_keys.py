"""Bearer tokens map to tenants by digest; unknown ones are refused."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from proxy.errors import Unauthorized
from proxy.server.keys import KNOWN_CALLERS, KeyRing, bearer, digest
from proxy.settings import TenantSettings
from tests.server.conftest import MakeProxy
from tests.server.observe.test_metrics import KEYED


def ring(open_tenant: bool = False) -> KeyRing:
    tenants = {"a": TenantSettings(name="a", keys=(digest("key-a"),), workspace=Path("."))}
    if open_tenant:
        tenants["open"] = TenantSettings(name="open", workspace=Path("."))
    return KeyRing(tenants, admin_keys=[digest("admin")])


def test_known_key_maps_to_its_tenant() -> None:
    caller = ring().identify("Bearer key-a")
    assert (caller.tenant, caller.token, caller.admin) == ("a", "key-a", False)


@pytest.mark.parametrize("header", [None, "", "Bearer nope", "Basic key-a", "Bearer "])
def test_unknown_or_missing_bearer_is_401_without_an_open_tenant(header: str | None) -> None:
    with pytest.raises(Unauthorized) as caught:
        ring().identify(header)
    assert caught.value.status == 401 and caught.value.code == "invalid_api_key"
    assert "key-a" not in caught.value.message


def test_open_tenant_takes_any_other_bearer() -> None:
    assert ring(open_tenant=True).identify("Bearer sk-anything").tenant == "open"
    assert ring(open_tenant=True).identify("Bearer key-a").tenant == "a"


def test_admin_key_is_recognised() -> None:
    assert ring(open_tenant=True).identify("Bearer admin").admin


def test_bearer_parsing() -> None:
    assert bearer("bearer tok") == "tok"
    assert bearer("Token tok") is None


def test_remembered_answers_stay_right_and_bounded() -> None:
    keys = ring(open_tenant=True)
    for _ in range(2):  # the second round is answered from memory
        assert keys.identify("Bearer key-a").tenant == "a"
        assert keys.identify("Bearer other").tenant == "open"
        assert keys.identify("Bearer admin").admin
    for index in range(KNOWN_CALLERS + 10):
        keys.identify(f"Bearer client-{index}")
    assert keys.identify("Bearer key-a").tenant == "a"
    assert len(keys._known) <= KNOWN_CALLERS


def test_a_refused_key_is_refused_every_time() -> None:
    keys = ring()
    for _ in range(2):
        with pytest.raises(Unauthorized):
            keys.identify("Bearer nope")


async def test_an_unknown_key_is_refused_before_the_body_is_read(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(tenant_extra=KEYED)
    url = proxy.base_url + "/chat/completions"
    async with aiohttp.ClientSession() as http:
        for key, status in (("sk-wrong", 401), ("sk-good", 400)):
            headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
            async with http.post(url, data=b"{not json", headers=headers) as response:
                assert response.status == status, key


async def test_two_apps_in_one_process_each_use_their_own_keys_and_metrics(
    make_proxy: MakeProxy,
) -> None:
    keyed = await make_proxy(tenant_extra=KEYED)
    open_ = await make_proxy()  # no keys: any bearer is the default tenant
    url = "/chat/completions"
    body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
    async with aiohttp.ClientSession() as http:
        for proxy, key, status in (
            (keyed, "sk-wrong", 401),
            (open_, "sk-wrong", 200),
            (keyed, "sk-good", 200),
            (open_, "sk-good", 200),
        ):
            headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
            async with http.post(proxy.base_url + url, data=body, headers=headers) as response:
                assert response.status == status, (proxy is keyed, key)
                assert response.headers["X-Ctx-Request-Id"]
        metrics = {}
        for name, proxy in (("keyed", keyed), ("open", open_)):
            async with http.get(str(proxy.server.make_url("/metrics"))) as response:
                metrics[name] = await response.text()
    refused = 'ctxproxy_http_requests_total{route="/v1/chat/completions",status="401",tenant="-"}'
    assert refused in metrics["keyed"] and refused not in metrics["open"]
