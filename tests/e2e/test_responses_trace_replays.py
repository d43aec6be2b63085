"""The real agent sessions of ../shared/traces/, converted to Responses requests, replayed
through `POST /v1/responses` in front of a chat upstream and a Responses upstream, beside the
same turns through the chat-completions route: every request that reached an upstream is valid
for it, and the Responses route saves what the chat route saves, within a few points.

Savings are `1 - (what the upstream received) / (what the client sent)`, in prompt characters:
chat messages for a chat upstream and the chat route, `instructions` and `input` for a
Responses upstream (the client's request measured the same way). Compaction at 20,000 tokens
(the chat trace replay's `aggressive` config), so the long traces compact on every route.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from benchmarks.validity import problems
from tests.e2e.agent import settled
from tests.e2e.test_trace_replays import replayed_turns
from tests.fakes.openai_upstream import estimate_prompt_tokens
from tests.inbound.responses_builders import wire_problem
from tests.inbound.test_responses_trace_replays import to_responses
from tests.server.conftest import MakeProxy
from tests.server.harness import Proxy
from tests.traces import TRACE_FILES

JSON = dict[str, Any]
MAX_REQUESTS = 6
COMPACT = "[tenants.default.compact]\nthreshold_tokens = 20000\n"
HEADERS = {"X-Ctx-Session": "replay"}

pytestmark = pytest.mark.skipif(not TRACE_FILES, reason="../shared/traces is not available")


def responses_chars(body: JSON) -> int:
    return len(orjson.dumps([body.get("instructions"), body.get("input")]))


async def replay(proxy: Proxy, trace: JSON, route: str) -> tuple[int, int]:
    """(characters the client sent, characters the upstream received) over the replayed turns;
    every upstream request checked."""
    messages, tools = trace["messages"], trace.get("tools") or []
    sent = received = 0
    async with proxy.client(default_headers=HEADERS) as client:
        for turn in replayed_turns(messages, limit=MAX_REQUESTS):
            chat_body = {"model": "gpt-5", "messages": messages[:turn]}
            if route == "chat":
                body: JSON = {**chat_body, **({"tools": tools} if tools else {})}
                await client.post("/chat/completions", cast_to=ChatCompletion, body=body)
            else:
                body = to_responses(messages[:turn], tools)
                await client.post("/responses", cast_to=Response, body=body)
            await settled(proxy.app)
            got = proxy.fake.chat[-1]
            if route == "native":
                assert got.path == "/v1/responses"
                assert wire_problem(got.body) is None, f"turn {turn}"
                sent, received = sent + responses_chars(body), received + responses_chars(got.body)
                continue
            assert got.path == "/v1/chat/completions"
            if not problems(chat_body):
                assert problems(got.body) == [], f"turn {turn}"
            sent += 4 * estimate_prompt_tokens(chat_body)
            received += 4 * estimate_prompt_tokens(got.body)
    return sent, received


@pytest.mark.parametrize("path", TRACE_FILES, ids=lambda p: p.stem)
async def test_a_trace_through_the_responses_route_is_valid_and_saves_as_the_chat_route(
    make_proxy: MakeProxy, path: Path, record_property: Any
) -> None:
    trace = json.loads(path.read_bytes())  # noqa: ASYNC240 (a local file, read once)
    saved: dict[str, float] = {}
    chat_sent = 0
    for route in ("chat", "translated", "native"):
        extra = 'api = "responses"' if route == "native" else ""
        proxy = await make_proxy(tenant_extra=COMPACT, upstream_extra=extra)
        sent, received = await replay(proxy, trace, route)
        saved[route] = 1 - received / sent
        chat_sent = chat_sent or sent
    print(f"{path.stem}: " + ", ".join(f"{r} {s:.1%}" for r, s in saved.items()))
    record_property("saved", saved)
    if chat_sent < 40_000:  # below, the bootstrap's ~2 KB a request is most of what is sent
        return
    assert abs(saved["translated"] - saved["chat"]) < 0.05
    assert abs(saved["native"] - saved["chat"]) < 0.05
