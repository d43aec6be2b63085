"""Integers beyond 64 bits reach the upstream exactly as the client wrote them."""

from __future__ import annotations

from typing import Any

from tests.server.harness import Proxy

HUGE = 123456789012345678901234567890


def tool(maximum: int) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "maximum": maximum}}}
    return {"type": "function", "function": {"name": "count", "parameters": schema}}


async def test_a_seed_beyond_64_bits_arrives_as_sent(proxy: Proxy) -> None:
    async with proxy.client() as client:
        await client.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": "digits: 12345678901234567890123"}],
            seed=HUGE,
            tools=[tool(-HUGE)],  # type: ignore[list-item]
            extra_body={"vendor": {"ids": [2**64, 2**64 - 1, -(2**63) - 1]}},
        )
    raw = proxy.fake.chat[-1].raw
    assert b'"seed":123456789012345678901234567890' in raw
    assert b'"maximum":-123456789012345678901234567890' in raw
    assert b'"ids":[18446744073709551616,18446744073709551615,-9223372036854775809]' in raw
    assert b'"content":"digits: 12345678901234567890123"' in raw
