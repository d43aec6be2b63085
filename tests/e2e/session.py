"""The scripted agent session shared by the compaction tests: seven turns whose reported
`prompt_tokens` grow past a threshold of 2,000, with facts planted in the first user message.

Client history after the seventh turn (indexes into `Agent.history`):
0 user (facts) · 1 call c1 · 2 result c1 (755 chars) · 3 call c2 · 4 result c2 (280) · 5 call c3 ·
6 result c3 (500) · 7 answer · 8 user · 9 parallel calls c4, c5 · 10, 11 their results · 12 answer ·
13 user · 14 answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tests.e2e.agent import Agent, tool_call
from tests.fakes.openai_upstream import Reply
from tests.server.harness import Proxy

SESSION = "e2e-session"
COMPACT = (
    # Prune on every request (the default before it waited for a cold provider cache): the
    # scripted turns come milliseconds apart and the session checks what pruning did.
    "[tenants.default.prune]\nwhen_cache_cold_s = 0\n"
    # Last: tests append more keys of this table.
    "[tenants.default.compact]\nthreshold_tokens = 2000\nkeep_recent = 4\n"
)
FACTS = "Hi, I am Ada. Our project codename is BLUEFIN and the deploy port is 8421."
LISTING = "".join(f"src/module_{i:03d}.py\n" for i in range(60))[:755]
GROWING = (400, 800, 1100, 1400, 1700, 2100, 900)
"""Reported prompt tokens per turn: the sixth passes 2,000, so the seventh request compacts."""


def answer(*calls: dict[str, Any], text: str = "ok", prompt_tokens: int) -> Reply:
    return Reply(content=text, tool_calls=list(calls) or None, prompt_tokens=prompt_tokens)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def summary(text: str, *, covers: int) -> dict[str, Any]:
    """The summary message standing for the client's first `covers` messages (recall is on: its
    last line names their ref)."""
    last = covers - 1
    line = f'[Messages 0-{last} are summarized above; full text: ctx_recall(ref="turns:0-{last}")]'
    return user(f"[Conversation summary]\n{text}\n{line}")


def result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def agent_for(proxy: Proxy) -> Agent:
    return Agent(proxy.client(default_headers={"X-Ctx-Session": SESSION}), proxy.app)


async def run_session(
    proxy: Proxy, *, tokens: Sequence[int] = GROWING, turns: int = 7, agent: Agent | None = None
) -> Agent:
    """Play the script up to turn `turns`, continuing where `agent` stopped; turn `i` reports
    `tokens[i]`."""
    agent = agent or agent_for(proxy)
    steps = _steps([*tokens, *GROWING[len(tokens) :]])
    for added, reply in steps[len(agent.headers) : turns]:
        agent.add(*added)
        proxy.fake.script.append(reply)
        await agent.turn()
    return agent


def _steps(tokens: Sequence[int]) -> list[tuple[list[dict[str, Any]], Reply]]:
    t = tokens
    return [
        ([user(FACTS)], answer(tool_call("c1", cmd="ls"), prompt_tokens=t[0])),
        ([result("c1", LISTING)], answer(tool_call("c2", cmd="cat app.py"), prompt_tokens=t[1])),
        ([result("c2", "x" * 280)], answer(tool_call("c3", cmd="grep"), prompt_tokens=t[2])),
        ([result("c3", "g" * 500)], answer(text="Bug at app.py:12.", prompt_tokens=t[3])),
        ([user("Fix it and run the tests.")],
         answer(tool_call("c4", cmd="edit"), tool_call("c5", cmd="pytest"), prompt_tokens=t[4])),
        ([result("c4", "edited"), result("c5", "t" * 900)],
         answer(text="Tests pass.", prompt_tokens=t[5])),
        ([user("Great. What next?")], answer(prompt_tokens=t[6])),
    ]  # fmt: skip
