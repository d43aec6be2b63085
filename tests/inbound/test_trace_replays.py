"""The real agent sessions of ../shared/traces/, converted to Messages requests, through the
Messages edge and the real stages (pure: no server, no store): every request that leaves is one
the Messages API accepts, and the edge saves what the chat-completions route saves.

Each replayed request is a trace's history up to one of its assistant turns (at most
`MAX_REQUESTS` per trace, evenly spaced, the last always), translated to the Messages API by
`proxy.translate.anthropic_request` as a chat client's body would be for an Anthropic upstream.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.engine.pipeline import build_stack, draft_from_body, run_stages
from proxy.inbound.messages_render import internal_to_messages
from proxy.inbound.messages_request import messages_to_internal
from proxy.settings import TenantSettings, UpstreamSettings
from proxy.stages.prune import PruneSettings
from proxy.translate.anthropic_request import to_messages_request
from proxy.types import Turn
from tests.e2e.test_trace_replays import replayed_turns
from tests.inbound.builders import wire_problem
from tests.traces import TRACE_FILES

MAX_REQUESTS = 8
TENANT = TenantSettings(prune=PruneSettings(recent_keep=2))
STACK = build_stack(TENANT, UpstreamSettings(kind="anthropic", cache_style="anthropic"))
TURN = Turn(tenant="default", session="replay", model="claude-x", now=1.0, cache_style="anthropic")

pytestmark = pytest.mark.skipif(not TRACE_FILES, reason="../shared/traces is not available")


def through_stages(chat_body: dict[str, Any]) -> dict[str, Any]:
    draft, _ = run_stages(STACK.before, draft_from_body(chat_body), TURN)
    body, _ = STACK.finish(draft, TURN, client_messages=chat_body["messages"])
    return body


def size(body: dict[str, Any]) -> int:
    """Characters of the prompt a body holds: its system and messages as JSON."""
    return len(orjson.dumps([body.get("system"), body["messages"]]))


@pytest.mark.parametrize("path", TRACE_FILES, ids=lambda p: p.stem)
def test_a_trace_through_the_messages_edge_is_valid_and_saves_as_the_chat_route(
    path: Path,
) -> None:
    trace = json.loads(path.read_text(encoding="utf-8"))
    tools = {"tools": trace["tools"]} if trace.get("tools") else {}
    sent = kept = chat_sent = chat_kept = 0
    for turn in replayed_turns(trace["messages"], limit=MAX_REQUESTS):
        chat_body = {"model": "claude-x", "messages": trace["messages"][:turn], **tools}
        request = to_messages_request(chat_body)
        internal, carrier = messages_to_internal(request)
        out = internal_to_messages(through_stages(internal), carrier)
        assert wire_problem(out) is None, f"turn {turn}"
        sent, kept = sent + size(request), kept + size(out)
        chat_sent, chat_kept = (
            chat_sent + size(chat_body),
            chat_kept + size(through_stages(chat_body)),
        )
    saved, chat_saved = 1 - kept / sent, 1 - chat_kept / chat_sent
    print(f"{path.stem}: Messages edge saves {saved:.1%}, chat route {chat_saved:.1%}")
    assert abs(saved - chat_saved) < 0.03
