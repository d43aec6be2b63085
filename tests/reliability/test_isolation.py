"""Tenants share nothing: state, summaries, outputs, sessions views and upstream credentials."""

from __future__ import annotations

import random
import re
from typing import Any

import aiohttp
import openai
import orjson
import pytest

from proxy.server.keys import digest
from tests.fakes.openai_upstream import FakeOpenAI, Reply
from tests.redis_server import RedisServer
from tests.reliability.conftest import MakeRig
from tests.reliability.support import UPSTREAM_KEY, Rig, auth, history

ALPHA, BETA, ADMIN = "ctx-alpha-Hn4Rk8Wm2Qz6", "ctx-beta-Jc5Tv9Ls3Px7", "ctx-admin-Bd8Yf2Gw6Nk4"
OUTPUT_ID = re.compile(r'<persisted-output id="([0-9a-f]{32})"')
COMPACT = "[tenants.{name}.compact]\nthreshold_tokens = 1000\n"
BUDGETS = "[tenants.{name}.budgets]\npersist_over_chars = 1000\n"
TENANTS = (
    f'keys = ["{digest(ALPHA)}"]\n'
    + COMPACT.format(name="default") + BUDGETS.format(name="default")
    + f'[tenants.beta]\nkeys = ["{digest(BETA)}"]\nworkspace = "ws"\nupstream = "fake"\n'
    + "forward_client_key = false\n"
    + COMPACT.format(name="beta") + BUDGETS.format(name="beta")
)  # fmt: skip


@pytest.fixture
async def rig(make_rig: MakeRig, redis_server: RedisServer, key_prefix: str) -> Rig:
    return await make_rig(
        store_url=redis_server.url, key_prefix=key_prefix, tenant_extra=TENANTS,
        admin_keys=f'["{digest(ADMIN)}"]',
    )  # fmt: skip


def _with_tool_result(text: str) -> list[dict[str, Any]]:
    call = {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
    return [
        {"role": "user", "content": "read it"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": text},
        {"role": "user", "content": "thanks"},
    ]


async def _chat(rig: Rig, token: str, messages: list[dict[str, Any]], session: str) -> int:
    headers = {**auth(token), "X-Ctx-Session": session}
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            rig.url("/v1/chat/completions"),
            json={"model": "gpt-4o", "messages": messages},
            headers=headers,
        ) as response,
    ):
        await response.read()
        return response.status


async def _get(rig: Rig, path: str, token: str | None) -> tuple[int, Any]:
    headers = auth(token) if token else {}
    async with aiohttp.ClientSession() as http, http.get(rig.url(path), headers=headers) as r:
        body = await r.read()
        return r.status, body


async def test_same_session_and_messages_keep_separate_state_and_credentials(rig: Rig) -> None:
    messages = history(3)
    assert await _chat(rig, ALPHA, messages, "same") == 200
    assert await _chat(rig, BETA, messages, "same") == 200
    await rig.settled()
    (alpha,), (beta,) = await rig.sessions("default"), await rig.sessions("beta")
    assert (alpha["tenant"], beta["tenant"]) == ("default", "beta")
    assert alpha["requests"] == beta["requests"] == "1"
    sent = [r.headers["Authorization"] for r in rig.fake.chat]
    assert sent == [f"Bearer {ALPHA}", f"Bearer {UPSTREAM_KEY}"]


