"""On `/v1/messages` to an Anthropic upstream the prewarm is rendered and sent as the route
renders and sends the session's requests: blocks the chat form cannot hold stay in it."""

from __future__ import annotations

from typing import Any

import orjson

from tests.e2e.agent import background_compactions_done, settled
from tests.e2e.test_prewarm_skips import answered
from tests.e2e.test_prewarm_through_proxy import (
    ASYNC,
    PREWARM,
    READ,
    WORDS,
    marked_prefix_length,
    prewarms_done,
    unmarked,
)
from tests.server.messages_support import MakeMessagesProxy, MessagesAgent, make_messages_proxy

__all__ = ["make_messages_proxy"]  # the fixture, imported for pytest


def thought(number: int) -> dict[str, Any]:
    return {
        "type": "thinking",
        "thinking": f"Plan {number}: read a.py.",
        "signature": f"sig{number}==",
    }


async def test_the_prewarm_keeps_thinking_blocks_and_their_signatures_byte_for_byte(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    proxy = await make_messages_proxy(tenant_extra=ASYNC + PREWARM)
    answered(proxy.fake)
    headers = {"X-Claude-Code-Session-Id": "s", "anthropic-beta": "interleaved-thinking-2025-05-14"}
    async with proxy.client(default_headers=headers) as client:
        agent = MessagesAgent(client, proxy.app)
        agent.add({"role": "user", "content": "start " + WORDS})
        for number in range(5):
            await agent.turn(tools=[READ])
            await background_compactions_done(proxy.app)
            await prewarms_done(proxy.app)
            await settled(proxy.app)
            answer = agent.history[-1]["content"]
            answer.insert(0, thought(number))  # as a thinking model's answer comes back
            call = answer[-1]
            result = {"type": "tool_result", "tool_use_id": call["id"], "content": "x = 1\n" * 30}
            agent.add({"role": "user", "content": [result, {"type": "text", "text": f"q{number}"}]})
    received = proxy.fake.received
    [warm] = [r for r in received if r.body.get("max_tokens") == 1]
    after = received[received.index(warm) + 1]
    length = marked_prefix_length(warm.body)
    assert length == len(warm.body["messages"])
    assert dumped(warm.body["messages"][:length]) == dumped(after.body["messages"][:length])
    assert '"signature":"sig' in dumped(warm.body["messages"]).decode(), "a thinking block is in it"
    assert dumped(warm.body.get("system")) == dumped(after.body.get("system"))
    assert warm.body["tools"] == after.body["tools"] and "stream" not in warm.body
    assert warm.headers["anthropic-beta"] == "interleaved-thinking-2025-05-14"


def dumped(value: Any) -> bytes:
    """The bytes the cache sees, but for the breakpoints (the next request marks its own
    last message, not the prewarm's)."""
    return orjson.dumps(unmarked(value))
