"""One session replayed for the cost benchmark (`benchmarks.cost`): every upstream request priced.

A request is sent at each assistant turn of a trace, as in `benchmarks.replay`, against the fake
upstream with a simulated provider cache (`proxy.cost.cachesim`, fresh per session) on a
simulated clock. Direct: the client's own body, with its last message marked for Anthropic-style
caching (as agents mark theirs). Through ctxproxy: the same body unmarked (an OpenAI-style client
sends none); ctxproxy places its breakpoints. Each upstream request is priced from what the cache
read and wrote (`proxy.cost.pricing`); a chat request's output is its assistant message from the
trace, a summarizer call's the summary. Each chat request's facts (the proxy's new pruning batch,
compaction, from its event) feed `proxy.cost.misses`.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from benchmarks.cache_share import SimClock
from benchmarks.fake_llm import Seen
from benchmarks.payloads import load_trace
from benchmarks.replay import Rig, rig
from proxy.cost.cachesim import AnthropicCache, OpenAICache
from proxy.cost.misses import RequestFacts, classify_miss
from proxy.cost.prices import Price
from proxy.cost.pricing import Cost, TokenCounts, price_counts
from proxy.ports import StateStore
from proxy.server.appkeys import LIFECYCLE, STORE

FAMILIES = ("claudecode", "sweagent", "taubench")
AGENT_STEP_S = 20.0
PAUSE_S = 720.0  # longer than either simulated cache keeps an unused entry (5 and 10 minutes)
# A summary as long as the default max_summary_words (500) asks for: the summarizer's output is
# priced, and the summary stays in every later prompt.
SUMMARY = (
    "<analysis>Reviewed the turns.</analysis><summary>"
    + " ".join(f"fact{i} about the task, a file or a decision;" for i in range(80))
    + "</summary>"
)


@dataclass
class SessionCost:
    """One replayed session: dollars by kind, tokens, cache reads after turn 1, misses."""

    trace: str
    family: str
    cost: Cost = field(default_factory=Cost)
    requests: int = 0
    summarizer_calls: int = 0
    prompt_tokens: int = 0
    prompt_after_first: int = 0
    cached_after_first: int = 0
    invalid: int = 0
    misses: Counter[str] = field(default_factory=Counter)


def family_of(trace: str) -> str:
    return next((f for f in FAMILIES if trace.startswith(f)), "other")


def turns_of(trace: dict[str, Any], model: str) -> list[tuple[dict[str, Any], int, bool]]:
    """(body, output tokens, answers a user message) per assistant turn after the first user."""
    messages = trace["messages"]
    out = []
    for index, message in enumerate(messages):
        if message["role"] != "assistant" or not any(m["role"] == "user" for m in messages[:index]):
            continue
        body: dict[str, Any] = {"model": model, "messages": messages[:index]}
        if trace.get("tools"):
            body["tools"] = trace["tools"]
        reply = {k: message.get(k) for k in ("content", "tool_calls") if message.get(k)}
        out.append((body, len(orjson.dumps(reply)) // 4, messages[index - 1]["role"] == "user"))
    return out


def marked_last(body: dict[str, Any]) -> dict[str, Any]:
    """`body` with its last message carrying a `cache_control` marker (a client's own)."""
    messages = list(body["messages"])
    messages[-1] = {**messages[-1], "cache_control": {"type": "ephemeral"}}
    return {**body, "messages": messages}


def advance(clock: SimClock, *, pauses: bool, answers_user: bool, first: bool) -> None:
    """Agent steps 20 s apart; with `pauses`, 12 minutes before each later user message and
    every 25th turn (a human reading, typing, away)."""
    clock.turns += 1
    human = pauses and not first and (answers_user or clock.turns % 25 == 0)
    clock.now += PAUSE_S if human else AGENT_STEP_S


async def replay_session(
    tmp: Path, name: str, *, style: str, toml: str | None, pauses: bool, price: Price, ttl_s: float
) -> SessionCost:
    """Replay trace `name` directly (`toml` None) or through ctxproxy configured by `toml`."""
    clock = SimClock()
    result = SessionCost(name, family_of(name))
    async with rig(tmp, tenant_toml=toml, cache_style=style, clock=clock) as setup:
        setup.fake.cache = AnthropicCache() if style == "anthropic" else OpenAICache()
        setup.fake.clock, setup.fake.summary_text = clock, SUMMARY
        events = Events(setup.proxy[STORE] if setup.proxy is not None else None)
        previous: RequestFacts | None = None
        async with aiohttp.ClientSession() as client:
            turns = turns_of(load_trace(name), price.model)
            for index, (body, output, answers_user) in enumerate(turns):
                advance(clock, pauses=pauses, answers_user=answers_user, first=index == 0)
                start = len(setup.fake.seen)
                await send(
                    client,
                    setup,
                    name,
                    marked_last(body) if toml is None and style == "anthropic" else body,
                )
                pruned, compacted = await events.changes()
                for seen in setup.fake.seen[start:]:
                    add_priced(
                        result, seen, price, output=len(SUMMARY) // 4 if seen.summary else output
                    )
                chat = setup.fake.seen[-1]
                facts = RequestFacts(
                    clock(),
                    chat.cache_prompt,
                    chat.cached_tokens,
                    chat.written,
                    pruned=pruned,
                    compacted=compacted,
                )
                add_turn(result, facts, first=index == 0)
                cause = classify_miss(
                    previous, facts, cache_ttl_s=ttl_s, automatic=style == "openai"
                )
                if cause is not None:
                    result.misses[cause] += 1
                previous = facts
    return result


async def send(client: aiohttp.ClientSession, setup: Rig, name: str, body: dict[str, Any]) -> None:
    """One chat request; then ctxproxy's after-work, as the agent's next turn comes later."""
    headers = {"Authorization": "Bearer sk-replay", "X-Ctx-Session": name.removesuffix(".json")}
    async with client.post(setup.url, json=body, headers=headers) as response:
        await response.read()
        if response.status != 200:
            raise RuntimeError(f"{name}: status {response.status}")
    if setup.proxy is not None:
        await asyncio.gather(*list(setup.proxy[LIFECYCLE].tasks))


@dataclass
class Events:
    """The request events ctxproxy wrote since the last look (none when replaying direct)."""

    store: StateStore | None
    last: str = "0-0"

    async def changes(self) -> tuple[bool, bool]:
        """(a new pruning batch, a compaction done) in the latest request's event."""
        if self.store is None:
            return False, False
        found = await self.store.read_events(self.last, block_ms=0, count=100)
        self.last = found[-1][0] if found else self.last
        pruned = compacted = False
        for _, event in found:
            if event.get("kind") == "request":
                stages = orjson.loads(event.get("stages") or "{}")
                pruned = stages.get("prune", {}).get("pruned", 0) > 0
                compacted = event.get("compaction") == "done"
        return pruned, compacted


def add_priced(result: SessionCost, seen: Seen, price: Price, *, output: int) -> None:
    """Price one upstream request, in the cache model's own token count throughout."""
    read = min(seen.cached_tokens, seen.cache_prompt)
    written = min(seen.written, seen.cache_prompt - read)
    hour = min(seen.written_1h, written)
    counts = TokenCounts(
        input=seen.cache_prompt - read - written,
        cache_read=read,
        cache_write=written - hour,
        cache_write_1h=hour,
        output=output,
    )
    result.cost += price_counts(counts, price)
    result.invalid += bool(seen.problem)
    result.summarizer_calls += seen.summary


def add_turn(result: SessionCost, facts: RequestFacts, *, first: bool) -> None:
    result.requests += 1
    result.prompt_tokens += facts.prompt_tokens
    if not first:
        result.prompt_after_first += facts.prompt_tokens
        result.cached_after_first += facts.cached_tokens
