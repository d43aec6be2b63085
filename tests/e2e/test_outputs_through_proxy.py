"""A tool result over 50,000 characters leaves the proxy as a `<persisted-output>` block and can
be fetched back whole with `GET /v1/ctx/outputs/{id}`, by its own tenant only."""

from __future__ import annotations

import hashlib
import re

import aiohttp

from tests.e2e.agent import Agent, assert_all_valid, tool_call
from tests.e2e.session import answer, result, user
from tests.server.conftest import MakeProxy

OTHER_TENANT = f"""
[tenants.other]
keys = ["{hashlib.sha256(b"sk-other").hexdigest()}"]
workspace = "ws"
upstream = "fake"
"""
BIG = "".join(f"line {i:06d}: some build output\n" for i in range(2_000))


async def test_persisted_output_is_fetched_back_by_its_tenant_only(make_proxy: MakeProxy) -> None:
    proxy = await make_proxy(tenant_extra=OTHER_TENANT)
    agent = Agent(proxy.client(), proxy.app)
    agent.add(user("Build it."))
    proxy.fake.script.append(answer(tool_call("b1", cmd="make"), prompt_tokens=100))
    await agent.turn()
    agent.add(result("b1", BIG))
    await agent.turn()
    sent = proxy.fake.chat[-1].body["messages"][-1]["content"]
    found = re.match(r'<persisted-output id="([0-9a-f]{32})" chars="(\d+)">', sent)
    assert len(BIG) > 50_000 and found and int(found[2]) == len(BIG)
    assert len(sent) < 3_000 and BIG[:1_000] in sent
    url = proxy.server.make_url(f"/v1/ctx/outputs/{found[1]}")
    async with aiohttp.ClientSession() as http:
        async with http.get(url, headers={"Authorization": "Bearer sk-client"}) as own:
            assert own.status == 200 and await own.text() == BIG
        async with http.get(url, headers={"Authorization": "Bearer sk-other"}) as other:
            assert other.status == 404
    assert_all_valid(r.body for r in proxy.fake.received)
