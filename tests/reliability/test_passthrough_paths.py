"""The pass-through never takes a request outside the upstream's base path, however it is spelled.

Requests go as raw bytes (as `curl --path-as-is` sends them) to a raw upstream that records the
request target exactly as it arrived.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest

from tests.reliability.conftest import MakeRig
from tests.reliability.rawhttp import RecordingUpstream
from tests.reliability.support import UPSTREAM_KEY, Rig, assert_openai_error

BASE = "/base/v1"
ESCAPES = [
    "/v1/../../admin",
    "/v1/../admin",
    "/v1/models/../../../admin",
    "/v1/./admin",
    "/v1/%2e%2e/admin",
    "/v1/%2E%2E/admin",
    "/v1/.%2e/admin",
    "/v1/%2e./admin",
    "/v1/..%2fadmin",
    "/v1/..%2Fadmin",
    "/v1/models/%2f../../admin",
    "/v1/%2f..%2f..%2fadmin",
    "/v1/..\\admin",
    "/v1/..%5cadmin",
    "/v1/%5c..%5c..%5cadmin",
    "/v1/%252e%252e/admin",
    "/v1/%252E%252E%252Fadmin",
    "/v1/%25252e%25252e/admin",
    "/v1/..;/admin",
    "/v1/%2e%2e;x=1/admin",
    "/v1/%c0%ae%c0%ae/admin",
    "/v1/%2525252e%2525252e/admin",
    "http://evil.example/v1/../admin",
]


@pytest.fixture
async def recorder() -> AsyncIterator[RecordingUpstream]:
    upstream = RecordingUpstream()
    await upstream.start()
    yield upstream
    await upstream.close()


@pytest.fixture
async def rig(make_rig: MakeRig, recorder: RecordingUpstream) -> Rig:
    # The proxy's own key goes upstream (`forward_client_key = false`): the credential at risk.
    return await make_rig(
        upstream_url=recorder.url,
        upstream_path=BASE,
        tenant_extra="forward_client_key = false\n",
    )


async def _raw_get(rig: Rig, target: str) -> tuple[int, bytes]:
    assert rig.server.port is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", rig.server.port)
    try:
        writer.write(
            f"GET {target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-client\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        await writer.drain()
        async with asyncio.timeout(10):
            raw = await reader.read()
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


@pytest.mark.parametrize("target", ESCAPES)
async def test_a_path_leaving_the_base_path_is_refused_before_the_upstream(
    rig: Rig, recorder: RecordingUpstream, target: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="proxy.server.passthrough"):
        status, body = await _raw_get(rig, target)
    assert status == 400, body
    assert assert_openai_error(body)["code"] == "invalid_path"
    assert recorder.requests == []
    assert any("pass-through path refused" in r.getMessage() for r in caplog.records)


async def test_the_upstream_key_only_ever_reaches_paths_under_the_base(
    rig: Rig, recorder: RecordingUpstream
) -> None:
    for target in ESCAPES:
        await _raw_get(rig, target)
    for target in ("/v1/models", "/v1/models/gpt-4o", "/v1/files/a%2Fb?x=%26y&z=1"):
        status, _ = await _raw_get(rig, target)
        assert status == 200
    assert [target for _, target, _ in recorder.requests] == [
        f"{BASE}/models",
        f"{BASE}/models/gpt-4o",
        f"{BASE}/files/a%2Fb?x=%26y&z=1",  # as the client encoded it
    ]
    for _, target, headers in recorder.requests:
        assert target.startswith(f"{BASE}/")
        assert headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
