"""Codex's and the Agents SDK's recorded requests (tests/fixtures/codex) replayed through
ctxproxy as they were sent (headers included) in front of each upstream kind: 0 protocol
errors — every answer a valid Response or event stream — and each compaction request answered
with exactly one compaction item (streamed to `response.completed`, as Codex requires), whose
handle a later Codex turn carries back and the proxy expands to the summary."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from proxy.inbound.compaction_handle import PREFIX
from tests.e2e.agent import settled
from tests.e2e.conftest import MakeAnthropicProxy
from tests.e2e.responses_upstreams import KINDS, Upstream, make_upstream
from tests.inbound.responses_builders import events_of, fixture, fixture_names, valid_response
from tests.server.conftest import MakeProxy

JSON = dict[str, Any]
ORDER = [
    "agents_sdk_turn",
    "agents_sdk_previous_response",
    "agents_sdk_compact",
    "codex_first_turn",
    "codex_turn",
    "codex_compact_v1",
    "codex_compaction_trigger",
    "codex_after_compaction",
]
"""Every fixture, a continuation after what it continues (the Agents SDK stores its responses;
Codex sends `store: false`), the turn after a compaction after the compaction."""


def test_every_fixture_is_replayed() -> None:
    assert sorted(ORDER) == fixture_names()


async def post(upstream: Upstream, recorded: JSON) -> tuple[int, JSON, list[JSON]]:
    """(status, the Response or the error, the stream's events) for one recorded request."""
    url = upstream.proxy.server.make_url(recorded["path"])
    headers = {k: v for k, v in recorded["headers"].items() if k.lower() != "authorization"}
    headers["Authorization"] = "Bearer sk-client"
    async with (
        aiohttp.ClientSession() as http,
        http.post(url, data=json.dumps(recorded["body"]), headers=headers) as answer,
    ):
        raw = await answer.read()
        if answer.content_type == "text/event-stream":
            events = events_of(raw)
            terminal = events[-1]
            return answer.status, terminal.get("response", terminal), events
        return answer.status, json.loads(raw), []


def compaction_items(events: list[JSON], answer: JSON) -> list[JSON]:
    if events:
        done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
        assert events[-1]["type"] == "response.completed"
        return [item for item in done if item["type"] == "compaction"] if len(done) == 1 else done
    return [item for item in answer["output"] if item["type"] == "compaction"]


@pytest.mark.parametrize("kind", KINDS)
async def test_recorded_codex_and_agents_sdk_requests_replay_without_protocol_errors(
    kind: str, make_proxy: MakeProxy, make_anthropic_proxy: MakeAnthropicProxy
) -> None:
    upstream = await make_upstream(kind, make_proxy, make_anthropic_proxy)
    last_id, handle, errors = "", "", []
    for name in ORDER:
        recorded = fixture(name)
        body = recorded["body"]
        if body.get("previous_response_id"):  # continue the response served just before
            recorded = {**recorded, "body": {**body, "previous_response_id": last_id}}
        if name == "codex_after_compaction":  # carry back the item the trigger was answered by
            items = [{**i, "encrypted_content": handle} if i.get("type") == "compaction" else i
                     for i in body["input"]]  # fmt: skip
            recorded = {**recorded, "body": {**body, "input": items}}
        compacting = "compact" in name and "after" not in name
        if compacting:
            upstream.summarizes()
        else:
            upstream.say(f"answer to {name}")
        status, answer, events = await post(upstream, recorded)
        await settled(upstream.proxy.app)
        if status != 200:
            errors.append(f"{name}: {status} {answer}")
            continue
        if compacting:
            items = compaction_items(events, answer)
            assert len(items) == 1 and len(answer["output"]) == 1, name
            assert items[0]["encrypted_content"].startswith(PREFIX)
            handle = items[0]["encrypted_content"]
        if answer.get("object") == "response":
            valid_response(answer)
            last_id = answer["id"]
    assert errors == []
    sent = upstream.text_sent(upstream.requests[-1])  # the turn after the compaction
    assert "SUMMARY OF EARLIER TURNS" in sent and handle not in sent
    for n, body in enumerate(upstream.requests):
        assert upstream.problem(body) is None, f"upstream request {n}"
