"""A Messages client's session through `/v1/messages` and the fake Anthropic API: compaction is
triggered by the whole prompt the upstream reported (input + cache read + cache creation), the
summary replaces the turns it covers while the client keeps its full history, and what the client
itself sent wrong passes through untouched."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest

from proxy.server.appkeys import STORE
from tests.e2e.agent import settled
from tests.fakes.anthropic_upstream import text
from tests.inbound.builders import tool_result, wire_problem
from tests.server.messages_support import (
    MakeMessagesProxy,
    MessagesAgent,
    make_messages_proxy,
)

__all__ = ["make_messages_proxy"]  # the fixture, imported for pytest

# keep_first_user off: these tests are about the summary standing for the covered turns
COMPACT = (
    "[tenants.default.compact]\nthreshold_tokens = 2000\nkeep_recent = 2\nkeep_first_user = false\n"
)
SUMMARY = "<analysis>facts</analysis><summary>Ada runs BLUEFIN on port 8421.</summary>"
CACHED = {"input_tokens": 100, "cache_read_input_tokens": 2500,
          "cache_creation_input_tokens": 100, "output_tokens": 5}  # fmt: skip
UNCACHED = {"input_tokens": 100, "output_tokens": 5}
EPHEMERAL = {"type": "ephemeral"}


async def session(make_messages_proxy: MakeMessagesProxy, usage: dict[str, int]) -> Any:
    """Three turns, the second reported with `usage`; the third is sent after it."""
    proxy = await make_messages_proxy(tenant_extra=COMPACT)
    proxy.fake.summary_text = SUMMARY
    proxy.fake.script(text("Noted."), text("Sure.", usage=usage), text("Third."), text("Fourth."))
    client = proxy.client(default_headers={"X-Claude-Code-Session-Id": "cc-session"})
    agent = MessagesAgent(client, proxy.app, system="You are terse.")
    for words in ("I am Ada; project BLUEFIN listens on port 8421.", "Remember it.", "And?"):
        agent.add({"role": "user", "content": words})
        await agent.turn()
    return proxy, agent


async def test_cache_reads_count_toward_the_threshold_and_the_summary_replaces_old_turns(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    proxy, agent = await session(make_messages_proxy, CACHED)
    assert [agent.header("X-Ctx-Compacted", i) for i in range(3)] == ["0", "0", "1"]
    assert len(proxy.fake.summary_requests) == 1
    compacted = proxy.fake.received[-1].body
    summary = compacted["messages"][0]["content"][0]["text"]  # ends with the turns' recall ref
    assert summary.startswith(
        "[Conversation summary]\nAda runs BLUEFIN on port 8421.\n[Messages 0-"
    )
    assert 'ctx_recall(ref="turns:0-' in summary
    assert compacted["messages"][1:] == agent.history[-3:-1]  # the kept turns, as sent
    assert compacted["system"] == "You are terse." and wire_problem(compacted) is None
    agent.add({"role": "user", "content": "Last one."})
    await agent.turn()  # the client's full history again: mapped onto the stored summary
    again = proxy.fake.received[-1].body
    assert again["messages"][0] == compacted["messages"][0]
    assert len(agent.history) == 8 and len(again["messages"]) == 5
    assert len(proxy.fake.summary_requests) == 1
    state = await proxy.app[STORE].load("default", "cc-session")
    assert state.int_field("compactions") == 1


async def test_without_the_cache_counters_the_same_turns_stay_under_the_threshold(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    proxy, agent = await session(make_messages_proxy, UNCACHED)
    assert [agent.header("X-Ctx-Compacted", i) for i in range(3)] == ["0", "0", "0"]
    assert proxy.fake.summary_requests == []
    assert proxy.fake.received[-1].body["messages"] == agent.history[:-1]


async def test_a_tool_use_the_client_left_unanswered_goes_up_untouched(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    proxy = await make_messages_proxy()
    call = {"type": "tool_use", "id": "toolu_9", "name": "Read", "input": {}}
    history = [
        {"role": "user", "content": "read"},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": "never mind"},
    ]
    async with proxy.client() as client:
        with pytest.raises(anthropic.BadRequestError) as refused:
            await client.messages.create(model="claude-x", max_tokens=5, messages=history)  # type: ignore[arg-type]
    assert "toolu_9" in json.dumps(refused.value.body)  # the API's own words, passed through
    assert proxy.fake.received[-1].body["messages"] == history


async def test_tool_results_answer_their_calls_after_the_proxy_pruned_them(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    proxy = await make_messages_proxy()
    history: list[dict[str, Any]] = [{"role": "user", "content": "read them"}]
    for n in range(5):
        call = {"type": "tool_use", "id": f"toolu_{n}", "name": "Read", "input": {"n": n}}
        reading = {"type": "text", "text": "Reading."}
        history.append({"role": "assistant", "content": [reading, call]})
        history.append({"role": "user", "content": [tool_result(f"toolu_{n}", "z" * 5000)]})
    async with proxy.client() as client:
        await client.messages.create(model="claude-x", max_tokens=5, messages=history)  # type: ignore[arg-type]
    sent = proxy.fake.received[-1].body
    assert wire_problem(sent) is None
    assert sum("truncated, original" in json.dumps(m) for m in sent["messages"]) == 3


async def test_pruning_decisions_are_replayed_and_new_ones_wait_for_a_cold_cache(
    make_messages_proxy: MakeMessagesProxy,
) -> None:
    proxy = await make_messages_proxy()
    history: list[dict[str, Any]] = [{"role": "user", "content": "read them"}]

    def add_read(n: int) -> None:
        call = {"type": "tool_use", "id": f"toolu_{n}", "name": "Read", "input": {"n": n}}
        history.append({"role": "assistant", "content": [call]})
        result = tool_result(f"toolu_{n}", f"{n}" * 4000)
        history.append({"role": "user", "content": [{**result, "cache_control": EPHEMERAL}]})

    for n in range(4):
        add_read(n)
    client = proxy.client(default_headers={"X-Claude-Code-Session-Id": "sticky"})
    async with client:
        await client.messages.create(model="claude-x", max_tokens=5, messages=history)  # type: ignore[arg-type]
        first = proxy.fake.received[-1].body["messages"]
        await settled(proxy.app)
        add_read(4)
        history[-3]["content"][0].pop("cache_control")  # Claude Code's marker moves on
        await client.messages.create(model="claude-x", max_tokens=5, messages=history)  # type: ignore[arg-type]
    second = proxy.fake.received[-1].body["messages"]
    assert second[:5] == first[:5]  # the two cut results, as cut the first time
    assert "truncated, original" in json.dumps(second[2]) and "truncated" in json.dumps(second[4])
    assert "truncated" not in json.dumps(second[6])  # due now, but the cache is warm: it waits
    assert second[-1] == history[-1] and wire_problem(proxy.fake.received[-1].body) is None
