"""Replay the real agent sessions of ../shared/traces/ through the proxy, turn by turn.

Each request is the trace's history up to one of its assistant turns (what the client sent
before the model wrote that turn), sent with the openai SDK to the proxy in front of the fake
OpenAI upstream, which reports `prompt_tokens` = characters of what it received / 4. To keep the
suite fast, at most `MAX_REQUESTS` turns per trace are replayed, evenly spaced and always
including the last; each replayed request still carries the full history up to its turn.

Configs: `aggressive` (compaction threshold 20,000 tokens, pruning on every request) and `default`
(no settings: the defaults), both with the example workspace (bootstrap adds its ~2 KB to every
request). Printed per trace (see with `pytest -s`, and recorded as junit properties): requests,
prompt tokens sent without and with the proxy, summarizer tokens, compactions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openai.types.chat import ChatCompletion

from benchmarks.validity import problems
from proxy.compaction.prompt import summary_instruction
from proxy.server.appkeys import STORE
from tests.e2e.agent import settled
from tests.fakes.openai_upstream import estimate_prompt_tokens
from tests.server.conftest import MakeProxy
from tests.server.harness import Proxy
from tests.traces import TRACE_FILES

TRACES = TRACE_FILES
CONFIGS = {
    # Pruning on every request, as ctxproxy's defaults did before they waited for a cold cache:
    # the assertions below count on pruning to send fewer tokens than the client's requests.
    "aggressive": "[tenants.default.compact]\nthreshold_tokens = 20000\n"
    "[tenants.default.prune]\nwhen_cache_cold_s = 0\n",
    "default": "",
}
MAX_REQUESTS = 40
INSTRUCTION = summary_instruction(max_words=500)[:60]

pytestmark = pytest.mark.skipif(not TRACES, reason="../shared/traces is not available")


def is_summarizer_call(body: dict[str, Any]) -> bool:
    """The proxy's own summarizer request (the fake also counts a trace turn quoting a summary)."""
    last = (body.get("messages") or [{}])[-1]
    return str(last.get("content", "")).startswith(INSTRUCTION)


def replayed_turns(messages: list[dict[str, Any]], *, limit: int = MAX_REQUESTS) -> list[int]:
    """Indexes `i` of assistant turns to replay (the request is `messages[:i]`)."""
    turns = [i for i, m in enumerate(messages) if m.get("role") == "assistant" and i > 0]
    if len(turns) <= limit:
        return turns
    step = len(turns) / limit
    return sorted({turns[int(k * step)] for k in range(limit)} | {turns[-1]})


def history_tokens(body: dict[str, Any]) -> int:
    """`estimate_prompt_tokens` of the body's messages after its leading system messages."""
    messages = body.get("messages", [])
    lead = next((i for i, m in enumerate(messages) if m.get("role") != "system"), len(messages))
    return estimate_prompt_tokens({"messages": messages[lead:]})


async def replay(
    proxy: Proxy, trace: dict[str, Any], *, histories: list[tuple[int, int]] | None = None
) -> list[tuple[int, int]]:
    """(tokens the client's request holds, tokens the upstream received) per replayed request;
    the same of their histories (system messages left out) appended to `histories`."""
    messages, extra = trace["messages"], {"tools": trace["tools"]} if trace.get("tools") else {}
    sizes: list[tuple[int, int]] = []
    headers = {"X-Ctx-Session": "replay"}
    async with proxy.client(default_headers=headers) as client:
        for index in replayed_turns(messages):
            body = {"model": "gpt-4o", "messages": messages[:index], **extra}
            # The SDK's low-level `post`: `create` would spend ~90% of the runtime type-walking
            # long histories (openai._utils._transform) before sending the same JSON.
            await client.post("/chat/completions", cast_to=ChatCompletion, body=body)
            await settled(proxy.app)
            sent = proxy.fake.received[-1].body  # `chat` would skip a turn quoting "<summary>"
            if not problems(body):
                assert problems(sent) == [], f"request up to message {index} left invalid"
            sizes.append((estimate_prompt_tokens(body), estimate_prompt_tokens(sent)))
            if histories is not None:
                histories.append((history_tokens(body), history_tokens(sent)))
    return sizes


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
async def test_trace_replay_sends_only_valid_requests_and_fewer_tokens(
    make_proxy: MakeProxy, path: Path, config: str, record_property: Any
) -> None:
    trace = json.loads(path.read_bytes())  # noqa: ASYNC240 (a local file, read once)
    proxy = await make_proxy(tenant_extra=CONFIGS[config])
    histories: list[tuple[int, int]] = []
    sizes = await replay(proxy, trace, histories=histories)
    summaries = [r for r in proxy.fake.summary_requests if is_summarizer_call(r.body)]
    for summary in summaries:
        assert problems(summary.body) == []
    without, with_proxy = (sum(s[i] for s in sizes) for i in (0, 1))
    state = await proxy.app[STORE].load("default", "replay")
    compactions = state.int_field("compactions")
    summarizer = sum(estimate_prompt_tokens(s.body) for s in summaries)
    line = (f"{path.stem} [{config}] requests={len(sizes)} without={without} "
            f"with={with_proxy} summarizer={summarizer} compactions={compactions}")  # fmt: skip
    print(line)
    record_property("prompt_tokens", {"without": without, "with": with_proxy, "sizes": sizes})
    if config == "aggressive" and without > 10_000:
        # The histories shrink: the system prompt gains the workspace's ~700 tokens a request
        # (bootstrap, with its recall line), which short sessions do not win back.
        assert sum(h[1] for h in histories) < sum(h[0] for h in histories)
    if config == "aggressive" and max(s[1] for s in sizes[:-1]) > 20_000:
        # Due: a summary was made, or there was nothing to summarize but the task, which stays
        # (`keep_first_user`: a Claude Code session's first message is ~15,000 characters).
        events = await proxy.app[STORE].read_events("0-0", block_ms=0, count=10_000)
        tried = {e.get("reason") for _, e in events if e.get("kind") == "compaction"}
        assert compactions or tried == {"nothing_to_summarize"}, (
            "the upstream reported more than the threshold, yet no compaction"
        )