async def test_a_summary_of_one_tenant_never_reaches_the_other(rig: Rig) -> None:
    from tests.fakes.openai_upstream import Reply

    messages = history(6)
    grown = [*messages, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "on"}]
    rig.fake.script.append(Reply(prompt_tokens=5000))
    assert await _chat(rig, ALPHA, messages, "same") == 200
    await rig.settled()
    assert await _chat(rig, ALPHA, grown, "same") == 200
    assert len(rig.fake.summary_requests) == 1
    assert await _chat(rig, BETA, grown, "same") == 200
    sent = rig.fake.chat[-1]
    assert sent.headers["Authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert "[Conversation summary]" not in str(sent.body["messages"])
    assert len(rig.fake.summary_requests) == 1


async def test_outputs_and_sessions_of_another_tenant_are_404(rig: Rig) -> None:
    assert await _chat(rig, ALPHA, _with_tool_result("alpha " * 400), "alpha-only") == 200
    (alpha_id,) = OUTPUT_ID.findall(str(rig.fake.chat[-1].body["messages"]))
    await rig.settled()
    assert (await _get(rig, f"/v1/ctx/outputs/{alpha_id}", ALPHA))[0] == 200
    assert (await _get(rig, f"/v1/ctx/outputs/{alpha_id}", BETA))[0] == 404
    assert (await _get(rig, f"/v1/ctx/outputs/{alpha_id}", None))[0] == 401
    assert (await _get(rig, "/v1/ctx/sessions/alpha-only", BETA))[0] == 404
    assert (await _get(rig, "/v1/ctx/sessions/alpha-only?tenant=default", BETA))[0] == 404
    assert (await _get(rig, "/v1/ctx/sessions/alpha-only?tenant=default", ADMIN))[0] == 200
    status, listed = await _get(rig, "/v1/ctx/sessions?all=1", BETA)
    assert status == 200 and b"alpha-only" not in listed
    status, listed = await _get(rig, "/v1/ctx/sessions?all=1", ADMIN)
    assert status == 200 and b"alpha-only" in listed
    status, events = await _get(rig, "/v1/ctx/events?all=1", BETA)
    assert status == 200 and b"alpha-only" not in events
    status, events = await _get(rig, "/v1/ctx/events?all=1", ADMIN)
    assert status == 200 and b"alpha-only" in events


async def test_a_thousand_random_reads_never_cross_tenants(rig: Rig) -> None:
    owned: dict[str, tuple[str, str]] = {}
    for token, name in ((ALPHA, "a"), (BETA, "b")):
        for index in range(3):
            text = f"{name}-secret-{index} " * 200
            assert await _chat(rig, token, _with_tool_result(text), f"{name}-s{index}") == 200
            (output_id,) = OUTPUT_ID.findall(str(rig.fake.chat[-1].body["messages"]))
            owned[output_id] = (token, f"{name}-secret-{index}")
            owned[f"{name}-s{index}"] = (token, f"{name}-s{index}")
    await rig.settled()
    rng = random.Random(6)
    ids = [*owned, "nope", "..", "a-s0%2F..%2Fb-s0", "x" * 200]
    crossed = 0
    async with aiohttp.ClientSession() as http:
        for _ in range(1000):
            token = rng.choice([ALPHA, BETA, None, "ctx-wrong"])
            target = rng.choice(ids)
            path = rng.choice(["/v1/ctx/outputs/", "/v1/ctx/sessions/"]) + target
            path += rng.choice(["", "?tenant=default", "?tenant=beta", "?all=1"])
            headers = auth(token) if token else {}
            async with http.get(rig.url(path), headers=headers) as response:
                body = await response.text()
            if response.status == 200:
                owner, marker = owned[target]
                crossed += owner != token or marker not in body
                other = "b-" if token == ALPHA else "a-"
                crossed += f"{other}secret" in body or f'"{other}s' in body
            else:
                assert response.status in (401, 404), (path, response.status)
    assert crossed == 0


async def test_cookies_an_upstream_sets_are_never_sent_back(
    make_rig: MakeRig, aiohttp_server: Any
) -> None:
    """The proxy is no browser: a `Set-Cookie` reaches the client that got it, and no later
    request upstream (another tenant's above all) carries it. A named host, not an IP: a cookie
    jar ignores cookies of IP addresses."""
    fake = FakeOpenAI()
    fake.default = Reply(headers={"Set-Cookie": "track=alpha-only; Path=/"})
    upstream = await aiohttp_server(fake.app())
    rig = await make_rig(
        fake=fake, upstream_url=f"http://localhost:{upstream.port}", tenant_extra=TENANTS
    )
    async with aiohttp.ClientSession() as http:
        for token in (ALPHA, BETA, ALPHA):
            async with http.post(
                rig.url("/v1/chat/completions"),
                json={"model": "gpt-4o", "messages": history(1)},
                headers=auth(token),
            ) as response:
                assert response.status == 200
                assert "track=alpha-only" in response.headers.get("Set-Cookie", "")
    assert len(fake.chat) == 3
    assert [r.headers.get("Cookie") for r in fake.chat] == [None, None, None]


async def test_an_admin_key_on_a_model_route_is_403_and_reaches_no_upstream(rig: Rig) -> None:
    async with rig.client(api_key=ADMIN) as client:
        with pytest.raises(openai.PermissionDeniedError) as chat_refused:
            await client.chat.completions.create(model="gpt-4o", messages=history(1))  # type: ignore[arg-type]
        with pytest.raises(openai.PermissionDeniedError) as models_refused:
            await client.models.list()
    for refused in (chat_refused, models_refused):
        assert refused.value.status_code == 403
        assert refused.value.code == "admin_key_on_model_route"
        assert "admin keys are for the /v1/ctx admin routes" in refused.value.message
    assert rig.fake.received == []


async def test_the_admin_sessions_list_is_one_tenant_unless_all_is_asked(rig: Rig) -> None:
    assert await _chat(rig, ALPHA, history(1), "alpha-s") == 200
    assert await _chat(rig, BETA, history(1), "beta-s") == 200
    await rig.settled()

    async def listed(query: str, token: str) -> tuple[int, set[str]]:
        status, body = await _get(rig, "/v1/ctx/sessions" + query, token)
        rows = orjson.loads(body).get("sessions", []) if status == 200 else []
        return status, {row["session"] for row in rows}

    assert await listed("?all=1", ADMIN) == (200, {"alpha-s", "beta-s"})
    assert await listed("?tenant=beta", ADMIN) == (200, {"beta-s"})
    assert await listed("?tenant=default", ADMIN) == (200, {"alpha-s"})
    status, _ = await listed("", ADMIN)  # an admin key of no tenant: which tenant is unsaid
    assert status == 400
    assert await listed("?tenant=default", BETA) == (200, {"beta-s"})
    assert await listed("?all=1", BETA) == (200, {"beta-s"})
