"""1,000 generated forged, tampered, cross-tenant, other-server and expired compaction items sent
through `POST /v1/responses`: none accepted — each a 400 that says why, nothing sent upstream —
while the genuine item expands to its summary."""

from __future__ import annotations

import base64
import json
import random
from typing import Any

import aiohttp

from proxy.inbound.compaction_handle import PREFIX, sign_handle
from proxy.server.appkeys import STORE
from proxy.server.keys import digest
from tests.server.conftest import MakeProxy
from tests.server.harness import Proxy

JSON = dict[str, Any]
SECRET = b"known-test-secret-0123456789abcdef"
OTHER = f'\n[tenants.other]\nupstream = "fake"\nkeys = ["{digest("sk-other")}"]\n'
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


async def compacted(http: aiohttp.ClientSession, proxy: Proxy, key: str) -> str:
    """A genuine handle, issued by the proxy to `key`'s tenant."""
    body = {"model": "gpt-5", "input": [{"role": "user", "content": "remember 8421"}]}
    async with http.post(
        proxy.server.make_url("/v1/responses/compact"),
        json=body,
        headers={"Authorization": f"Bearer {key}"},
    ) as answer:
        assert answer.status == 200
        found: JSON = await answer.json()
    handle: str = found["output"][0]["encrypted_content"]
    return handle


def attacks(genuine: str, foreign: str, rng: random.Random) -> list[tuple[str, str]]:
    """1,000 (kind, token) attacks on `genuine` (tenant default's) with `foreign` (another
    tenant's genuine handle)."""
    payload = json.loads(_b64(genuine.split(".")[1]))
    out: list[tuple[str, str]] = []
    for _ in range(250):
        parts = ["".join(rng.choices(ALPHABET, k=rng.randint(0, 90))) for _ in range(2)]
        out.append(("forged", PREFIX + ".".join(parts)))
    while len(out) < 500:
        at = rng.randrange(len(PREFIX), len(genuine))
        tampered = genuine[:at] + rng.choice(ALPHABET + ".") + genuine[at + 1 :]
        if tampered != genuine:
            out.append(("tampered", tampered))
    out += [("other tenant", foreign)] * 100
    for n in range(100):
        claims = {"tenant": f"tenant{n}", "secret": SECRET}
        out.append(("other tenant", _signed(payload, expires_at=4e9, **claims)))
    for _ in range(150):
        expired = rng.uniform(1e9, 1.7e9)
        out.append(
            ("expired", _signed(payload, tenant="default", secret=SECRET, expires_at=expired))
        )
    for _ in range(150):
        secret = rng.randbytes(32)
        out.append(
            ("other server", _signed(payload, tenant="default", secret=secret, expires_at=4e9))
        )
    return out


def _signed(payload: JSON, *, tenant: str, secret: bytes, expires_at: float) -> str:
    return sign_handle(
        secret=secret,
        tenant=tenant,
        prefix_hash=payload["p"],
        summary_id=payload["s"],
        expires_at=expires_at,
    )


def _b64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


async def test_no_forged_tampered_foreign_or_expired_compaction_item_is_accepted(
    make_proxy: MakeProxy,
) -> None:
    proxy = await make_proxy(workspace=False, tenant_extra=OTHER)
    await proxy.app[STORE].handle_secret(SECRET)  # the secret the proxy will sign with
    url = proxy.server.make_url("/v1/responses")
    async with aiohttp.ClientSession() as http:
        genuine = await compacted(http, proxy, "sk-client")
        foreign = await compacted(http, proxy, "sk-other")
        before = len(proxy.fake.chat)
        accepted: list[str] = []
        reasons: dict[str, set[str]] = {}
        for kind, token in attacks(genuine, foreign, random.Random(21)):
            item = {"type": "compaction", "encrypted_content": token}
            body = {"model": "gpt-5", "input": [item, {"role": "user", "content": "go on"}]}
            async with http.post(url, json=body, headers={"Authorization": "Bearer k"}) as answer:
                found = await answer.json()
            if answer.status != 400 or found["error"]["code"] != "invalid_encrypted_content":
                accepted.append(f"{kind}: {answer.status} {token}")
                continue
            reasons.setdefault(kind, set()).add(found["error"]["message"])
        assert accepted == []
        assert len(proxy.fake.chat) == before  # nothing refused went upstream
        item = {"type": "compaction", "encrypted_content": genuine}
        body = {"model": "gpt-5", "input": [item, {"role": "user", "content": "go on"}]}
        async with http.post(url, json=body, headers={"Authorization": "Bearer k"}) as answer:
            assert answer.status == 200
    assert "SUMMARY OF EARLIER TURNS" in json.dumps(proxy.fake.chat[-1].body)
    assert any("another tenant" in r for r in reasons["other tenant"])
    assert any("expired" in r for r in reasons["expired"])
    assert any("forged or tampered" in r for r in reasons["other server"])
