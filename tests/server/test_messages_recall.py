"""The recall tool on `POST /v1/messages`: the `anthropic` SDK → ctxproxy → a fake upstream
playing a model that calls `ctx_recall` whenever it is offered. A Messages client never sees the
tool: no `tool_use` of it, whichever upstream kind serves the route."""

from __future__ import annotations

from typing import Any, Literal

import pytest

from tests.e2e.agent import tool_call
from tests.fakes import openai_upstream
from tests.fakes.anthropic_upstream import Reply, text, tool_use
from tests.server.messages_support import MODEL, MakeMessagesProxy, make_messages_proxy
from tests.server.test_messages import READ_TOOL, long_session

__all__ = ["make_messages_proxy"]  # the fixture, imported for pytest

JSON = dict[str, Any]


def tool_names(body: JSON) -> list[str]:
    """The names of a Messages or a chat request's tools."""
    return [str((t.get("function") or t).get("name")) for t in body.get("tools") or []]


def recall_when_offered(body: JSON) -> Reply:
    """A model that calls every tool it is offered named `ctx_recall`, else answers."""
    if "ctx_recall" in tool_names(body):
        return tool_use(("toolu_r1", "ctx_recall", {"ref": "toolu_0"}), lead="Checking. ")
    return text("No recall here.")


def chat_recall_when_offered(body: JSON) -> openai_upstream.Reply:
    """`recall_when_offered` on the chat completions API."""
    if "ctx_recall" in tool_names(body):
        call = tool_call("call_r1", "ctx_recall", ref="toolu_0")
        return openai_upstream.Reply(lead="Checking. ", tool_calls=[call])
    return openai_upstream.Reply(content="No recall here.")


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_a_messages_client_is_never_handed_a_recall_tool_use(
    make_messages_proxy: MakeMessagesProxy, kind: Literal["anthropic", "openai"]
) -> None:
    proxy = await make_messages_proxy(kind=kind)
    anthropic = kind == "anthropic"
    proxy.fake.respond = recall_when_offered if anthropic else chat_recall_when_offered
    async with proxy.client() as client:
        raw = await client.messages.with_raw_response.create(
            model=MODEL, max_tokens=10, messages=long_session(), tools=[READ_TOOL]
        )
    answer = await raw.parse()
    assert int(raw.headers["x-ctx-pruned-chars"]) > 0  # something was cut: the tool may be offered
    used = [b.name for b in answer.content if b.type == "tool_use"]
    assert "ctx_recall" not in used
    assert all(name in tool_names({"tools": [READ_TOOL]}) for name in used)
