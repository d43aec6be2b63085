"""Prompt caching and compaction through the proxy in front of the fake Anthropic Messages API."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from benchmarks.validity import count_breakpoints
from tests.e2e.agent import Agent
from tests.e2e.conftest import MakeAnthropicProxy
from tests.fakes.anthropic_upstream import ErrorReply, text, tool_use

MODEL = "claude-sonnet-4-5"
LOW_MINIMUM = "[tenants.default.cache]\nmin_cacheable_tokens = 100\n"
EPHEMERAL = {"type": "ephemeral"}
CLIENT_SYSTEM = {
    "role": "system",
    "content": [{"type": "text", "text": "Client rules.", "cache_control": EPHEMERAL}],
}


def replace_file(path: Path, content: str) -> None:
    """Write as editors do (a new file renamed over the old one), so the change is always seen."""
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(content, encoding="utf-8")
    os.replace(temporary, path)


TURNS: list[dict[str, Any]] = [
    {"role": "user", "content": "I am Ada; project BLUEFIN listens on port 8421."},
    {"role": "tool", "tool_call_id": "toolu_1", "content": "print('a')"},
    {"role": "user", "content": "Now b.py."},
    {"role": "tool", "tool_call_id": "toolu_2", "content": "print('b')"},
]
"""Client turns; the fake answers the first with a call `toolu_1`, the third with `toolu_2`."""


async def test_static_prefix_stays_byte_identical_while_dynamic_files_change(
    make_anthropic_proxy: MakeAnthropicProxy,
) -> None:
    seconds = iter(range(1_000_000))  # a turn a second: every change is seen on the next turn
    proxy = await make_anthropic_proxy(
        tenant_extra=LOW_MINIMUM, workspace_clock=lambda: float(next(seconds))
    )
    agent = Agent(proxy.client(), proxy.app, model=MODEL, system=CLIENT_SYSTEM)
    for number in range(100):
        replace_file(proxy.workspace / "user.md", f"The user likes version {number}.")
        replace_file(
            proxy.workspace / "memory" / "MEMORY.md", f"- 2025-01-{number % 28 + 1:02d}: {number}"
        )
        if number % 10 == 0:  # ten conversations of ten turns: the prefix is the tenant's
            agent.history.clear()
        first: dict[str, Any] = {"role": "user", "content": f"question {number}"}
        if number % 10 == 5:  # the client's own second breakpoint, kept to the end of its talk
            part = {"type": "text", "text": f"question {number}", "cache_control": EPHEMERAL}
            first = {"role": "user", "content": [part]}
        agent.add(first)
        await agent.turn()
    bodies = [r.body for r in proxy.fake.received]
    assert len(bodies) == 100, "every request was accepted by the API's checks"
    statics = {json.dumps(b["system"][0], sort_keys=True) for b in bodies}
    assert len(statics) == 1 and "cache_control" in bodies[0]["system"][0]
    assert all(count_breakpoints(b) <= 4 for b in bodies)
    assert "version 99" in bodies[-1]["system"][-1]["text"]
    assert "version 98" in bodies[-2]["system"][-1]["text"]


async def test_compaction_summarizes_through_the_anthropic_api(
    make_anthropic_proxy: MakeAnthropicProxy,
) -> None:
    compact = "[tenants.default.compact]\nthreshold_tokens = 2000\nkeep_recent = 4\n"
    proxy = await make_anthropic_proxy(tenant_extra=compact)
    summary = "<analysis>facts</analysis><summary>Ada runs BLUEFIN on port 8421.</summary>"
    proxy.fake.script(
        tool_use(("toolu_1", "read", {"path": "a.py"}), usage=_usage(500)),
        text("Read it.", usage=_usage(900)),
        tool_use(("toolu_2", "read", {"path": "b.py"}), usage=_usage(2500)),
        text(summary),  # the summarizer's call comes before the compacted request
        text("Compacted answer."),
    )
    client = proxy.client(default_headers={"X-Ctx-Session": "anthropic"})
    agent = Agent(client, proxy.app, model=MODEL)
    for message in TURNS:
        agent.add(message)
        await agent.turn()
    summarizer, compacted = (r.body for r in proxy.fake.received[-2:])
    assert "BLUEFIN" in json.dumps(summarizer) and summarizer.get("stream") is not True
    first = compacted["messages"][0]  # the task and the summary: one user turn of two blocks
    assert first["role"] == "user" and [b["text"] for b in first["content"]] == [
        TURNS[0]["content"],
        "[Conversation summary]\nAda runs BLUEFIN on port 8421.\n"
        '[Messages 0-2 are summarized above; full text: ctx_recall(ref="turns:0-2")]',
    ]
    assert agent.header("X-Ctx-Compacted") == "1"
    assert [agent.header("X-Ctx-Compacted", i) for i in range(3)] == ["0", "0", "0"]
    assert agent.history[-1]["content"] == "Compacted answer."


async def test_prompt_too_long_compacts_through_anthropic_and_retries_once(
    make_anthropic_proxy: MakeAnthropicProxy,
) -> None:
    proxy = await make_anthropic_proxy()
    too_long = "prompt is too long: 210000 tokens > 200000 maximum"
    proxy.fake.script(
        tool_use(("toolu_1", "read", {"path": "a.py"})),
        text("Read it."),
        tool_use(("toolu_2", "read", {"path": "b.py"})),
        ErrorReply(400, "invalid_request_error", too_long),
        text("<summary>Short.</summary>"),
        text("After the retry."),
    )
    agent = Agent(proxy.client(), proxy.app, model=MODEL)
    for message in TURNS:
        agent.add(message)
        await agent.turn()
    retried = proxy.fake.received[-1].body["messages"]
    assert retried[0]["content"][0]["text"] == TURNS[0]["content"]
    assert retried[0]["content"][1]["text"].startswith("[Conversation summary]\nShort.\n")
    assert agent.history[-1]["content"] == "After the retry."
    assert agent.header("X-Ctx-Compacted") == "1" and len(proxy.fake.received) == 6


def _usage(input_tokens: int) -> dict[str, int]:
    return {"input_tokens": input_tokens, "output_tokens": 5}


def ttls_in_order(body: dict[str, Any]) -> list[str]:
    """The TTL of every breakpoint of an Anthropic request, in the API's order (tools, system,
    messages)."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            marker = value.get("cache_control")
            if isinstance(marker, dict):
                found.append(marker.get("ttl", "5m"))
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for key in ("tools", "system", "messages"):
        walk(body.get(key))
    return found


async def test_a_client_one_hour_marker_in_the_history_makes_ours_before_it_one_hour(
    make_anthropic_proxy: MakeAnthropicProxy,
) -> None:
    proxy = await make_anthropic_proxy(tenant_extra=LOW_MINIMUM)
    long_question = "Explain the design of the parser in detail. " * 60
    one_hour = {"type": "ephemeral", "ttl": "1h"}
    asked = {
        "role": "user",
        "content": [{"type": "text", "text": long_question, "cache_control": one_hour}],
    }
    async with proxy.client() as client:
        await client.chat.completions.create(model=MODEL, messages=[asked])  # type: ignore[list-item]
    sent = proxy.fake.received[-1].body
    ttls = ttls_in_order(sent)
    assert ttls.count("1h") >= 2, "the client's 1h marker and at least one of ours before it"
    assert "5m" not in ttls[: len(ttls) - ttls[::-1].index("1h")], "a 5m marker before a 1h one"
