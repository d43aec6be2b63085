"""The real agent sessions of ../shared/traces/, converted to Responses requests, through the
Responses edge and the real stages (pure: no server, no store): every request that leaves is one
the Responses API accepts (and, as a chat request, one a chat upstream accepts), and the edge saves
what the chat-completions route saves.

Each replayed request is a trace's history up to one of its assistant turns (at most
`MAX_REQUESTS` per trace, evenly spaced, the last always), as a Responses client would send it:
the leading system messages as `instructions`, user messages as `input_text`, assistant turns as
output messages and `function_call` items, tool results as `function_call_output` items.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.engine.pipeline import build_stack, draft_from_body, run_stages
from proxy.inbound.chat_request import chat_request
from proxy.inbound.responses_render import internal_to_responses
from proxy.inbound.responses_request import responses_to_internal
from proxy.settings import TenantSettings, UpstreamSettings
from proxy.stages.prune import PruneSettings
from proxy.types import Turn
from tests.e2e.test_trace_replays import replayed_turns
from tests.inbound.builders import chat_problem
from tests.inbound.responses_builders import wire_problem
from tests.traces import TRACE_FILES

JSON = dict[str, Any]
MAX_REQUESTS = 8
TENANT = TenantSettings(prune=PruneSettings(recent_keep=2))
STACK = build_stack(TENANT, UpstreamSettings(kind="openai", cache_style="openai"))
TURN = Turn(tenant="default", session="replay", model="gpt-5", now=1.0, cache_style="openai")

pytestmark = pytest.mark.skipif(not TRACE_FILES, reason="../shared/traces is not available")


def through_stages(chat_body: JSON) -> JSON:
    draft, _ = run_stages(STACK.before, draft_from_body(chat_body), TURN)
    body, _ = STACK.finish(draft, TURN, client_messages=chat_body["messages"])
    return body


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
    return "" if content is None else json.dumps(content)


def to_responses(messages: list[JSON], tools: list[JSON]) -> JSON:
    """A chat-completions history as the Responses request a Responses client would send."""
    lead = 0
    while lead < len(messages) and messages[lead].get("role") in ("system", "developer"):
        lead += 1
    items: list[JSON] = []
    for n, message in enumerate(messages[lead:]):
        role = message.get("role")
        if role == "tool":
            output = text_of(message.get("content"))
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message["tool_call_id"],
                    "output": output,
                }
            )
        elif role == "assistant":
            text = text_of(message.get("content"))
            if text:
                part = {"type": "output_text", "text": text, "annotations": []}
                items.append(
                    {
                        "id": f"msg_{n}",
                        "type": "message",
                        "role": "assistant",
                        "status": "completed",
                        "content": [part],
                    }
                )
            for call in message.get("tool_calls") or ():
                function = call["function"]
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call["id"],
                        "name": function["name"],
                        "arguments": function.get("arguments") or "{}",
                    }
                )
        else:
            part = {"type": "input_text", "text": text_of(message.get("content"))}
            items.append(
                {
                    "type": "message",
                    "role": "system" if role == "system" else "user",
                    "content": [part],
                }
            )
    body: JSON = {"model": "gpt-5", "input": items, "store": False}
    if lead:
        body["instructions"] = "\n\n".join(text_of(m.get("content")) for m in messages[:lead])
    if tools:
        body["tools"] = [
            {"type": "function", "strict": False, **t["function"]}
            for t in tools
            if t.get("type") == "function"
        ]
    return body


def size(body: JSON) -> int:
    """Characters of the prompt a body holds: instructions and input, or system and messages."""
    if "input" in body:
        return len(orjson.dumps([body.get("instructions"), body["input"]]))
    return len(orjson.dumps(body["messages"]))


@pytest.mark.parametrize("path", TRACE_FILES, ids=lambda p: p.stem)
def test_a_trace_through_the_responses_edge_is_valid_and_saves_as_the_chat_route(
    path: Path,
) -> None:
    trace = json.loads(path.read_text(encoding="utf-8"))
    tools = {"tools": trace["tools"]} if trace.get("tools") else {}
    sent = kept = chat_sent = chat_kept = 0
    for turn in replayed_turns(trace["messages"], limit=MAX_REQUESTS):
        request = to_responses(trace["messages"][:turn], trace.get("tools") or [])
        assert wire_problem(request) is None, f"turn {turn}: the conversion itself"
        internal, carrier = responses_to_internal(request)
        prepared = through_stages(internal)
        out = internal_to_responses(prepared, carrier)
        assert wire_problem(out) is None, f"turn {turn}"
        assert chat_problem(chat_request(prepared)) is None, f"turn {turn}"
        chat_body = {"model": "gpt-5", "messages": trace["messages"][:turn], **tools}
        sent, kept = sent + size(request), kept + size(out)
        chat_sent, chat_kept = (
            chat_sent + size(chat_body),
            chat_kept + size(through_stages(chat_body)),
        )
    saved, chat_saved = 1 - kept / sent, 1 - chat_kept / chat_sent
    print(f"{path.stem}: Responses edge saves {saved:.1%}, chat route {chat_saved:.1%}")
    assert abs(saved - chat_saved) < 0.03
